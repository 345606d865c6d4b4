// Config values: integers, durations, the MySQL DSN, identifier and subject rules.
#include <charconv>
#include <regex>

#include <fmt/format.h>

#include "config/config.h"

namespace outbox {

int64_t parseInteger(const std::string& key, const std::string& text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw ConfigError(key, fmt::format("expected an integer, got '{}'", text));
  }
  return value;
}

Duration parseDuration(const std::string& key, const std::string& text) {
  if (text == "0") return Duration(0);
  static const std::regex part(R"((\d+)(ms|s|m|h|d))");
  if (text.empty()) throw ConfigError(key, "empty duration");
  int64_t total = 0;
  auto begin = std::sregex_iterator(text.begin(), text.end(), part);
  size_t consumed = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    if (static_cast<size_t>(it->position()) != consumed) break;
    consumed += it->length();
    int64_t n = parseInteger(key, (*it)[1].str());
    std::string unit = (*it)[2].str();
    int64_t scale = unit == "ms" ? 1 : unit == "s" ? 1000 : unit == "m" ? 60'000 : unit == "h" ? 3'600'000 : 86'400'000;
    total += n * scale;
  }
  if (consumed != text.size()) {
    throw ConfigError(key, fmt::format("'{}' is not a duration (use e.g. 250ms, 30s, 2m, 1h)", text));
  }
  return Duration(total);
}

std::string formatDuration(Duration d) {
  int64_t ms = d.count();
  if (ms == 0) return "0";
  if (ms % 3'600'000 == 0) return fmt::format("{}h", ms / 3'600'000);
  if (ms % 60'000 == 0) return fmt::format("{}m", ms / 60'000);
  if (ms % 1000 == 0) return fmt::format("{}s", ms / 1000);
  return fmt::format("{}ms", ms);
}

namespace {

std::string percentDecode(const std::string& key, const std::string& in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size() || !std::isxdigit(static_cast<unsigned char>(in[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(in[i + 2]))) {
      throw ConfigError(key, "bad %-escape in the user or password");
    }
    out.push_back(static_cast<char>(std::stoi(in.substr(i + 1, 2), nullptr, 16)));
    i += 2;
  }
  return out;
}

}  // namespace

Dsn Dsn::parse(const std::string& key, const std::string& text) {
  const std::string scheme = "mysql://";
  const char* form = "expected mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?socket=PATH]";
  if (text.rfind(scheme, 0) != 0) throw ConfigError(key, std::string("must start with mysql:// (") + form + ")");
  std::string rest = text.substr(scheme.size());
  size_t at = rest.rfind('@', rest.find('/'));
  if (at == std::string::npos) throw ConfigError(key, std::string("no USER@ (") + form + ")");
  Dsn dsn;
  std::string userinfo = rest.substr(0, at);
  rest = rest.substr(at + 1);
  size_t colon = userinfo.find(':');
  dsn.user = percentDecode(key, userinfo.substr(0, colon));
  if (colon != std::string::npos) dsn.password = percentDecode(key, userinfo.substr(colon + 1));
  if (dsn.user.empty()) throw ConfigError(key, "the user is empty");

  size_t slash = rest.find('/');
  if (slash == std::string::npos) throw ConfigError(key, std::string("no /DATABASE (") + form + ")");
  std::string hostport = rest.substr(0, slash);
  std::string pathquery = rest.substr(slash + 1);
  size_t portColon = hostport.rfind(':');
  dsn.host = hostport.substr(0, portColon);
  if (portColon != std::string::npos) {
    std::string port = hostport.substr(portColon + 1);
    int64_t p = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535) {
      throw ConfigError(key, fmt::format("bad port '{}'", port));
    }
    dsn.port = static_cast<unsigned>(p);
  }
  if (dsn.host.empty()) throw ConfigError(key, "the host is empty");

  size_t q = pathquery.find('?');
  dsn.database = pathquery.substr(0, q);
  if (!isSqlIdentifier(dsn.database)) {
    throw ConfigError(key, fmt::format("database '{}' must match ^[A-Za-z_][A-Za-z0-9_]{{0,63}}$", dsn.database));
  }
  if (q != std::string::npos) {
    std::string query = pathquery.substr(q + 1);
    std::stringstream parts(query);
    std::string item;
    while (std::getline(parts, item, '&')) {
      size_t eq = item.find('=');
      std::string name = item.substr(0, eq);
      std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
      if (name == "socket" && !value.empty()) {
        dsn.socket = percentDecode(key, value);
      } else {
        throw ConfigError(key, fmt::format("unknown DSN parameter '{}' (only socket=PATH)", name));
      }
    }
  }
  return dsn;
}

std::string Dsn::masked() const {
  std::string out = "mysql://" + user;
  if (!password.empty()) out += ":****";
  out += "@" + host + ":" + std::to_string(port) + "/" + database;
  if (!socket.empty()) out += "?socket=" + socket;
  return out;
}

bool isSqlIdentifier(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  auto c0 = static_cast<unsigned char>(name[0]);
  if (!(std::isalpha(c0) || c0 == '_') || c0 > 127) return false;
  return std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return c < 128 && (std::isalnum(c) || c == '_');
  });
}

bool isSubjectToken(const std::string& token) {
  if (token.empty()) return false;
  return std::all_of(token.begin(), token.end(), [](unsigned char c) {
    return c > 32 && c != 127 && c != '.' && c != '*' && c != '>';
  });
}

}  // namespace outbox

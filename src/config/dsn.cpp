// The MySQL DSN of a source or a doorbell (Dsn::parse, Dsn::render): its form, its %-escapes,
// its host and port, and its parameters (ssl-mode and the TLS files). README, "Configuration".
#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "config/config.h"

namespace outbox {

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

const char* sslModeName(SslMode mode) {
  switch (mode) {
    case SslMode::kDisabled: return "DISABLED";
    case SslMode::kPreferred: return "PREFERRED";
    case SslMode::kRequired: return "REQUIRED";
    case SslMode::kVerifyCa: return "VERIFY_CA";
    case SslMode::kVerifyIdentity: return "VERIFY_IDENTITY";
  }
  return "?";
}

namespace {

constexpr const char* kDsnForm = "expected mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAM=VALUE&...]";

// HOST[:PORT], HOST an IPv6 address in brackets.
void parseHostPort(const std::string& key, const std::string& hostport, Dsn& dsn) {
  std::string port;
  if (!hostport.empty() && hostport.front() == '[') {
    size_t close = hostport.find(']');
    if (close == std::string::npos) throw ConfigError(key, "an IPv6 host without its closing ']'");
    dsn.host = hostport.substr(1, close - 1);
    std::string after = hostport.substr(close + 1);
    if (!after.empty() && after.front() != ':') {
      throw ConfigError(key, fmt::format("'{}' after the IPv6 host", shownValue(after)));
    }
    if (!after.empty()) port = after.substr(1);
    if (dsn.host.find(':') == std::string::npos) {
      throw ConfigError(key, fmt::format("'{}' is not an IPv6 address", shownValue(dsn.host)));
    }
  } else {
    size_t colon = hostport.rfind(':');
    dsn.host = hostport.substr(0, colon);
    if (colon != std::string::npos) port = hostport.substr(colon + 1);
    if (dsn.host.find(':') != std::string::npos) {
      throw ConfigError(key, "an IPv6 host must be in brackets: mysql://USER@[::1]:3306/DATABASE");
    }
  }
  if (dsn.host.empty()) throw ConfigError(key, "the host is empty");
  if (!isHostOrAddress(dsn.host)) {
    throw ConfigError(key, fmt::format("the host '{}' is not a host name or an IP address", shownValue(dsn.host)));
  }
  if (!port.empty() || hostport.back() == ':') {
    int64_t p = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535) {
      throw ConfigError(key, fmt::format("bad port '{}'", shownValue(port)));
    }
    dsn.port = static_cast<unsigned>(p);
  }
}

// The ssl-mode a DSN without one has: a CA given is a certificate to check, which PREFERRED (plain
// text when the server offers no TLS, or someone strips it) would not promise; a client
// certificate needs TLS; a local socket needs none.
SslMode defaultSslMode(const Dsn& dsn) {
  if (!dsn.sslCa.empty()) return SslMode::kVerifyCa;
  if (!dsn.sslCert.empty() || !dsn.sslKey.empty()) return SslMode::kRequired;
  return dsn.socket.empty() ? SslMode::kPreferred : SslMode::kDisabled;
}

void parseParameters(const std::string& key, const std::string& query, Dsn& dsn) {
  bool modeGiven = false;
  if (query.empty() || query.back() == '&' || query.find("&&") != std::string::npos) {
    throw ConfigError(key, "an empty DSN parameter (a '?' or '&' with nothing after it)");
  }
  std::set<std::string> given;
  std::stringstream parts(query);
  std::string item;
  while (std::getline(parts, item, '&')) {
    size_t eq = item.find('=');
    std::string name = item.substr(0, eq);
    if (!given.insert(name).second) {
      throw ConfigError(key, fmt::format("DSN parameter '{}' given twice", shownValue(name)));
    }
    std::string value = eq == std::string::npos ? "" : percentDecode(key, item.substr(eq + 1));
    if (value.empty()) throw ConfigError(key, fmt::format("DSN parameter '{}' has no value", shownValue(name)));
    if (value.find('\0') != std::string::npos) {
      throw ConfigError(key, fmt::format("DSN parameter '{}' holds %00 (a NUL), where the MySQL client would cut it",
                                         shownValue(name)));
    }
    if (name == "socket") {
      dsn.socket = value;
    } else if (name == "ssl-mode") {
      std::string upper = value;
      for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      bool known = false;
      for (SslMode m : {SslMode::kDisabled, SslMode::kPreferred, SslMode::kRequired, SslMode::kVerifyCa,
                        SslMode::kVerifyIdentity}) {
        if (upper == sslModeName(m)) {
          dsn.sslMode = m;
          known = true;
        }
      }
      if (!known) {
        throw ConfigError(key, fmt::format("ssl-mode '{}' is not one of DISABLED, PREFERRED, REQUIRED, VERIFY_CA, "
                                           "VERIFY_IDENTITY",
                                           shownValue(value)));
      }
      modeGiven = true;
    } else if (name == "ssl-ca") {
      dsn.sslCa = value;
    } else if (name == "ssl-cert") {
      dsn.sslCert = value;
    } else if (name == "ssl-key") {
      dsn.sslKey = value;
    } else {
      throw ConfigError(key,
                        fmt::format("unknown DSN parameter '{}' (known: socket, ssl-mode, ssl-ca, ssl-cert, ssl-key)",
                                    shownValue(name)));
    }
  }
  // The library uses a socket only for localhost; for another host it would go over TCP.
  if (!dsn.socket.empty() && dsn.host != "localhost") {
    throw ConfigError(key, fmt::format("socket= needs the host localhost, not '{}'", shownValue(dsn.host)));
  }
  const bool anyFile = !dsn.sslCa.empty() || !dsn.sslCert.empty() || !dsn.sslKey.empty();
  if (!modeGiven) dsn.sslMode = defaultSslMode(dsn);
  if (dsn.sslMode == SslMode::kDisabled && anyFile) {
    throw ConfigError(key, "ssl-ca, ssl-cert and ssl-key need TLS, but ssl-mode is DISABLED");
  }
  if (dsn.sslMode == SslMode::kPreferred && anyFile) {
    throw ConfigError(key, "ssl-mode PREFERRED falls back to plain text: with ssl-ca, ssl-cert or ssl-key use "
                           "REQUIRED, VERIFY_CA or VERIFY_IDENTITY");
  }
  if (dsn.sslCert.empty() != dsn.sslKey.empty()) throw ConfigError(key, "ssl-cert and ssl-key go together");
  if (dsn.sslMode == SslMode::kVerifyCa && dsn.sslCa.empty()) {
    throw ConfigError(key, "ssl-mode VERIFY_CA needs ssl-ca=PATH (the CA that signed the server's certificate)");
  }
}

}  // namespace

Dsn Dsn::parse(const std::string& key, const std::string& text, bool databaseRequired) {
  const std::string scheme = "mysql://";
  if (text.rfind(scheme, 0) != 0) throw ConfigError(key, std::string("must start with mysql:// (") + kDsnForm + ")");
  std::string rest = text.substr(scheme.size());
  // USER[:PASSWORD] ends at the first '@'. Another '@' before the parameters, or a '/', '?' or '#'
  // in it, and where the password ends is a guess: whichever way it went, part of the password
  // would be echoed as a port, a host or a database. Refuse, and echo nothing of it.
  size_t at = rest.find('@');
  if (at == std::string::npos) throw ConfigError(key, std::string("no USER@ (") + kDsnForm + ")");
  const size_t path = rest.find('/', at);
  const size_t query = rest.find('?', path == std::string::npos ? at : path);
  if (rest.find_first_of("/?#[]", 0) < at || rest.find('@', at + 1) < query) {
    throw ConfigError(key, "the user or password holds an unescaped '@', '/', '?', '#', '[' or ']', so where it ends "
                           "is ambiguous: %-escape them (@ as %40, / as %2F, ? as %3F, # as %23)");
  }
  Dsn dsn;
  std::string userinfo = rest.substr(0, at);
  rest = rest.substr(at + 1);
  size_t colon = userinfo.find(':');
  dsn.user = percentDecode(key, userinfo.substr(0, colon));
  if (colon != std::string::npos) dsn.password = percentDecode(key, userinfo.substr(colon + 1));
  if (dsn.user.empty()) throw ConfigError(key, "the user is empty");
  // The user is shown wherever the DSN is (logs, check-config): nothing there may act on a terminal.
  if (std::string problem = printableProblem(dsn.user); !problem.empty() && dsn.user.find('\0') == std::string::npos) {
    throw ConfigError(key, fmt::format("the user '{}' {}", shownValue(dsn.user), problem));
  }
  // The MySQL client takes C strings: a NUL would cut the name or the password there.
  if (dsn.user.find('\0') != std::string::npos || dsn.password.find('\0') != std::string::npos) {
    throw ConfigError(key, "the user or password holds %00 (a NUL), which the MySQL client cannot send");
  }

  size_t slash = rest.find('/');
  if (slash == std::string::npos) throw ConfigError(key, std::string("no /DATABASE (") + kDsnForm + ")");
  parseHostPort(key, rest.substr(0, slash), dsn);
  std::string pathquery = rest.substr(slash + 1);
  size_t q = pathquery.find('?');
  dsn.database = pathquery.substr(0, q);
  if ((databaseRequired || !dsn.database.empty()) && !isSqlIdentifier(dsn.database)) {
    throw ConfigError(
        key, fmt::format("database '{}' must match ^[A-Za-z_][A-Za-z0-9_]{{0,63}}$", shownValue(dsn.database)));
  }
  if (q != std::string::npos) parseParameters(key, pathquery.substr(q + 1), dsn);
  return dsn;
}

std::string Dsn::masked() const {
  std::string out = "mysql://" + user;
  if (!password.empty()) out += ":****";
  out += "@" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port) + "/" +
         database;
  std::vector<std::string> params;
  if (!socket.empty()) params.push_back("socket=" + socket);
  if (sslMode != defaultSslMode(*this)) params.push_back(std::string("ssl-mode=") + sslModeName(sslMode));
  if (!sslCa.empty()) params.push_back("ssl-ca=" + sslCa);
  if (!sslCert.empty()) params.push_back("ssl-cert=" + sslCert);
  if (!sslKey.empty()) params.push_back("ssl-key=" + sslKey);
  for (size_t i = 0; i < params.size(); ++i) out += (i == 0 ? "?" : "&") + params[i];
  return out;
}

}  // namespace outbox

// Config values: integers, durations, the MySQL DSN, identifier and subject rules.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <string_view>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "common/utf8.h"
#include "config/config.h"

namespace outbox {

std::string shownValue(const std::string& value) {
  constexpr size_t kShown = 100;
  std::string out;
  size_t i = 0;
  while (i < value.size() && i < kShown) {
    const auto c = static_cast<unsigned char>(value[i]);
    const size_t length = utf8SequenceAt(value, i);
    if (c < 32 || c == 127 || length == 0) {
      out += fmt::format("\\x{:02x}", c);  // a control character, or a byte that is no UTF-8
      ++i;
      continue;
    }
    // C1 controls (U+0080-U+009F: some terminals take U+009B as CSI) and the bidirectional
    // overrides and isolates (U+202A-U+202E, U+2066-U+2069: text shown in another order).
    const std::string_view sequence(value.data() + i, length);
    const bool c1 = length == 2 && c == 0xC2 && static_cast<unsigned char>(value[i + 1]) < 0xA0;
    const bool bidi = (sequence >= "\u202A" && sequence <= "\u202E") || (sequence >= "\u2066" && sequence <= "\u2069");
    if (c1 || bidi) {
      for (unsigned char b : sequence) out += fmt::format("\\x{:02x}", b);
    } else {
      out += sequence;
    }
    i += length;
  }
  if (i < value.size()) out += fmt::format("... ({} bytes)", value.size());
  return out;
}

std::string printableProblem(const std::string& text) {
  for (unsigned char c : text) {
    if (c < 32 || c == 127) return "holds a control character";
  }
  if (!text.empty() && (text.front() == ' ' || text.back() == ' ')) return "has a blank at an end";
  return "";
}

int64_t parseInteger(const std::string& key, const std::string& text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) {
    throw ConfigError(key, fmt::format("'{}' is out of range", shownValue(text)));
  }
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw ConfigError(key, fmt::format("expected an integer, got '{}'", shownValue(text)));
  }
  return value;
}

// A loop, not a regular expression: std::regex recurses once per character, and ~50,000 digits
// overflowed the stack. Every sum and product is checked: a duration that does not fit is an
// error, never a wrapped value.
Duration parseDuration(const std::string& key, const std::string& text) {
  if (text == "0") return Duration(0);
  if (text.empty()) throw ConfigError(key, "empty duration");
  auto notADuration = [&] {
    return ConfigError(key, fmt::format("'{}' is not a duration (use e.g. 250ms, 30s, 2m, 1h)", shownValue(text)));
  };
  auto outOfRange = [&] {
    return ConfigError(key, fmt::format("'{}' is out of range (at most {}d)", shownValue(text),
                                        kMaxDuration.count() / 86'400'000));
  };
  int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    const size_t digits = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    const size_t unitStart = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    if (digits == unitStart || unitStart == i) throw notADuration();
    const std::string_view unit(text.data() + unitStart, i - unitStart);
    const int64_t scale = unit == "ms" ? 1
                          : unit == "s" ? 1000
                          : unit == "m" ? 60'000
                          : unit == "h" ? 3'600'000
                          : unit == "d" ? 86'400'000
                                        : 0;
    if (scale == 0) throw notADuration();
    int64_t n = 0;
    auto [end, ec] = std::from_chars(text.data() + digits, text.data() + unitStart, n);
    if (ec != std::errc() || end != text.data() + unitStart) throw outOfRange();
    int64_t part = 0;
    if (__builtin_mul_overflow(n, scale, &part) || __builtin_add_overflow(total, part, &total) ||
        total > kMaxDuration.count()) {
      throw outOfRange();
    }
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

const char* wakeName(Wake wake) {
  switch (wake) {
    case Wake::kAuto: return "auto";
    case Wake::kBinlog: return "binlog";
    case Wake::kPoll: return "poll";
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

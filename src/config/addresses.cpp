// Network addresses a config or a flag names: listen addresses, nats-server URLs, a bridge's base
// URL. Checked where they enter, so that what the libraries would refuse later (or misread: a
// port 99999, a trailing space, credentials to be printed with the URL) is a config error now.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

#include "config/config.h"

namespace outbox {

namespace {

bool isHostName(const std::string& host) {
  if (host.empty() || host.size() > 253 || host.front() == '-' || host.front() == '.') return false;
  return std::all_of(host.begin(), host.end(), [](unsigned char c) {
    return c < 128 && (std::isalnum(c) || c == '.' || c == '-' || c == '_');
  });
}

bool isIpv6(const std::string& host) {
  return !host.empty() && host.find(':') != std::string::npos &&
         std::all_of(host.begin(), host.end(),
                     [](unsigned char c) { return std::isxdigit(c) || c == ':' || c == '.'; });
}

// HOST[:PORT] (HOST a name, an IPv4 address or [IPv6]); "" when it is one, else why not. `host`
// and `port` get the parts (the host without brackets).
std::string hostPortProblem(const std::string& text, bool portRequired, int minPort, int* port = nullptr,
                            std::string* hostOut = nullptr) {
  std::string host, digits;
  bool hasPort = false;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos) return "an IPv6 host without its closing ']'";
    host = text.substr(1, close - 1);
    if (!isIpv6(host)) return "the host in brackets is not an IPv6 address";
    std::string after = text.substr(close + 1);
    if (!after.empty() && after.front() != ':') return "something other than :PORT after the host";
    hasPort = !after.empty();
    if (hasPort) digits = after.substr(1);
  } else {
    size_t colon = text.find(':');
    host = text.substr(0, colon);
    hasPort = colon != std::string::npos;
    if (hasPort) digits = text.substr(colon + 1);
    if (host.empty()) return "the host is empty (e.g. 127.0.0.1, or 0.0.0.0 for every interface)";
    if (!isHostName(host)) return "the host is not a name or an address (an IPv6 address goes in brackets)";
  }
  if (!hasPort) return portRequired ? "no :PORT" : "";
  int p = -1;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), p);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || p < minPort || p > 65535) {
    return fmt::format("the port must be a number from {} to 65535", minPort);
  }
  if (port != nullptr) *port = p;
  if (hostOut != nullptr) *hostOut = host;
  return "";
}

bool isIpAddress(const std::string& host) {
  unsigned char buffer[sizeof(struct in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buffer) == 1 || ::inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

bool isWildcard(const std::string& host) { return host == "0.0.0.0" || host == "::"; }
bool isLoopback(const std::string& host) { return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0; }

// HOST[:PORT] of `url` after one of `schemes` (and a trailing '/'); nullopt without one of them.
std::optional<std::string> afterScheme(const std::string& url, std::initializer_list<std::string_view> schemes) {
  for (std::string_view scheme : schemes) {
    if (url.rfind(scheme, 0) != 0) continue;
    std::string rest = url.substr(scheme.size());
    if (!rest.empty() && rest.back() == '/') rest.pop_back();
    return rest;
  }
  return std::nullopt;
}

// A URL as a message may show it: never its query or fragment (a token or password may travel
// there), cut and escaped like any value.
std::string shownUrl(const std::string& url) {
  const size_t query = url.find_first_of("?#");
  if (query == std::string::npos) return shownValue(url);
  return shownValue(url.substr(0, query)) + url[query] + "...";
}

}  // namespace

void checkListen(const std::string& key, const std::string& listen) {
  std::string host;
  std::string problem = hostPortProblem(listen, true, 0, nullptr, &host);
  // The server binds an address, not a name it would have to resolve (one name, many addresses).
  if (problem.empty() && host != "localhost" && !isIpAddress(host)) {
    problem = "the host must be an IP address or localhost (0.0.0.0 or [::] for every interface)";
  }
  if (!problem.empty()) {
    throw ConfigError(key, fmt::format("'{}' is not HOST:PORT: {}", shownValue(listen), problem));
  }
}

bool listenersCollide(const std::string& a, const std::string& b) {
  std::string hostA, hostB;
  int portA = 0, portB = 0;
  if (!hostPortProblem(a, true, 0, &portA, &hostA).empty() || !hostPortProblem(b, true, 0, &portB, &hostB).empty()) {
    return false;
  }
  if (portA != portB || portA == 0) return false;  // port 0: each gets a free port of its own
  for (auto* host : {&hostA, &hostB}) {
    std::transform(host->begin(), host->end(), host->begin(), [](unsigned char c) { return std::tolower(c); });
  }
  return hostA == hostB || isWildcard(hostA) || isWildcard(hostB) || (isLoopback(hostA) && isLoopback(hostB));
}

bool isHostOrAddress(const std::string& name) { return isHostName(name) || isIpAddress(name); }

void checkNatsUrls(const std::string& key, const std::string& urls) {
  if (urls.empty()) throw ConfigError(key, "is empty");
  std::stringstream list(urls);
  std::string url;
  size_t count = 0;
  while (std::getline(list, url, ',')) {
    ++count;
    // Credentials in a URL would be shown wherever the URL is (logs, errors, check-config).
    if (url.find('@') != std::string::npos) {
      throw ConfigError(key, "no credentials in the URL: set user and password_file, or token_file");
    }
    const auto rest = afterScheme(url, {"nats://", "tls://"});
    if (!rest) throw ConfigError(key, fmt::format("'{}' must start with nats:// or tls://", shownUrl(url)));
    if (url.find_first_of("?#") != std::string::npos) {
      throw ConfigError(key, fmt::format("'{}': no query or fragment in the URL (not shown)", shownUrl(url)));
    }
    std::string problem = hostPortProblem(*rest, false, 1);
    if (!problem.empty()) throw ConfigError(key, fmt::format("'{}': {}", shownUrl(url), problem));
  }
  if (count == 0 || urls.back() == ',') throw ConfigError(key, "an empty server in the list");
}

void checkHttpBaseUrl(const std::string& key, const std::string& url) {
  if (url.find('@') != std::string::npos) {
    throw ConfigError(key, "no credentials in the URL (it is printed in messages): give http[s]://HOST[:PORT]");
  }
  const auto rest = afterScheme(url, {"http://", "https://"});
  if (!rest) throw ConfigError(key, fmt::format("'{}' must start with http:// or https://", shownUrl(url)));
  if (url.find_first_of("?#") != std::string::npos) {
    throw ConfigError(key, fmt::format("'{}' is not http[s]://HOST[:PORT]: a query or fragment (not shown) follows it",
                                       shownUrl(url)));
  }
  std::string problem = hostPortProblem(*rest, false, 1);
  if (!problem.empty()) {
    throw ConfigError(key, fmt::format("'{}' is not http[s]://HOST[:PORT]: {}", shownUrl(url), problem));
  }
}

}  // namespace outbox

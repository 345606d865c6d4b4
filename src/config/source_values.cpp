// The rules a [[source]] value follows on its own, beside its keys' declaration (source.cpp).
#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "config/section.h"

namespace outbox::config_detail {

// A stream name becomes a subject token of nats-server's API and a directory name.
std::string streamNameProblem(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name.size() > 255) return fmt::format("is {} characters long: at most 255", name.size());
  const bool plain = std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return c > 32 && c < 127 && c != '.' && c != '*' && c != '>' && c != '/' && c != '\\';
  });
  return plain ? "" : "is not a valid stream name: printable ASCII without spaces, '.', '*', '>', '/' or '\\'";
}

void checkStreamName(const std::string& key, const std::string& name) {
  if (std::string problem = streamNameProblem(name); !problem.empty()) {
    throw ConfigError(key, fmt::format("'{}' {}", shownValue(name), problem));
  }
}

bool isSubject(const std::string& subject) {
  if (subject.empty()) return false;
  size_t start = 0;
  while (true) {
    size_t dot = subject.find('.', start);
    std::string token = subject.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!isSubjectToken(token)) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

std::string snapshotPathProblem(const std::string& path) {
  if (path.front() != '/') return "must start with '/'";
  if (path.size() > 1024) return "is longer than 1024 characters";
  const bool plain = std::all_of(path.begin(), path.end(), [](unsigned char c) {
    return c < 128 && (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~');
  });
  if (!plain) return "may hold only letters, digits and / - _ . ~";
  if (path.find("//") != std::string::npos || path.find("/./") != std::string::npos ||
      path.find("/../") != std::string::npos || path.ends_with("/.") || path.ends_with("/..")) {
    return "must not hold an empty, '.' or '..' segment";
  }
  for (const char* route : {"/", "/metrics", "/healthz", "/readyz", "/v1"}) {
    if (path == route) return fmt::format("would shadow the bridge's own route {}", route);
  }
  if (path.rfind("/v1/", 0) == 0) return "would shadow the bridge's own routes under /v1/";
  return "";
}

}  // namespace outbox::config_detail

#include "config/section.h"

#include <algorithm>
#include <cctype>

namespace outbox::config_detail {

namespace {

std::string trimNewline(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

std::string readSecretFile(const std::string& key, const std::string& path) {
  std::string secret = trimNewline(readSmallFile(key, path, kMaxSecretBytes));
  if (secret.empty()) throw ConfigError(key, fmt::format("'{}' is empty", shownValue(path)));
  if (secret.find('\0') != std::string::npos) throw ConfigError(key, fmt::format("'{}' holds a NUL byte", shownValue(path)));
  return secret;
}

std::string expandCredentialsDirectory(const std::string& key, const std::string& path, const Environment& env) {
  const std::string variable = fmt::format("${{{}}}", kCredentialsDirectoryVariable);
  if (path.rfind(variable, 0) != 0) return path;
  if (path.size() > variable.size() && path[variable.size()] != '/') {
    throw ConfigError(key, fmt::format("'{}': {} is a directory; a '/' and a file name follow it", shownValue(path),
                                       variable));
  }
  auto it = env.find(kCredentialsDirectoryVariable);
  if (it == env.end() || it->second.empty()) {
    throw ConfigError(key, fmt::format("'{}' uses {}, which is not set: systemd sets it in a unit with "
                                       "LoadCredential= (outside one, give the file's own path)",
                                       shownValue(path), variable));
  }
  return it->second + path.substr(variable.size());
}

const toml::table* subTable(const toml::table& root, const std::string& key) {
  const toml::node* node = root.get(key);
  if (node == nullptr) return nullptr;
  if (!node->is_table()) throw ConfigError(key, "expected a table [" + key + "]");
  return node->as_table();
}

int positiveInt(const std::string& key, int64_t value, int64_t max) {
  if (value < 1 || value > max) {
    throw ConfigError(key, fmt::format("must be between 1 and {}, got {}", max, value));
  }
  return static_cast<int>(value);
}

void requireReadable(const std::string& key, const std::string& path, const std::string& what) {
  requireRegularFile(key, path, what);
}

}  // namespace outbox::config_detail

#include "config/keys.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <string_view>

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
  if (secret.find('\0') != std::string::npos) {
    throw ConfigError(key, fmt::format("'{}' holds a NUL byte", shownValue(path)));
  }
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

std::string unexpandedReference(const std::string& secret) {
  if (secret.empty()) return "";
  if (secret.find("${") != std::string::npos) return "holds '${', as an unexpanded ${VARIABLE} would";
  // $VARIABLE or $VARIABLE/...: a shell-style reference, which nothing here expands.
  if (secret.size() > 1 && secret[0] == '$' &&
      (std::isalpha(static_cast<unsigned char>(secret[1])) || secret[1] == '_')) {
    const size_t end = secret.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_", 1);
    if (end == std::string::npos || secret[end] == '/') return "looks like an unexpanded $VARIABLE";
  }
  struct stat st {};
  if ((secret.front() == '/' || secret.rfind("./", 0) == 0 || secret.rfind("~/", 0) == 0) &&
      (secret.front() == '~' || ::stat(secret.c_str(), &st) == 0)) {
    return "looks like a file's path";
  }
  return "";
}

void checkSourceVariablesUnambiguous(const std::vector<std::string>& sourceNames, const Environment& env) {
  checkVariablesUnambiguous("source", sourceNames, env);
}

void checkVariablesUnambiguous(const std::string& kind, const std::vector<std::string>& sourceNames,
                               const Environment& env) {
  const std::string kPrefix = "OUTBOX_BRIDGE_" + upper(kind) + "_";
  std::map<std::string, std::string> byVariableName;  // upper-cased name -> the name
  for (const auto& name : sourceNames) byVariableName.emplace(upper(name), name);
  for (const auto& [variable, value] : env) {
    if (variable.rfind(kPrefix, 0) != 0) continue;
    std::vector<std::string> readings;  // "source.<name>.<key>" for each source it could belong to
    for (size_t end = variable.find('_', kPrefix.size()); end != std::string::npos; end = variable.find('_', end + 1)) {
      auto it = byVariableName.find(variable.substr(kPrefix.size(), end - kPrefix.size()));
      if (it == byVariableName.end() || end + 1 == variable.size()) continue;
      std::string key = variable.substr(end + 1);
      std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
      readings.push_back(kind + "." + it->second + "." + key);
    }
    if (readings.size() > 1) {
      throw ConfigError(variable, fmt::format("is ambiguous: it could set {} or {} (rename a {} so that no name "
                                              "is another's followed by '_')",
                                              readings[0], readings[1], kind));
    }
  }
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

std::string tableName(const toml::table& table, const std::string& kind, size_t index, const Environment& env,
                      const std::string& whenMissing) {
  std::set<std::string> none;  // the name is never taken from the environment
  Section nameOnly(&table, fmt::format("{}[{}].", kind, index), "\x01", env, none);
  auto name = nameOnly.str("name");
  if (!name) throw ConfigError(fmt::format("{}[{}].name", kind, index), whenMissing);
  if (!isSqlIdentifier(*name)) {
    throw ConfigError(fmt::format("{}[{}].name", kind, index),
                      fmt::format("'{}' must match ^[A-Za-z_][A-Za-z0-9_]{{0,63}}$", shownValue(*name)));
  }
  return *name;
}

void checkDsnFiles(Section& sec, const Dsn& dsn) {
  const std::string key = sec.keyName("dsn");
  if (std::string problem = unexpandedReference(dsn.password); !problem.empty()) {
    throw ConfigError(key, fmt::format("the password {}: it is taken as it is, so leave it out of the DSN and set "
                                       "password_file = \"PATH\" (it is not shown)",
                                       problem));
  }
  requireReadable(key, dsn.sslCa, "ssl-ca: ");
  requireReadable(key, dsn.sslCert, "ssl-cert: ");
  requireReadable(key, dsn.sslKey, "ssl-key: ");
}

}  // namespace outbox::config_detail

#pragma once

// Reading one TOML table of the config with environment overrides: the helpers of config.cpp
// (internal to src/config).

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "config/config.h"

namespace outbox::config_detail {

std::string upper(std::string s);
// The secret in the regular file `path` (at most kMaxSecretBytes, one trailing newline dropped);
// a ConfigError naming `key` when it is empty or holds a NUL.
std::string readSecretFile(const std::string& key, const std::string& path);
// `path` with a leading "${CREDENTIALS_DIRECTORY}" replaced by that variable of `env` (systemd's
// LoadCredential= directory); a ConfigError naming `key` when the variable is not set.
std::string expandCredentialsDirectory(const std::string& key, const std::string& path, const Environment& env);
// Throws ConfigError(key, ...) (`what`: a prefix naming the part of the key) unless `path` is
// empty or a readable regular file.
void requireReadable(const std::string& key, const std::string& path, const std::string& what = "");
// The table `key` of `root`, or null when absent; a ConfigError when `key` is not a table.
const toml::table* subTable(const toml::table& root, const std::string& key);
int positiveInt(const std::string& key, int64_t value, int64_t max);

// Reads the keys of one TOML table, letting environment variables override them, and remembers
// which keys it read so that finish() can reject the rest as unknown.
class Section {
 public:
  // `consulted` collects the name of every environment variable the section could read.
  Section(const toml::table* table, std::string keyPrefix, std::string envPrefix, const Environment& env,
          std::set<std::string>& consulted)
      : table_(table), keyPrefix_(std::move(keyPrefix)), envPrefix_(std::move(envPrefix)), env_(env),
        consulted_(consulted) {}

  std::string keyName(const std::string& key) const { return keyPrefix_ + key; }

  std::optional<std::string> str(const std::string& key) {
    read_.insert(key);
    consulted_.insert(envPrefix_ + upper(key));
    if (auto it = env_.find(envPrefix_ + upper(key)); it != env_.end()) return it->second;
    const toml::node* node = table_ ? table_->get(key) : nullptr;
    if (node == nullptr) return std::nullopt;
    if (auto v = node->value<std::string>(); v && node->is_string()) return *v;
    throw ConfigError(keyName(key), "expected a string");
  }

  std::optional<int64_t> integer(const std::string& key) {
    read_.insert(key);
    consulted_.insert(envPrefix_ + upper(key));
    if (auto it = env_.find(envPrefix_ + upper(key)); it != env_.end()) {
      return parseInteger(keyName(key), it->second);
    }
    const toml::node* node = table_ ? table_->get(key) : nullptr;
    if (node == nullptr) return std::nullopt;
    if (!node->is_integer()) throw ConfigError(keyName(key), "expected an integer");
    return node->value<int64_t>();
  }

  std::optional<Duration> duration(const std::string& key) {
    auto text = str(key);
    if (!text) return std::nullopt;
    return parseDuration(keyName(key), *text);
  }

  // What `key` names among `choices`, or nullopt when unset; any other text is an error listing them.
  template <typename T>
  std::optional<T> oneOf(const std::string& key, std::initializer_list<std::pair<std::string_view, T>> choices) {
    auto text = str(key);
    if (!text) return std::nullopt;
    std::string names;
    for (const auto& [name, value] : choices) {
      if (*text == name) return value;
      names += (names.empty() ? "" : ", ") + std::string(name);
    }
    throw ConfigError(keyName(key), fmt::format("'{}' is not one of {}", shownValue(*text), names));
  }

  // A path to a file that must be readable (PEM files, seeds, creds).
  std::optional<std::string> path(const std::string& key) {
    auto v = str(key);
    if (v) {
      *v = expandCredentialsDirectory(keyName(key), *v, env_);
      requireReadable(keyName(key), *v);
    }
    return v;
  }

  // A secret given inline, in `<key>_file`, or by environment; never both inline and file.
  std::optional<std::string> secret(const std::string& key) {
    auto inlineValue = str(key);
    auto file = str(key + "_file");
    if (inlineValue && file) {
      throw ConfigError(keyName(key), fmt::format("set either {} or {}_file, not both", key, key));
    }
    if (file) return readSecretFile(keyName(key + "_file"), expandCredentialsDirectory(keyName(key + "_file"), *file, env_));
    if (inlineValue && inlineValue->find('\0') != std::string::npos) {
      throw ConfigError(keyName(key), "holds a NUL character");
    }
    return inlineValue;
  }

  // `key` is known but not read here (a source's name, read before the section existed); its
  // environment variable stays unknown.
  void markRead(const std::string& key) { read_.insert(key); }

  void finish() const {
    if (table_ == nullptr) return;
    for (const auto& [k, v] : *table_) {
      std::string name(k.str());
      if (!read_.count(name)) throw ConfigError(keyName(name), "unknown key");
    }
  }

 private:
  const toml::table* table_;
  std::string keyPrefix_;
  std::string envPrefix_;
  const Environment& env_;
  std::set<std::string>& consulted_;
  std::set<std::string> read_;
};

// One [[source]] table (index: its place in the file), its rules on its own (source.cpp).
SourceConfig parseSource(const toml::table& table, size_t index, const Environment& env,
                         std::set<std::string>& consulted);
// max_age and duplicate_window, as nats-server will take them.
void streamLimits(Section& sec, SourceConfig& source);
void subjectAndLatest(Section& sec, SourceConfig& source);
// "" when `query` is empty or one SELECT (or WITH ... SELECT) statement; else why not (sql_text.cpp).
std::string snapshotQueryProblem(const std::string& query);
// The rules between sources (sources_apart.cpp): a ConfigError naming both when two would share a
// state row, an outbox table, subjects or a route, or one's table is another's or the bridge's.
void checkSourcesApart(const std::vector<SourceConfig>& sources);

}  // namespace outbox::config_detail

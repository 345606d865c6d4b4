#pragma once

// Reading one TOML table of the config with environment overrides: the helpers of config.cpp
// (internal to src/config).

#include <cstdint>
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
// Why an inline secret looks like a reference to one ("looks like a path", "holds ${...}"), or ""
// when it does not: the config expands no variable in a value, and reads files only by `*_file`.
std::string unexpandedReference(const std::string& secret);
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

  // A NUL in any value is an error: the C libraries would cut the value there (a password_file
  // "db-password\0.old" read "db-password").
  std::optional<std::string> str(const std::string& key) {
    std::optional<std::string> value;
    if (auto it = env_.find(consult(key)); it != env_.end()) {
      value = it->second;
    } else if (const toml::node* node = table_ ? table_->get(key) : nullptr) {
      if (!node->is_string()) throw ConfigError(keyName(key), "expected a string");
      value = node->value<std::string>();
    }
    if (value && value->find('\0') != std::string::npos) throw ConfigError(keyName(key), "holds a NUL character");
    return value;
  }

  std::optional<int64_t> integer(const std::string& key) {
    if (auto it = env_.find(consult(key)); it != env_.end()) {
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
  std::optional<T> oneOf(const std::string& key, const std::vector<std::pair<std::string_view, T>>& choices) {
    auto text = str(key);
    if (!text) return std::nullopt;
    std::string names;
    for (const auto& [name, value] : choices) {
      if (*text == name) return value;
      names += (names.empty() ? "" : ", ") + std::string(name);
    }
    throw ConfigError(keyName(key), fmt::format("'{}' is not one of {}", shownValue(*text), names));
  }

  // A path to a file that must be readable (PEM files, seeds, creds). Empty is an error, in the
  // file or the environment: an empty OUTBOX_BRIDGE_HTTP_TLS_CERT must not turn HTTPS into HTTP,
  // nor an empty OUTBOX_BRIDGE_NATS_TLS_CA drop the CA pin. To go without, leave the key out.
  std::optional<std::string> path(const std::string& key) {
    auto v = str(key);
    if (v) {
      if (v->empty()) throw ConfigError(keyName(key), "is empty: give a file's path, or leave the key out");
      *v = expandCredentialsDirectory(keyName(key), *v, env_);
      requireReadable(keyName(key), *v);
    }
    return v;
  }

  // A secret given inline, in `<key>_file`, or by environment; never both inline and file. An
  // inline secret that looks like a path or a ${VARIABLE} is refused: nothing is expanded there,
  // and "${CREDENTIALS_DIRECTORY}/admin-token" would be taken as the token itself.
  std::optional<std::string> secret(const std::string& key) {
    auto inlineValue = str(key);
    auto file = str(key + "_file");
    if (inlineValue && file) {
      throw ConfigError(keyName(key), fmt::format("set either {} or {}_file, not both", key, key));
    }
    if (file) {
      if (file->empty()) {
        throw ConfigError(keyName(key + "_file"), "is empty: give a file's path, or leave the key out");
      }
      return readSecretFile(keyName(key + "_file"), expandCredentialsDirectory(keyName(key + "_file"), *file, env_));
    }
    if (inlineValue) {
      if (std::string problem = unexpandedReference(*inlineValue); !problem.empty()) {
        throw ConfigError(keyName(key), fmt::format("{}: the value is taken as it is, so read the secret from the file "
                                                    "with {}_file = \"PATH\" (the value is not shown)",
                                                    problem, key));
      }
    }
    return inlineValue;
  }

  // `key` is known but not read here (a source's name, read before the section existed); its
  // environment variable stays unknown.
  void markRead(const std::string& key) { read_.insert(key); }

  // Marks `key` read and returns its environment variable.
  std::string consult(const std::string& key) {
    read_.insert(key);
    std::string variable = envPrefix_ + upper(key);
    consulted_.insert(variable);
    return variable;
  }

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

// The name of the `index`th [[kind]] table ("source", "doorbell"), from the file only: it decides the
// table's environment prefix. A ConfigError naming it (`whenMissing` the reason when absent) unless
// it is an SQL identifier.
std::string tableName(const toml::table& table, const std::string& kind, size_t index, const Environment& env,
                      const std::string& whenMissing);
// A ConfigError naming `origin` when the text nests keys or brackets far deeper than any config
// does, before toml++ (which recurses once per level) parses it (toml_shape.cpp).
void checkTomlShape(const std::string& text, const std::string& origin);
// A ConfigError naming the variable when an OUTBOX_BRIDGE_SOURCE_* variable that is set could
// belong to two sources (OUTBOX_BRIDGE_SOURCE_A_LATEST_STREAM: a's latest_stream, a_latest's stream).
void checkSourceVariablesUnambiguous(const std::vector<std::string>& sourceNames, const Environment& env);
// The same for the tables of `kind` ("doorbell": OUTBOX_BRIDGE_DOORBELL_<NAME>_<KEY>).
void checkVariablesUnambiguous(const std::string& kind, const std::vector<std::string>& names, const Environment& env);
// The [[doorbell]] tables (doorbell.cpp), and the rules between them and the sources: each reaches a
// server of a source it watches, one a server; a server without one has sources of one TLS.
std::vector<DoorbellConfig> parseDoorbells(const toml::node* node, const Environment& env,
                                           std::set<std::string>& consulted);
void checkDoorbells(const Config& config);
// One [[source]] table (index: its place in the file), its rules on its own (source.cpp).
SourceConfig parseSource(const toml::table& table, size_t index, const Environment& env,
                         std::set<std::string>& consulted);
// Why nats-server would refuse `name` for a stream, or "" (source_values.cpp).
std::string streamNameProblem(const std::string& name);
// A ConfigError naming `key` when nats-server would refuse `name` for a stream.
void checkStreamName(const std::string& key, const std::string& name);
// A NATS subject without wildcards.
bool isSubject(const std::string& subject);
// Why `path` may not be a snapshot alias route (it would shadow the bridge's own), or "".
std::string snapshotPathProblem(const std::string& path);
// "" when `query` is empty or one SELECT (or WITH ... SELECT) statement; else why not (sql_text.cpp).
std::string snapshotQueryProblem(const std::string& query);
// The rules between sources (sources_apart.cpp): a ConfigError naming both when two would share a
// state row, an outbox table, subjects or a route, or one's table is another's or the bridge's.
void checkSourcesApart(const std::vector<SourceConfig>& sources);

}  // namespace outbox::config_detail

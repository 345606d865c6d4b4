#include "config/config.h"
#include "config/keys.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

extern char** environ;

namespace outbox {

using namespace config_detail;

const SourceConfig* Config::findSource(const std::string& name) const {
  for (const auto& s : sources) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

Environment processEnvironment() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::string name = entry.substr(0, eq);
    if (name.rfind("OUTBOX_BRIDGE_", 0) == 0 || name == kCredentialsDirectoryVariable) env[name] = entry.substr(eq + 1);
  }
  return env;
}

Config parseConfig(const std::string& tomlText, const Environment& env, const std::string& origin) {
  checkTomlShape(tomlText, origin);
  toml::table root;
  try {
    root = toml::parse(tomlText, origin);
  } catch (const toml::parse_error& e) {
    throw ConfigError(shownValue(origin), fmt::format("TOML syntax error at line {}: {}", e.source().begin.line,
                                          e.description()));
  }
  Config config;
  std::set<std::string> consulted{kConfigEnvironmentVariable};
  for (const auto& [k, v] : root) {
    std::string key(k.str());
    if (key != "nats" && key != "http" && key != "lease" && key != "database" && key != "log" && key != "source" &&
        key != "doorbell") {
      throw ConfigError(
          key, "unknown key (expected [nats], [http], [lease], [database], [log], [[source]] or [[doorbell]])");
    }
  }

  Section nats(subTable(root, "nats"), "nats.", "OUTBOX_BRIDGE_NATS_", env, consulted);
  readKeys(nats, natsKeys(), config.nats);
  Section http(subTable(root, "http"), "http.", "OUTBOX_BRIDGE_HTTP_", env, consulted);
  readKeys(http, httpKeys(), config.http);
  Section lease(subTable(root, "lease"), "lease.", "OUTBOX_BRIDGE_LEASE_", env, consulted);
  readKeys(lease, leaseKeys(), config.lease);
  Section database(subTable(root, "database"), "database.", "OUTBOX_BRIDGE_DATABASE_", env, consulted);
  readKeys(database, databaseKeys(), config.database);
  Section log(subTable(root, "log"), "log.", "OUTBOX_BRIDGE_LOG_", env, consulted);
  readKeys(log, logKeys(), config);

  if (const toml::node* sources = root.get("source")) {
    const toml::array* list = sources->as_array();
    if (list == nullptr) throw ConfigError("source", "expected [[source]] tables");
    std::vector<std::string> sourceNames;
    for (const toml::node& node : *list) {
      if (const toml::table* t = node.as_table()) {
        if (auto name = t->get_as<std::string>("name")) sourceNames.push_back(name->get());
      }
    }
    checkSourceVariablesUnambiguous(sourceNames, env);
    std::set<std::string> names;
    for (size_t i = 0; i < list->size(); ++i) {
      const toml::table* t = (*list)[i].as_table();
      if (t == nullptr) throw ConfigError(fmt::format("source[{}]", i), "expected a table");
      SourceConfig s = parseSource(*t, i, env, consulted);
      if (!names.insert(s.name).second) throw ConfigError("source." + s.name, "defined twice");
      config.sources.push_back(std::move(s));
    }
  }
  checkSourcesApart(config.sources);
  if (config.sources.empty()) throw ConfigError("source", "at least one [[source]] is required");
  config.doorbells = parseDoorbells(root.get("doorbell"), env, consulted);
  checkDoorbells(config);
  for (const auto& [name, value] : env) {
    if (name.rfind("OUTBOX_BRIDGE_", 0) == 0 && !consulted.count(name)) {
      throw ConfigError(name, "unknown environment variable (no config key of that name; a typo?)");
    }
  }
  return config;
}

Config loadConfig(const std::string& path, const Environment& env) {
  return parseConfig(readSmallFile("--config", path, kMaxConfigBytes), env, path);
}

}  // namespace outbox

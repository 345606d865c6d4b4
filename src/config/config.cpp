#include "config/config.h"
#include "config/section.h"

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
    if (key != "nats" && key != "http" && key != "lease" && key != "database" && key != "log" && key != "source") {
      throw ConfigError(key, "unknown key (expected [nats], [http], [lease], [database], [log] or [[source]])");
    }
  }

  Section nats(subTable(root, "nats"), "nats.", "OUTBOX_BRIDGE_NATS_", env, consulted);
  if (auto v = nats.str("url")) config.nats.url = *v;
  checkNatsUrls("nats.url", config.nats.url);
  if (auto v = nats.str("user")) config.nats.user = *v;
  if (auto v = nats.secret("password")) config.nats.password = *v;
  if (auto v = nats.secret("token")) config.nats.token = *v;
  const std::pair<const char*, std::string*> files[] = {
      {"creds_file", &config.nats.credsFile}, {"nkey_seed_file", &config.nats.nkeySeedFile},
      {"tls_ca", &config.nats.tlsCa},         {"tls_cert", &config.nats.tlsCert},
      {"tls_key", &config.nats.tlsKey}};
  for (const auto& [key, field] : files) {
    if (auto v = nats.path(key)) *field = *v;
  }
  if (config.nats.tlsCert.empty() != config.nats.tlsKey.empty()) {
    throw ConfigError(config.nats.tlsCert.empty() ? "nats.tls_cert" : "nats.tls_key", "tls_cert and tls_key go together");
  }
  const int logins = !config.nats.user.empty() + !config.nats.token.empty() + !config.nats.credsFile.empty() +
                     !config.nats.nkeySeedFile.empty();
  if (logins > 1) {
    throw ConfigError("nats", "set one way to log in: user and password, token, creds_file or nkey_seed_file");
  }
  if (!config.nats.password.empty() && config.nats.user.empty()) {
    throw ConfigError("nats.password", "needs nats.user: without it the password is not sent at all");
  }
  if (std::string problem = printableProblem(config.nats.user); !problem.empty()) {
    throw ConfigError("nats.user", fmt::format("'{}' {}", shownValue(config.nats.user), problem));
  }
  if (auto v = nats.str("tls_server_name")) {
    if (!isHostOrAddress(*v)) {
      throw ConfigError("nats.tls_server_name", fmt::format("'{}' is not a host name (letters, digits, '-' and '.'; "
                                                            "at most 253 characters)",
                                                            shownValue(*v)));
    }
    config.nats.tlsServerName = *v;
  }
  // A JetStream domain is one subject token: the API prefix becomes $JS.<domain>.API.
  if (auto v = nats.str("js_domain")) {
    if (!isSubjectToken(*v) || v->size() > 255) {
      throw ConfigError("nats.js_domain", fmt::format("'{}' is not a JetStream domain (one subject token: no '.', "
                                                      "'*', '>', spaces or control characters)",
                                                      shownValue(*v)));
    }
    config.nats.jsDomain = *v;
  }
  // Waits on a network peer: under 100ms nothing answers in time, over a day is a typo.
  const std::pair<const char*, Duration*> waits[] = {{"connect_timeout", &config.nats.connectTimeout},
                                                     {"ping_interval", &config.nats.pingInterval},
                                                     {"ack_timeout", &config.nats.ackTimeout}};
  for (const auto& [key, field] : waits) {
    if (auto v = nats.duration(key)) {
      if (v->count() < 100 || *v > std::chrono::hours(24)) {
        throw ConfigError(nats.keyName(key), fmt::format("{} is out of range: from 100ms to 1d", formatDuration(*v)));
      }
      *field = *v;
    }
  }
  if (auto v = nats.integer("max_pending")) config.nats.maxPending = positiveInt("nats.max_pending", *v, 1'000'000);
  nats.finish();

  Section http(subTable(root, "http"), "http.", "OUTBOX_BRIDGE_HTTP_", env, consulted);
  if (auto v = http.str("listen")) config.http.listen = *v;
  checkListen("http.listen", config.http.listen);
  if (auto v = http.path("tls_cert")) config.http.tlsCert = *v;
  if (auto v = http.path("tls_key")) config.http.tlsKey = *v;
  if (config.http.tlsCert.empty() != config.http.tlsKey.empty()) {
    throw ConfigError(config.http.tlsCert.empty() ? "http.tls_cert" : "http.tls_key", "tls_cert and tls_key go together");
  }
  if (auto v = http.str("metrics_listen"); v && !v->empty()) {
    checkListen("http.metrics_listen", *v);
    if (listenersCollide(*v, config.http.listen)) {
      throw ConfigError("http.metrics_listen", fmt::format("'{}' is the address of http.listen ('{}'): give it a port "
                                                           "of its own",
                                                           shownValue(*v), shownValue(config.http.listen)));
    }
    config.http.metricsListen = *v;
  }
  if (auto v = http.secret("admin_token")) {
    // The admin API pauses sources and quarantines rows: its token must not be guessable.
    if (!v->empty() && v->size() < kMinAdminTokenBytes) {
      throw ConfigError(http.keyName("admin_token"),
                        fmt::format("is {} characters: at least {} (e.g. openssl rand -hex 32); the value is not shown",
                                    v->size(), kMinAdminTokenBytes));
    }
    config.http.adminToken = *v;
  }
  if (auto v = http.integer("max_snapshot_streams")) {
    config.http.maxSnapshotStreams = positiveInt("http.max_snapshot_streams", *v, 1000);
  }
  if (auto v = http.duration("stuck_after")) {
    if (v->count() < 1000) throw ConfigError("http.stuck_after", "must be at least 1s");
    config.http.stuckAfter = *v;
  }
  http.finish();

  Section lease(subTable(root, "lease"), "lease.", "OUTBOX_BRIDGE_LEASE_", env, consulted);
  if (auto v = lease.duration("ttl")) config.lease.ttl = *v;
  if (auto v = lease.duration("heartbeat")) config.lease.heartbeat = *v;
  if (config.lease.heartbeat.count() < 100) throw ConfigError("lease.heartbeat", "must be at least 100ms");
  // A third of the TTL bounds the lease connection's lock waits: SET SESSION
  // innodb_lock_wait_timeout, which MySQL takes up to 1073741824 seconds.
  constexpr auto kMaxTtl = std::chrono::seconds(3LL * 1073741824);
  if (config.lease.ttl > kMaxTtl) {
    throw ConfigError("lease.ttl", fmt::format("{} is too long: at most {} (a third of it becomes the lease "
                                               "connection's innodb_lock_wait_timeout)",
                                               formatDuration(config.lease.ttl), formatDuration(kMaxTtl)));
  }
  if (config.lease.ttl <= config.lease.heartbeat * 2) {
    throw ConfigError("lease.ttl", fmt::format("must be more than twice lease.heartbeat ({})",
                                               formatDuration(config.lease.heartbeat)));
  }
  lease.finish();

  Section database(subTable(root, "database"), "database.", "OUTBOX_BRIDGE_DATABASE_", env, consulted);
  if (auto v = database.integer("max_connections")) {
    // Two: a source's mark and its next batch's reads overlap.
    config.database.maxConnections = positiveInt("database.max_connections", *v, 10'000);
    if (config.database.maxConnections < 2) throw ConfigError("database.max_connections", "must be at least 2");
  }
  database.finish();

  Section log(subTable(root, "log"), "log.", "OUTBOX_BRIDGE_LOG_", env, consulted);
  if (auto v = log.str("level")) config.logLevel = *v;
  if (auto v = log.oneOf<LogFormat>("format", {{"text", LogFormat::kText}, {"json", LogFormat::kJson}})) {
    config.logFormat = *v;
  }

  static const std::set<std::string> levels{"trace", "debug", "info", "warn", "error", "off"};
  if (!levels.count(config.logLevel)) {
    throw ConfigError("log.level", fmt::format("'{}' is not one of trace, debug, info, warn, error, off", shownValue(config.logLevel)));
  }
  log.finish();

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

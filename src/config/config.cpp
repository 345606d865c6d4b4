#include "config/config.h"
#include "config/section.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

extern char** environ;

namespace outbox {

using namespace config_detail;

namespace {

bool isStreamName(const std::string& name) {
  if (name.empty() || name.size() > 255) return false;
  return std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return c > 32 && c < 127 && c != '.' && c != '*' && c != '>' && c != '/' && c != '\\';
  });
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

SourceConfig parseSource(const toml::table& table, size_t index, const Environment& env,
                         std::set<std::string>& consulted) {
  SourceConfig s;
  // The name decides the environment prefix, so it is read from TOML first.
  std::set<std::string> none;  // the name is never taken from the environment
  Section nameOnly(&table, fmt::format("source[{}].", index), "\x01", env, none);
  auto name = nameOnly.str("name");
  if (!name) throw ConfigError(fmt::format("source[{}].name", index), "is required");
  if (!isSqlIdentifier(*name)) {
    throw ConfigError(fmt::format("source[{}].name", index),
                      fmt::format("'{}' must match ^[A-Za-z_][A-Za-z0-9_]{{0,63}}$", *name));
  }
  s.name = *name;
  Section sec(&table, fmt::format("source.{}.", s.name),
              "OUTBOX_BRIDGE_SOURCE_" + upper(s.name) + "_", env, consulted);
  sec.str("name");

  auto dsn = sec.str("dsn");
  if (!dsn) throw ConfigError(sec.keyName("dsn"), "is required");
  s.dsn = Dsn::parse(sec.keyName("dsn"), *dsn);
  requireReadable(sec.keyName("dsn"), s.dsn.sslCa, "ssl-ca: ");
  requireReadable(sec.keyName("dsn"), s.dsn.sslCert, "ssl-cert: ");
  requireReadable(sec.keyName("dsn"), s.dsn.sslKey, "ssl-key: ");
  if (auto password = sec.secret("password")) s.dsn.password = *password;

  auto table_name = sec.str("outbox_table");
  s.outboxTable = table_name.value_or(s.name + "_control_outbox");
  // Its versions table, `<outbox_table>_versions`, must fit MySQL's 64-character identifiers.
  if (!isSqlIdentifier(s.outboxTable) || s.outboxTable.size() > kMaxOutboxTableLength) {
    throw ConfigError(sec.keyName("outbox_table"),
                      fmt::format("'{}' must match ^[A-Za-z_][A-Za-z0-9_]{{0,54}}$ (at most 55 characters: the "
                                  "bridge keeps a '<outbox_table>_versions' table beside it){}",
                                  s.outboxTable,
                                  table_name ? "" : "; it defaults to '<name>_control_outbox': set outbox_table"));
  }
  s.snapshotQuery = sec.str("snapshot_query").value_or("");
  s.stream = sec.str("stream").value_or("CONTROL_" + upper(s.name));
  if (!isStreamName(s.stream)) {
    throw ConfigError(sec.keyName("stream"),
                      fmt::format("'{}' is not a valid stream name (no spaces, '.', '*', '>', '/')", s.stream));
  }
  s.subjectPrefix = sec.str("subject_prefix").value_or("control." + s.name);
  if (!isSubject(s.subjectPrefix)) {
    throw ConfigError(sec.keyName("subject_prefix"),
                      fmt::format("'{}' is not a valid subject without wildcards", s.subjectPrefix));
  }
  if (auto v = sec.integer("batch_size")) s.batchSize = positiveInt(sec.keyName("batch_size"), *v, 100000);
  if (auto v = sec.duration("poll_interval")) {
    if (v->count() < 1) throw ConfigError(sec.keyName("poll_interval"), "must be at least 1ms");
    s.pollInterval = *v;
  }
  s.snapshotKey = sec.str("snapshot_key").value_or("");
  s.snapshotPath = sec.str("snapshot_path").value_or("");
  if (!s.snapshotPath.empty() && s.snapshotPath.front() != '/') {
    throw ConfigError(sec.keyName("snapshot_path"), "must start with '/'");
  }
  if (auto v = sec.oneOf<OnPoison>("on_poison", {{"halt", OnPoison::kHalt}, {"quarantine", OnPoison::kQuarantine}})) {
    s.onPoison = *v;
  }

  if (auto v = sec.duration("duplicate_window")) {
    if (v->count() < 1000) throw ConfigError(sec.keyName("duplicate_window"), "must be at least 1s");
    s.duplicateWindow = *v;
  }
  if (auto v = sec.integer("replicas")) s.replicas = positiveInt(sec.keyName("replicas"), *v, 5);
  if (auto v = sec.duration("max_age")) s.maxAge = *v;
  sec.finish();
  return s;
}

}  // namespace

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
    if (name.rfind("OUTBOX_BRIDGE_", 0) == 0) env[name] = entry.substr(eq + 1);
  }
  return env;
}

Config parseConfig(const std::string& tomlText, const Environment& env, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(tomlText, origin);
  } catch (const toml::parse_error& e) {
    throw ConfigError(origin, fmt::format("TOML syntax error at line {}: {}", e.source().begin.line,
                                          e.description()));
  }
  Config config;
  std::set<std::string> consulted{kConfigEnvironmentVariable};
  for (const auto& [k, v] : root) {
    std::string key(k.str());
    if (key != "nats" && key != "http" && key != "lease" && key != "log" && key != "source") {
      throw ConfigError(key, "unknown key (expected [nats], [http], [lease], [log] or [[source]])");
    }
  }

  Section nats(subTable(root, "nats"), "nats.", "OUTBOX_BRIDGE_NATS_", env, consulted);
  if (auto v = nats.str("url")) config.nats.url = *v;
  {
    std::stringstream urls(config.nats.url);
    std::string url;
    while (std::getline(urls, url, ',')) {
      if (url.rfind("nats://", 0) != 0 && url.rfind("tls://", 0) != 0) {
        throw ConfigError("nats.url", fmt::format("'{}' must start with nats:// or tls://", url));
      }
      // Credentials in a URL would be shown wherever the URL is (logs, errors, check-config).
      if (url.find('@') != std::string::npos) {
        throw ConfigError("nats.url", "no credentials in the URL: set user and password_file, or token_file");
      }
    }
  }
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
  if (auto v = nats.str("tls_server_name")) config.nats.tlsServerName = *v;
  if (auto v = nats.str("js_domain")) config.nats.jsDomain = *v;
  if (auto v = nats.duration("connect_timeout")) config.nats.connectTimeout = *v;
  if (auto v = nats.duration("ping_interval")) {
    if (v->count() < 100) throw ConfigError("nats.ping_interval", "must be at least 100ms");
    config.nats.pingInterval = *v;
  }
  if (auto v = nats.duration("ack_timeout")) {
    if (v->count() < 100) throw ConfigError("nats.ack_timeout", "must be at least 100ms");
    config.nats.ackTimeout = *v;
  }
  if (auto v = nats.integer("max_pending")) config.nats.maxPending = positiveInt("nats.max_pending", *v, 1'000'000);
  nats.finish();

  Section http(subTable(root, "http"), "http.", "OUTBOX_BRIDGE_HTTP_", env, consulted);
  if (auto v = http.str("listen")) config.http.listen = *v;
  if (config.http.listen.find(':') == std::string::npos) {
    throw ConfigError("http.listen", fmt::format("'{}' must be HOST:PORT", config.http.listen));
  }
  if (auto v = http.path("tls_cert")) config.http.tlsCert = *v;
  if (auto v = http.path("tls_key")) config.http.tlsKey = *v;
  if (config.http.tlsCert.empty() != config.http.tlsKey.empty()) {
    throw ConfigError(config.http.tlsCert.empty() ? "http.tls_cert" : "http.tls_key", "tls_cert and tls_key go together");
  }
  if (auto v = http.str("metrics_listen"); v && !v->empty()) {
    if (v->find(':') == std::string::npos) throw ConfigError("http.metrics_listen", fmt::format("'{}' must be HOST:PORT", *v));
    if (*v == config.http.listen) throw ConfigError("http.metrics_listen", "must differ from http.listen");
    config.http.metricsListen = *v;
  }
  if (auto v = http.secret("admin_token")) config.http.adminToken = *v;
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
  if (config.lease.ttl <= config.lease.heartbeat * 2) {
    throw ConfigError("lease.ttl", fmt::format("must be more than twice lease.heartbeat ({})",
                                               formatDuration(config.lease.heartbeat)));
  }
  lease.finish();

  Section log(subTable(root, "log"), "log.", "OUTBOX_BRIDGE_LOG_", env, consulted);
  if (auto v = log.str("level")) config.logLevel = *v;
  if (auto v = log.oneOf<LogFormat>("format", {{"text", LogFormat::kText}, {"json", LogFormat::kJson}})) {
    config.logFormat = *v;
  }

  static const std::set<std::string> levels{"trace", "debug", "info", "warn", "error", "off"};
  if (!levels.count(config.logLevel)) {
    throw ConfigError("log.level", fmt::format("'{}' is not one of trace, debug, info, warn, error, off", config.logLevel));
  }
  log.finish();

  if (const toml::node* sources = root.get("source")) {
    const toml::array* list = sources->as_array();
    if (list == nullptr) throw ConfigError("source", "expected [[source]] tables");
    for (size_t i = 0; i < list->size(); ++i) {
      const toml::table* t = (*list)[i].as_table();
      if (t == nullptr) throw ConfigError(fmt::format("source[{}]", i), "expected a table");
      SourceConfig s = parseSource(*t, i, env, consulted);
      if (config.findSource(s.name)) throw ConfigError("source." + s.name, "defined twice");
      for (const auto& other : config.sources) {
        if (other.stream == s.stream) {
          throw ConfigError("source." + s.name + ".stream", "stream '" + s.stream + "' is used by source " + other.name);
        }
      }
      config.sources.push_back(std::move(s));
    }
  }
  if (config.sources.empty()) throw ConfigError("source", "at least one [[source]] is required");
  for (const auto& [name, value] : env) {
    if (name.rfind("OUTBOX_BRIDGE_", 0) == 0 && !consulted.count(name)) {
      throw ConfigError(name, "unknown environment variable (no config key of that name; a typo?)");
    }
  }
  return config;
}

Config loadConfig(const std::string& path, const Environment& env) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("--config", fmt::format("cannot read '{}'", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parseConfig(buffer.str(), env, path);
}

}  // namespace outbox

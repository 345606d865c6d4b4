// The keys of [nats], [http], [lease], [database] and [log] (config/keys.h): their defaults are
// config.h's, their checks here. A rule between two keys sits with the later one.
#include <set>

#include <fmt/format.h>

#include "config/keys.h"

namespace outbox::config_detail {

namespace {

// Any readable file: parsing checks no more of a path (check-config loads the TLS and login files).
constexpr const char* kSomeFile = "\"/etc/passwd\"";

// Waits on a network peer: under 100ms nothing answers in time, over a day is a typo.
void checkWait(const std::string& key, Duration v, const NatsConfig&) {
  if (v.count() < 100 || v > std::chrono::hours(24)) {
    throw ConfigError(key, fmt::format("{} is out of range: from 100ms to 1d", formatDuration(v)));
  }
}

// After the last of the login and TLS files: the pairs and the one way to log in.
void checkNatsLogins(const NatsConfig& n) {
  if (n.tlsCert.empty() != n.tlsKey.empty()) {
    throw ConfigError(n.tlsCert.empty() ? "nats.tls_cert" : "nats.tls_key", "tls_cert and tls_key go together");
  }
  const int logins = !n.user.empty() + !n.token.empty() + !n.credsFile.empty() + !n.nkeySeedFile.empty();
  if (logins > 1) {
    throw ConfigError("nats", "set one way to log in: user and password, token, creds_file or nkey_seed_file");
  }
  if (!n.password.empty() && n.user.empty()) {
    throw ConfigError("nats.password", "needs nats.user: without it the password is not sent at all");
  }
  if (std::string problem = printableProblem(n.user); !problem.empty()) {
    throw ConfigError("nats.user", fmt::format("'{}' {}", shownValue(n.user), problem));
  }
}

// A key whose read is followed by `then` (a rule between it and the keys before it).
template <typename T>
Key<T> then(Key<T> key, std::function<void(const T&)> after) {
  key.read = [read = key.read, after](Section& sec, T& t) {
    read(sec, t);
    after(t);
  };
  return key;
}

// A third of the TTL bounds the lease connection's lock waits: SET SESSION
// innodb_lock_wait_timeout, which MySQL takes up to 1073741824 seconds.
void checkLease(const LeaseConfig& lease) {
  if (lease.heartbeat.count() < 100) throw ConfigError("lease.heartbeat", "must be at least 100ms");
  constexpr auto kMaxTtl = std::chrono::seconds(3LL * 1073741824);
  if (lease.ttl > kMaxTtl) {
    throw ConfigError("lease.ttl", fmt::format("{} is too long: at most {} (a third of it becomes the lease "
                                               "connection's innodb_lock_wait_timeout)",
                                               formatDuration(lease.ttl), formatDuration(kMaxTtl)));
  }
  if (lease.ttl <= lease.heartbeat * 2) {
    throw ConfigError("lease.ttl", fmt::format("must be more than twice lease.heartbeat ({})",
                                               formatDuration(lease.heartbeat)));
  }
}

}  // namespace

const std::vector<Key<NatsConfig>>& natsKeys() {
  using N = NatsConfig;
  static const std::vector<Key<N>> keys{
      textKey<N>("url", &N::url, "\"nats://n1:4222,tls://n2:4223\"",
                 [](const std::string& key, const std::string& v, const N&) { checkNatsUrls(key, v); }),
      textKey<N>("user", &N::user, "\"bob \\\"the\\\" builder\""),
      needing("user = \"bob\"", secretKey<N>("password", &N::password, "\"nats-pw\"")),
      secretKey<N>("token", &N::token, "\"nats-token\""),
      pathKey<N>("creds_file", &N::credsFile, kSomeFile),
      pathKey<N>("nkey_seed_file", &N::nkeySeedFile, kSomeFile),
      pathKey<N>("tls_ca", &N::tlsCa, kSomeFile),
      needing("tls_key = \"/etc/passwd\"", pathKey<N>("tls_cert", &N::tlsCert, kSomeFile)),
      needing("tls_cert = \"/etc/passwd\"",
              then(pathKey<N>("tls_key", &N::tlsKey, kSomeFile), std::function(checkNatsLogins))),
      commentedWhenEmpty(textKey<N>("tls_server_name", &N::tlsServerName, "\"nats.internal\"",
                                    [](const std::string& key, const std::string& v, const N&) {
                                      if (!isHostOrAddress(v)) {
                                        throw ConfigError(key, fmt::format("'{}' is not a host name (letters, digits, "
                                                                           "'-' and '.'; at most 253 characters)",
                                                                           shownValue(v)));
                                      }
                                    }),
                         &N::tlsServerName),
      // A JetStream domain is one subject token: the API prefix becomes $JS.<domain>.API.
      commentedWhenEmpty(textKey<N>("js_domain", &N::jsDomain, "\"hub\"",
                                    [](const std::string& key, const std::string& v, const N&) {
                                      if (!isSubjectToken(v) || v.size() > 255) {
                                        throw ConfigError(key,
                                                          fmt::format("'{}' is not a JetStream domain (one subject "
                                                                      "token: no '.', '*', '>', spaces or control "
                                                                      "characters)",
                                                                      shownValue(v)));
                                      }
                                    }),
                         &N::jsDomain),
      durationKey<N>("connect_timeout", &N::connectTimeout, "\"1500ms\"", checkWait),
      durationKey<N>("ping_interval", &N::pingInterval, "\"7s\"", checkWait),
      durationKey<N>("ack_timeout", &N::ackTimeout, "\"2m\"", checkWait),
      countKey<N>("max_pending", &N::maxPending, 1'000'000, "77"),
  };
  return keys;
}

const std::vector<Key<HttpConfig>>& httpKeys() {
  using H = HttpConfig;
  static const std::vector<Key<H>> keys{
      textKey<H>("listen", &H::listen, "\"0.0.0.0:0\"",
                 [](const std::string& key, const std::string& v, const H&) { checkListen(key, v); }),
      needing("tls_key = \"/etc/passwd\"", pathKey<H>("tls_cert", &H::tlsCert, kSomeFile)),
      needing("tls_cert = \"/etc/passwd\"",
              then(pathKey<H>("tls_key", &H::tlsKey, kSomeFile), std::function([](const H& h) {
                     if (h.tlsCert.empty() != h.tlsKey.empty()) {
                       throw ConfigError(h.tlsCert.empty() ? "http.tls_cert" : "http.tls_key",
                                         "tls_cert and tls_key go together");
                     }
                   }))),
      textKey<H>("metrics_listen", &H::metricsListen, "\"[::1]:9090\"",
                 [](const std::string& key, const std::string& v, const H& h) {
                   if (v.empty()) return;
                   checkListen(key, v);
                   if (listenersCollide(v, h.listen)) {
                     throw ConfigError(key, fmt::format("'{}' is the address of http.listen ('{}'): give it a port "
                                                        "of its own",
                                                        shownValue(v), shownValue(h.listen)));
                   }
                 }),
      // The admin API pauses sources and quarantines rows: its token must not be guessable.
      secretKey<H>("admin_token", &H::adminToken, "\"admin-token-0123456789\"",
                   [](const std::string& key, const std::string& v, const H&) {
                     if (!v.empty() && v.size() < kMinAdminTokenBytes) {
                       throw ConfigError(key, fmt::format("is {} characters: at least {} (e.g. openssl rand -hex 32); "
                                                          "the value is not shown",
                                                          v.size(), kMinAdminTokenBytes));
                     }
                   }),
      countKey<H>("max_snapshot_streams", &H::maxSnapshotStreams, 1000, "9"),
      durationKey<H>("stuck_after", &H::stuckAfter, "\"10m\"", [](const std::string& key, Duration v, const H&) {
        if (v.count() < 1000) throw ConfigError(key, "must be at least 1s");
      }),
  };
  return keys;
}

const std::vector<Key<LeaseConfig>>& leaseKeys() {
  using L = LeaseConfig;
  static const std::vector<Key<L>> keys{
      durationKey<L>("ttl", &L::ttl, "\"1h\""),
      needing("ttl = \"1h\"", then(durationKey<L>("heartbeat", &L::heartbeat, "\"1m\""), std::function(checkLease))),
  };
  return keys;
}

const std::vector<Key<DatabaseConfig>>& databaseKeys() {
  using D = DatabaseConfig;
  // Two: a source's mark and its next batch's reads overlap.
  static const std::vector<Key<D>> keys{
      then(countKey<D>("max_connections", &D::maxConnections, 10'000, "12"), std::function([](const D& d) {
             if (d.maxConnections < 2) throw ConfigError("database.max_connections", "must be at least 2");
           })),
  };
  return keys;
}

const std::vector<Key<Config>>& logKeys() {
  static const std::vector<Key<Config>> keys{
      textKey<Config>("level", &Config::logLevel, "\"debug\"",
                      [](const std::string& key, const std::string& v, const Config&) {
                        static const std::set<std::string> levels{"trace", "debug", "info", "warn", "error", "off"};
                        if (!levels.count(v)) {
                          throw ConfigError(key, fmt::format("'{}' is not one of trace, debug, info, warn, error, off",
                                                             shownValue(v)));
                        }
                      }),
      choiceKey<Config, LogFormat>("format", &Config::logFormat,
                                   {{"text", LogFormat::kText}, {"json", LogFormat::kJson}}, "\"json\""),
  };
  return keys;
}

}  // namespace outbox::config_detail

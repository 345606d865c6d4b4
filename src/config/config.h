#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/log.h"

namespace outbox {

// A configuration mistake: which key, and why. Thrown only while loading config (start-up).
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string key, std::string reason)
      : std::runtime_error(key + ": " + reason), key_(std::move(key)), reason_(std::move(reason)) {}
  const std::string& key() const { return key_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string key_;
  std::string reason_;
};

using Duration = std::chrono::milliseconds;

// The longest duration: its nanoseconds (what nats-server and std::chrono waits take) fit an
// int64 (about 292 years).
inline constexpr Duration kMaxDuration{INT64_MAX / 1'000'000};
// `value` as an error message may echo it: at most 100 characters, control characters as \xNN.
std::string shownValue(const std::string& value);
// Why `text` cannot be a name sent as it is (a control character or a blank at either end), or "".
std::string printableProblem(const std::string& text);

// An integer config value; ConfigError naming `key` when `text` is not one.
int64_t parseInteger(const std::string& key, const std::string& text);
// "250ms", "30s", "2m", "1h", "1h30m", "7d"; a bare "0" is zero. Throws ConfigError(key, ...).
Duration parseDuration(const std::string& key, const std::string& text);
std::string formatDuration(Duration d);

// MySQL's TLS modes (MySQL Shell's ssl-mode): DISABLED plain; PREFERRED TLS when the server offers
// it; REQUIRED TLS or no connection, the certificate unchecked; VERIFY_CA also checks it against
// ssl-ca; VERIFY_IDENTITY also that it names the host.
enum class SslMode { kDisabled, kPreferred, kRequired, kVerifyCa, kVerifyIdentity };
const char* sslModeName(SslMode mode);

// mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAM=VALUE&...], with %XX escapes in USER,
// PASSWORD and values; HOST an IPv6 address in brackets ([::1]). Parameters: socket=PATH (host
// localhost), ssl-mode=DISABLED|PREFERRED|REQUIRED|VERIFY_CA|VERIFY_IDENTITY (default PREFERRED
// over TCP, DISABLED over a socket, VERIFY_CA with ssl-ca, REQUIRED with a client certificate),
// ssl-ca=PATH, ssl-cert=PATH, ssl-key=PATH (PEM files).
struct Dsn {
  std::string user;
  std::string password;  // secret: never logged; see masked()
  std::string host;
  unsigned port = 3306;
  std::string database;
  std::string socket;
  SslMode sslMode = SslMode::kPreferred;
  std::string sslCa;
  std::string sslCert;  // a client certificate, with sslKey
  std::string sslKey;

  // `databaseRequired` false: "/" may end the path (an account that reads the binary log needs no
  // database, and one it may not use refuses the login).
  static Dsn parse(const std::string& key, const std::string& text, bool databaseRequired = true);
  // The DSN with the password replaced by "****" (or absent when there is none).
  std::string masked() const;
};

// HOST:PORT to listen on: HOST a name, an IPv4 address or [IPv6] (0.0.0.0 or [::] for every
// interface), PORT 0 (any free port) to 65535. ConfigError(key, ...) otherwise.
void checkListen(const std::string& key, const std::string& listen);
// Whether two checked listen addresses would bind one socket: the same port (not 0) on the same
// host, a wildcard host (0.0.0.0, [::]) beside any, or two loopback ones ("08080" is 8080).
bool listenersCollide(const std::string& a, const std::string& b);
// A host name (letters, digits, '-', '_', '.'; at most 253 characters) or an IP address.
bool isHostOrAddress(const std::string& name);
// nats://HOST[:PORT] or tls://..., comma-separated, no credentials, ports 1 to 65535.
void checkNatsUrls(const std::string& key, const std::string& urls);
// http[s]://HOST[:PORT][/], no credentials (the URL is printed), nothing else after the port.
void checkHttpBaseUrl(const std::string& key, const std::string& url);

// `^[A-Za-z_][A-Za-z0-9_]{0,63}$`: the only names that may be spliced into SQL.
bool isSqlIdentifier(const std::string& name);
// The bridge keeps `<outbox_table>_versions` beside each outbox table: it must fit MySQL's 64 characters.
inline constexpr size_t kMaxOutboxTableLength = 55;
// A NATS subject token: non-empty, no '.', '*', '>', whitespace or control characters.
bool isSubjectToken(const std::string& token);

enum class OnPoison { kHalt, kQuarantine };

// What wakes a source's relay besides rows flowing (docs/design.md, "Waking up"): kAuto, the binlog doorbell
// where the server keeps a binary log and the account may read it, else polling (a warning says
// what is missing); kBinlog, the same, but a doorbell that cannot work is an error in the log,
// every time it is tried; kPoll, polling only (the shared idle check of its database).
enum class Wake { kAuto, kBinlog, kPoll };
const char* wakeName(Wake wake);

// A [[source]] table. Each field is a key declared once in config/source.cpp's sourceKeys(), which
// reads, checks and renders it (README's [[source]] reference names the same keys, a test checks).
struct SourceConfig {
  std::string name;
  Dsn dsn;
  std::string outboxTable;
  std::string snapshotQuery;
  std::string stream;
  std::string subjectPrefix;
  // The message subject's template (config/subject_template.h); empty: `<subject_prefix>.{entity_type}`.
  std::string subject;
  // A stream sourcing the main one with max_msgs_per_subject = 1 (docs/design.md, "The message
  // shaped by its row"); empty: none.
  std::string latestStream;
  int batchSize = 1000;
  Duration pollInterval{250};
  // ?summary=true reads the whole table at most once per this (docs/design.md, "The snapshot");
  // 0: a read per request (requests that arrive during one still share it).
  Duration summaryInterval{60'000};
  std::string snapshotKey;   // empty: the first column of snapshot_query
  std::string snapshotPath;  // empty: no alias route
  OnPoison onPoison = OnPoison::kHalt;
  Wake wake = Wake::kAuto;
  Duration duplicateWindow{120'000};
  int replicas = 1;
  Duration maxAge{0};  // 0: keep forever
  // The settled stream (docs/design.md, "The settled stream (issue 36)"): each key's latest change
  // once quiet for `settle`, or `settle_max` after its first unsettled change; at most
  // `settle_max_keys` keys pending. settle 0 (the key absent): off, and the rest unset.
  Duration settle{0};
  Duration settleMax{30'000};
  std::string settledStream;  // set when settling: default `<stream>_SETTLED`
  int settleMaxKeys = 100'000;
  bool settles() const { return settle.count() > 0; }
};

struct NatsConfig {
  std::string url = "nats://127.0.0.1:4222";  // or several, comma-separated (a cluster)
  std::string user;
  std::string password;  // secret
  std::string token;     // secret
  std::string credsFile;     // a user JWT and its nkey seed (as `nats --creds`)
  std::string nkeySeedFile;  // a user nkey seed ("SU...")
  std::string tlsCa;         // PEM paths: the CA that signed the servers' certificates,
  std::string tlsCert;       // and a client certificate with its key
  std::string tlsKey;
  std::string tlsServerName;  // the name the servers' certificates must carry, when not the URL's host
  std::string jsDomain;       // the JetStream domain (a leaf node's hub)
  Duration connectTimeout{5000};
  // PING every ping_interval; two unanswered and the connection counts as dead and moves to
  // another server of the list (a partition that drops packets shows no error otherwise).
  Duration pingInterval{5000};
  Duration ackTimeout{5000};  // a publish not acked by then counts as failed and is reconciled
  int maxPending = 4096;      // async publishes in flight per source
};

// The shortest admin_token taken (README, "Production security").
inline constexpr size_t kMinAdminTokenBytes = 16;

struct HttpConfig {
  std::string listen = "127.0.0.1:8080";  // port 0: any free port (logged)
  std::string tlsCert;                     // PEM paths: HTTPS on `listen` when both are set
  std::string tlsKey;
  std::string metricsListen;               // /metrics, /healthz, /readyz here (plain HTTP); empty: on `listen`
  std::string adminToken;                  // secret; empty disables the admin API
  int maxSnapshotStreams = 4;              // concurrent snapshot streams; more get 503
  Duration stuckAfter{300'000};            // rows pending this long on a leader: /healthz 503
};

struct LeaseConfig {
  Duration ttl{30'000};
  Duration heartbeat{10'000};
};

// The connections a bridge's relays share (docs/design.md, "Connections").
struct DatabaseConfig {
  // Per database server and account, at most: what the sources' scans, assigns and marks borrow.
  // The leases (3), the HTTP probes (2), the idle check (one a database) and the doorbell (one a
  // server, two while it reads its lag) have their own, as few.
  int maxConnections = 8;
};

// The account a server's binlog doorbell reads the binary log as (README, "The doorbell's
// account"): REPLICATION SLAVE shows every row change on the server, so it belongs to an account of
// its own rather than to the sources', whose grants stop at their tables. Matched to the sources
// by the server's address (host, port, socket).
struct DoorbellConfig {
  std::string name;
  Dsn dsn;  // its database may be empty
};

// Whether two DSNs reach one server address (the host compared without case).
bool sameServer(const Dsn& a, const Dsn& b);
// Whether two DSNs ask for the same TLS (ssl-mode and its files).
bool sameTls(const Dsn& a, const Dsn& b);

struct Config {
  NatsConfig nats;
  HttpConfig http;
  LeaseConfig lease;
  DatabaseConfig database;
  std::string logLevel = "info";
  LogFormat logFormat = LogFormat::kText;
  std::vector<SourceConfig> sources;
  std::vector<DoorbellConfig> doorbells;

  const SourceConfig* findSource(const std::string& name) const;
  // The DSN the doorbell of `source`'s server reads the binary log with: its [[doorbell]], or
  // without one the source's own (parseConfig saw to it that every source there that the doorbell
  // watches asks for the same TLS).
  const Dsn& doorbellDsn(const SourceConfig& source) const;
};

// The whole of the regular file `path`, at most `maxBytes`. A ConfigError naming `key` when it
// cannot be read, is larger, or is not a regular file (a directory, a FIFO, a device such as
// /dev/zero): nothing that could block or never end is read.
std::string readSmallFile(const std::string& key, const std::string& path, size_t maxBytes);
// A ConfigError naming `key` (`what`: a prefix for the part of it) unless `path` is empty or a
// readable regular file.
void requireRegularFile(const std::string& key, const std::string& path, const std::string& what = "");
inline constexpr size_t kMaxConfigBytes = 1 << 20;  // a config file
inline constexpr size_t kMaxSecretBytes = 64 << 10;  // a password, token or seed file

using Environment = std::map<std::string, std::string>;
Environment processEnvironment();

// The variable that stands for --config when the option is not given.
inline constexpr const char* kConfigEnvironmentVariable = "OUTBOX_BRIDGE_CONFIG";
// Set by systemd for a unit with LoadCredential=: a file path in the config may begin with
// ${CREDENTIALS_DIRECTORY}/ (README, "Install on Debian/Ubuntu").
inline constexpr const char* kCredentialsDirectoryVariable = "CREDENTIALS_DIRECTORY";

// Parses TOML text and applies environment overrides (OUTBOX_BRIDGE_NATS_URL,
// OUTBOX_BRIDGE_SOURCE_<NAME>_<KEY>, ...). Unknown keys, bad values and missing required keys throw
// ConfigError naming the key; so does an OUTBOX_BRIDGE_* variable that names no key (a typo such
// as OUTBOX_BRIDGE_NATS_ULR), other than OUTBOX_BRIDGE_CONFIG. `*_file` keys are read relative to
// the working directory.
Config parseConfig(const std::string& tomlText, const Environment& env, const std::string& origin);
Config loadConfig(const std::string& path, const Environment& env);

// The effective config as TOML, secrets replaced by "****".
std::string renderMasked(const Config& config);

}  // namespace outbox

#pragma once

// What integration and fault tests share: the stack's address (from the environment tools/test
// exports), a fresh database per test, the bridge as a child process, producers, and reading a
// stream back. Every helper fails the test (throws) when a service is missing: nothing skips.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tools/support/subprocess.h"
#include "config/config.h"
#include "db/binlog.h"
#include "db/connection.h"
#include "nats/jetstream.h"
#include "relay/ports.h"

namespace outbox::test {

struct StackEnv {
  std::string mysqlHost;
  // The MariaDB the tests run on: tools/stack's tuned `mariadb` (binlog_format ROW,
  // metadata_lock_info, 400 connections), or with OUTBOX_TEST_MYSQL_SERVER=defaults its
  // `mariadb-defaults` (only log_bin and a server_id set: MIXED, no plugin, 151 connections).
  unsigned mysqlPort = 0;
  std::string mysqlService;  // its tools/stack service: "mariadb" or "mariadb-defaults"
  bool mysqlDefaults = false;  // the one at its defaults
  std::string mysqlUser;
  std::string mysqlPassword;
  std::string natsUrl;
  std::string stackScript;  // tools/stack, to restart services
  std::string bridgeBinary;
  std::string sourceRoot;  // the repository, for scripts under tests/
  std::string stackDir;    // OUTBOX_STACK_DIR: the services' pid files
  // tools/stack's cluster and replica (started only by the tests that use them).
  std::string natsClusterUrls;  // "nats://127.0.0.1:P1,...": outbox-n1, -n2, -n3 in order
  unsigned mysqlReplicaPort = 0;
};

// Reads OUTBOX_TEST_* and OUTBOX_TEST_BRIDGE_BIN; throws naming what is missing (or an
// OUTBOX_TEST_MYSQL_SERVER other than "tuned" or "defaults").
const StackEnv& stack();

// Notes a secret a test hands to the bridge (a password, a token, a key seed): the secrets suite
// then fails if any log the run wrote contains one (tests/secrets/scan_logs.py). The stack's
// MySQL password is noted by stack().
void registerSecret(const std::string& secret);

// SIGSTOPs the process whose pid `pidText` holds for its lifetime (SIGCONT on destruction): a
// service frozen mid-flight.
class FrozenProcess {
 public:
  explicit FrozenProcess(const std::string& pidText);
  ~FrozenProcess();
  FrozenProcess(const FrozenProcess&) = delete;
  FrozenProcess& operator=(const FrozenProcess&) = delete;

 private:
  pid_t pid_;
};

// The whole of a file ("" when it cannot be read).
std::string readFile(const std::string& path);

// Where tests write configs, logs and dumps: $OUTBOX_TEST_TMP, else /tmp/outbox-tests-<uid>.
std::string tempDir();

// Runs `tools/stack ACTION SERVICE` (restart, stop, start, kill); throws on failure.
// stack().mysqlService names the MariaDB the tests run on.
void stackCommand(const std::string& action, const std::string& service);

// Polls `condition` every 20 ms until it holds or `timeout` passes; returns whether it held.
bool waitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

// A connection as the stack's MySQL user to the server at `port` (the primary's or a replica's).
std::unique_ptr<db::Connection> connectAt(unsigned port, const std::string& database = "");
// The pid file of the MariaDB the tests run on.
std::string mysqlPidFile();
// The server's global binlog_format ("ROW" on the tuned one, "MIXED" at its defaults).
std::string globalBinlogFormat();
// The next commit `reader` reports, heartbeats skipped; throws when it fails or none comes `within`.
db::BinlogCommit nextCommit(db::BinlogReader& reader, std::chrono::milliseconds within = std::chrono::seconds(10));
// Whether the server shows metadata locks (the metadata_lock_info plugin is active).
bool metadataLocksVisible();
// How to reach the stack's MariaDB (at `port` when given), as its admin account.
db::ConnectParams stackParams(const std::string& database = "", unsigned port = 0);

// A uniquely named database, created on construction and dropped on destruction.
class TestDatabase {
 public:
  explicit TestDatabase(const std::string& purpose);
  ~TestDatabase();
  const std::string& name() const { return name_; }
  std::string dsn() const;  // without password; the password goes through the environment
  std::unique_ptr<db::Connection> connect() const;
  // A shared connection for quick queries from the test thread.
  db::Connection& sql();
  uint64_t scalar(const std::string& query);
  // Rows of `table` with no version in `<table>_versions` (quarantined ones included).
  uint64_t unversioned(const std::string& table);
  SourceState state(const std::string& source);
  // Every row of `table` has a version, and `source` has published every version it assigned. The
  // rows without a version are counted before the state row is read: the other way round, an
  // assign committed between the two reads made a source look drained with rows unpublished.
  bool allPublished(const std::string& source, const std::string& table);
  // The database now lives on the server at `port` (a promoted replica): later calls go there.
  void moveTo(unsigned port);
  unsigned port() const { return port_; }

 private:
  std::string name_;
  unsigned port_ = 0;
  std::unique_ptr<db::Connection> conn_;
};

// A source name unique to this test: `prefix` plus the database's random suffix.
std::string uniqueName(const std::string& prefix, const TestDatabase& database);

// One [[source]] of a generated config.
struct SourceSpec {
  std::string name;
  const TestDatabase* database = nullptr;
  // key -> TOML value literal, e.g. {"batch_size", "500"}; "dsn" and "password" replace the
  // database's own.
  std::map<std::string, std::string> extra;
  std::string stream() const;
  std::string outboxTable() const { return name + "_control_outbox"; }
};

// Writes a config for `sources` (unique streams per test) and returns its path. Unless
// `extraToml` has an [http] table, the HTTP server listens on a free port (see httpPort()).
std::string writeConfig(const std::vector<SourceSpec>& sources, const std::string& extraToml = "");

// Runs `outbox-bridge migrate` for the config; throws on failure. Then gives every outbox table
// of the config a trigger that refuses any UPDATE (issue 9: the bridge never updates a producer's
// row, and every test that goes through here proves it).
void migrate(const std::string& configPath);
// Drops that trigger, for a test that plays the producer or the operator changing a row.
void allowOutboxUpdates(TestDatabase& database, const std::string& table);

// Runs the bridge binary with arguments; returns the exit code, stdout and stderr.
struct CommandResult {
  int exitCode = -1;
  std::string out;
  std::string err;
};
CommandResult runBridge(const std::vector<std::string>& args);
// Runs a shell command line (no standard input); returns the exit code, stdout and stderr.
CommandResult runCommand(const std::string& shellCommand);

// `outbox-bridge run` as a child process, its log in a file.
class BridgeProcess {
 public:
  explicit BridgeProcess(std::string configPath);
  void start();
  // SIGTERM; returns the exit code and the time the exit took.
  int stop(std::chrono::milliseconds* took = nullptr);
  void kill();  // SIGKILL, reaped
  void pause();   // SIGSTOP: a process frozen mid-flight (GC pause, VM stall)
  void resume();  // SIGCONT
  void sendSignal(int sig);
  bool running();
  pid_t pid() const;
  std::string log() const;
  // The HTTP port it logged ("http: listening on http://HOST:PORT"); throws if none in time.
  int httpPort(std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  // The port of the latest start's log line that begins with `marker` ("...://HOST:PORT").
  int loggedPort(const std::string& marker, std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;

 private:
  std::string configPath_;
  std::string logPath_;
  size_t startedAt_ = 0;  // the log's size when the last start() began
  Subprocess process_;
};

// Inserts `count` outbox rows in one transaction; payload {"n": <first+i>, "pad": "..."}.
void insertRows(db::Connection& conn, const std::string& table, int count, int first = 0,
                const std::string& entityType = "item", size_t padBytes = 0);

// The whole stream, read back.
class StreamReader {
 public:
  StreamReader();
  explicit StreamReader(const std::string& natsUrl);  // e.g. the cluster's server list
  nats::JetStream& js() { return *js_; }
  nats::StreamState state(const std::string& stream);
  std::vector<nats::StoredMessage> readAll(const std::string& stream, const std::string& subjectPrefix);
  bool exists(const std::string& stream);

 private:
  std::unique_ptr<nats::Connection> conn_;
  std::unique_ptr<nats::JetStream> js_;
};

// The outbox rows of `table` that `where` selects (an SQL condition on its columns), in id order,
// with no version set.
std::vector<OutboxRow> readOutboxRows(db::Connection& conn, const std::string& table, const std::string& where);

// Publishes `rows` (their versions set) into `source`'s stream as the bridge does
// (JetStreamPublisher: the same subject, headers and fences), each as of `epoch`, row i fenced on
// stream sequence afterSeq + i and, with `fenceOnPreviousVersion`, on the Msg-Id of its version - 1:
// a stale leader's publishes, or a stream a test sets up. Returns the acks that came within 20 s
// (one a row when all did); throws when nats-server cannot be reached.
std::vector<VersionAck> publishAsBridge(const SourceSpec& source, const std::vector<OutboxRow>& rows, uint64_t epoch,
                                        uint64_t afterSeq, bool fenceOnPreviousVersion);

// Checks the invariants of a stream's messages: versions 1..expectedCount (or from firstVersion)
// each exactly once, in increasing order with increasing sequences, headers consistent. Returns
// a description of the first violation, or "" when all hold.
std::string checkDenseOnce(const std::vector<nats::StoredMessage>& messages, const std::string& source,
                           uint64_t expectedCount, uint64_t firstVersion = 1);

uint64_t headerU64(const nats::StoredMessage& m, const std::string& key);

// Reads the source's whole stream and throws the first violation checkDenseOnce() finds.
void requireDenseOnce(const SourceSpec& source, uint64_t count);

// An HTTP GET (or other method) against a bridge on loopback.
struct HttpReply {
  int status = 0;  // 0: no answer
  std::string body;
  std::map<std::string, std::string> headers;
};
HttpReply httpRequest(int port, const std::string& method, const std::string& path, const std::string& body = "",
                      const std::map<std::string, std::string>& headers = {});

// The value of the sample `nameAndLabels` (e.g. `outbox_halted{source="a"}`) in a /metrics page,
// or -1 when it has none.
double metricSample(const std::string& page, const std::string& nameAndLabels);
// The value of a source's sample `name` on the /metrics page of the bridge at `port` (-1: none).
double sourceMetric(int port, const std::string& name, const std::string& source);

// Certificates for the TLS tests, made with the openssl command (EC P-256, valid a day).
// A CA: <base>-ca.pem and its key <base>-ca-key.pem.
void makeCa(const std::string& base);
// <out>.pem and its key <out>-key.pem, for `subjectAltName` ("IP:127.0.0.1,DNS:x"; "" for none),
// signed by the CA <caPem> with the key <caKey>.
void makeCertificate(const std::string& caPem, const std::string& caKey, const std::string& out,
                     const std::string& subjectAltName);

// A TCP port free on loopback when asked (bound to port 0, then closed).
int freeLoopbackPort();

// A TCP forwarder on a free loopback port to a target port, that a test can cut like a network
// partition (bytes stop flowing both ways, connections stay open, new ones are accepted and go
// nowhere: nothing tells either end) or point elsewhere (a failover behind a virtual address:
// open connections are closed, new ones reach the new target).
class TcpProxy {
 public:
  explicit TcpProxy(int targetPort);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;
  int port() const { return port_; }
  void cut();
  void heal();
  void retarget(int targetPort);
  // Writes `lastWords` to every open client and closes it (and its server side), as a server
  // closes a connection with an error ("-ERR 'Maximum Control Line Exceeded'\r\n"); new
  // connections go through as before.
  void closeClients(const std::string& lastWords);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// Sends `request` as it is (bytes of HTTP/1.1) and reads one response, for requests an HTTP client
// library would "fix" (a POST without Content-Length). status 0: no answer within `timeout`.
HttpReply rawHttp(int port, const std::string& request, std::chrono::milliseconds timeout);

// Raw HTTP clients on loopback, for requests a client library would not send (hostile ones).
// A client socket with send and receive timeouts; -1 when it cannot connect.
int connectTo(int port, std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));
// Sends all of `data`; false when the connection failed.
bool sendAll(int fd, std::string_view data);
// Everything the server sends until it closes, or until nothing came for `quiet`.
std::string readAll(int fd, std::chrono::milliseconds quiet);
// The status codes of the responses in `bytes`, in order (each but the last with a Content-Length).
std::vector<int> statuses(const std::string& bytes);

// An HTTP server on a free loopback port that forwards GETs to a bridge and lets the test
// rewrite each answer: rewrite(n, target, body) gets the n-th request (from 0) and returns the
// body to send. Serves until destroyed.
class ForwardingProxy {
 public:
  using Rewrite = std::function<std::string(int n, const std::string& target, std::string body)>;
  ForwardingProxy(int targetPort, Rewrite rewrite);
  ~ForwardingProxy();
  int port() const { return port_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace outbox::test

#include "harness.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "harness_internal.h"

// The stack and its MariaDB: the environment, waiting, a database per test and its rows. The
// bridge (its config, commands and process, certificates, its stream) is in harness_bridge.cpp;
// HTTP, raw sockets and proxies in harness_net.cpp.

namespace outbox::test {

namespace {

std::string requireEnv(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    throw std::runtime_error(fmt::format(
        "{} is not set: integration tests need the stack that tools/test starts (run tools/test)", name));
  }
  return v;
}

}  // namespace

// Thread-safe: tests run commands from several threads (two prunes at once), and an unlocked
// generator gave both the same name, so one's output was written over the other's.
std::string randomSuffix() {
  static std::mutex mu;
  static std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(getpid()));
  std::lock_guard lock(mu);
  return fmt::format("{:x}", rng() & 0xffffffffffULL);
}

std::string tempDir() {
  const char* dir = std::getenv("OUTBOX_TEST_TMP");
  // One directory per user: another user's run must not leave one this user cannot write.
  std::string base = dir ? dir : fmt::format("/tmp/outbox-tests-{}", ::getuid());
  std::system(("mkdir -p " + base).c_str());
  return base;
}

const StackEnv& stack() {
  static const StackEnv env = [] {
    StackEnv e;
    e.mysqlHost = requireEnv("OUTBOX_TEST_MYSQL_HOST");
    const char* server = std::getenv("OUTBOX_TEST_MYSQL_SERVER");
    const std::string which = server != nullptr ? server : "";
    if (which.empty() || which == "tuned") {
      e.mysqlPort = static_cast<unsigned>(std::stoul(requireEnv("OUTBOX_TEST_MYSQL_PORT")));
      e.mysqlService = "mariadb";
    } else if (which == "defaults") {
      e.mysqlPort = static_cast<unsigned>(std::stoul(requireEnv("OUTBOX_TEST_MYSQL_DEFAULTS_PORT")));
      e.mysqlService = "mariadb-defaults";
      e.mysqlDefaults = true;
    } else {
      throw std::runtime_error("OUTBOX_TEST_MYSQL_SERVER is '" + which + "': it takes tuned (the default) or defaults");
    }
    e.mysqlUser = requireEnv("OUTBOX_TEST_MYSQL_USER");
    e.mysqlPassword = requireEnv("OUTBOX_TEST_MYSQL_PASSWORD");
    e.natsUrl = requireEnv("OUTBOX_TEST_NATS_URL");
    e.stackScript = requireEnv("OUTBOX_STACK");
    e.bridgeBinary = requireEnv("OUTBOX_TEST_BRIDGE_BIN");
    e.sourceRoot = requireEnv("OUTBOX_TEST_SOURCE_ROOT");
    e.stackDir = requireEnv("OUTBOX_STACK_DIR");
    if (const char* v = std::getenv("OUTBOX_TEST_NATS_CLUSTER_URLS")) e.natsClusterUrls = v;
    if (const char* v = std::getenv("OUTBOX_TEST_MYSQL_REPLICA_PORT")) e.mysqlReplicaPort = static_cast<unsigned>(std::stoul(v));
    db::initLibrary();
    registerSecret(e.mysqlPassword);
    return e;
  }();
  return env;
}

void registerSecret(const std::string& secret) {
  std::ofstream(tempDir() + "/secrets.txt", std::ios::app) << secret << "\n";
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream b;
  b << in.rdbuf();
  return b.str();
}

FrozenProcess::FrozenProcess(const std::string& pidText) : pid_(static_cast<pid_t>(std::stol(pidText))) {
  if (::kill(pid_, SIGSTOP) != 0) throw std::runtime_error("cannot SIGSTOP pid " + pidText);
}

FrozenProcess::~FrozenProcess() { ::kill(pid_, SIGCONT); }

void stackCommand(const std::string& action, const std::string& service) {
  std::string cmd = fmt::format("{} {} {} >/dev/null 2>&1", stack().stackScript, action, service);
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
}

bool waitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string mysqlPidFile() { return stack().stackDir + "/" + stack().mysqlService + "/mariadbd.pid"; }

namespace {
std::string scalarText(const std::string& query) {
  auto conn = connectAt(stack().mysqlPort);
  auto q = conn->query(query);
  if (!q.isOk() || !q->next()) throw std::runtime_error("failed: " + query);
  return std::string(q->text(0));
}
}  // namespace

std::string globalBinlogFormat() { return scalarText("SELECT @@global.binlog_format"); }

db::BinlogCommit nextCommit(db::BinlogReader& reader, std::chrono::milliseconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < until) {
    auto c = reader.next();
    if (!c.isOk()) throw std::runtime_error("reading the binary log: " + c.status().message());
    if (!c->empty()) return *c;
  }
  throw std::runtime_error(fmt::format("no commit reported within {} ms", within.count()));
}

bool metadataLocksVisible() {
  return scalarText("SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'METADATA_LOCK_INFO' AND "
                    "PLUGIN_STATUS = 'ACTIVE'") != "0";
}

db::ConnectParams stackParams(const std::string& database, unsigned port) {
  db::ConnectParams p;
  p.host = stack().mysqlHost;
  p.port = port != 0 ? port : stack().mysqlPort;
  p.user = stack().mysqlUser;
  p.password = stack().mysqlPassword;
  p.database = database;
  return p;
}

TestDatabase::TestDatabase(const std::string& purpose)
    : name_(fmt::format("t_{}_{}", purpose, randomSuffix())), port_(stack().mysqlPort) {
  auto conn = db::Connection::open(stackParams());
  if (!conn.isOk()) throw std::runtime_error("MariaDB is not reachable: " + conn.status().message());
  Status s = (*conn)->exec("CREATE DATABASE `" + name_ + "`");
  if (!s.isOk()) throw std::runtime_error(s.message());
}

TestDatabase::~TestDatabase() {
  conn_.reset();
  auto conn = db::Connection::open(stackParams("", port_));
  if (conn.isOk()) (void)(*conn)->exec("DROP DATABASE IF EXISTS `" + name_ + "`");
}

void TestDatabase::moveTo(unsigned port) {
  port_ = port;
  conn_.reset();
}

uint64_t TestDatabase::unversioned(const std::string& table) {
  return scalar(fmt::format("SELECT COUNT(*) FROM `{0}` o LEFT JOIN `{0}_versions` v ON v.outbox_id = o.id "
                            "WHERE v.version IS NULL",
                            table));
}

bool TestDatabase::allPublished(const std::string& source, const std::string& table) {
  if (unversioned(table) != 0) return false;
  const SourceState s = state(source);
  return s.publishedThrough == s.assignedThrough;
}

std::string TestDatabase::dsn() const {
  return fmt::format("mysql://{}@{}:{}/{}", stack().mysqlUser, stack().mysqlHost, port_, name_);
}

std::unique_ptr<db::Connection> connectAt(unsigned port, const std::string& database) {
  auto conn = db::Connection::open(stackParams(database, port));
  if (!conn.isOk()) {
    throw std::runtime_error(fmt::format("MariaDB at port {} is not reachable: {}", port, conn.status().message()));
  }
  return std::move(conn).value();
}

std::unique_ptr<db::Connection> TestDatabase::connect() const { return connectAt(port_, name_); }

db::Connection& TestDatabase::sql() {
  // Reconnect when the server was restarted under the test.
  if (conn_) {
    auto ping = conn_->queryU64("SELECT 1");
    if (!ping.isOk()) conn_.reset();
  }
  if (!conn_) conn_ = connect();
  return *conn_;
}

uint64_t TestDatabase::scalar(const std::string& query) {
  auto v = sql().queryU64(query);
  if (!v.isOk()) throw std::runtime_error(v.status().message());
  return v->value_or(0);
}

SourceState TestDatabase::state(const std::string& source) {
  auto rows = sql().query(fmt::format(
      "SELECT epoch, assigned_through, published_through, published_stream_seq, halted_reason, scan_cursor, "
      "scan_floor, halted_row_id, halted_version FROM outbox_source_state WHERE source = '{}'",
      source));
  if (!rows.isOk()) throw std::runtime_error(rows.status().message());
  SourceState s;
  if (!rows->next()) return s;
  s.epoch = rows->u64(0);
  s.assignedThrough = rows->u64(1);
  s.publishedThrough = rows->u64(2);
  s.publishedStreamSeq = rows->u64(3);
  s.haltedReason = std::string(rows->text(4));
  if (!rows->isNull(5)) s.scanCursor = rows->u64(5);
  if (!rows->isNull(6)) s.scanFloor = rows->u64(6);
  if (!rows->isNull(7)) s.haltedRow = HaltedRow{rows->u64(7), std::nullopt};
  if (s.haltedRow && !rows->isNull(8)) s.haltedRow->version = rows->u64(8);
  return s;
}

std::string uniqueName(const std::string& prefix, const TestDatabase& database) {
  return prefix + database.name().substr(database.name().size() - 6);
}

void insertRows(db::Connection& conn, const std::string& table, int count, int first, const std::string& entityType,
                size_t padBytes) {
  const std::string pad(padBytes, 'x');
  Status s = conn.begin();
  const int chunk = 500;
  for (int i = 0; i < count && s.isOk(); i += chunk) {
    std::string sql = fmt::format("INSERT INTO `{}` (entity_type, entity_key, op, payload) VALUES ", table);
    for (int j = i; j < std::min(count, i + chunk); ++j) {
      if (j > i) sql += ',';
      sql += fmt::format("('{}', '{}', 'upsert', '{{\"n\":{},\"pad\":\"{}\"}}')", entityType, first + j, first + j, pad);
    }
    s = conn.exec(sql);
  }
  if (s.isOk()) s = conn.commit();
  if (!s.isOk()) throw std::runtime_error("insert rows: " + s.message());
}

std::vector<OutboxRow> readOutboxRows(db::Connection& conn, const std::string& table, const std::string& where) {
  auto rows = conn.query(
      fmt::format("SELECT id, entity_type, entity_key, op, payload FROM {} WHERE {} ORDER BY id", table, where));
  if (!rows.isOk()) throw std::runtime_error(rows.status().message());
  std::vector<OutboxRow> out;
  while (rows->next()) {
    OutboxRow r{rows->u64(0), std::string(rows->text(1)), std::string(rows->text(2)), std::string(rows->text(3)),
                std::nullopt, 0, 0};
    if (!rows->isNull(4)) r.payload = std::string(rows->text(4));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace outbox::test

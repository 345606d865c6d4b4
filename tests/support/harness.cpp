#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>

#include "relay/jetstream_publisher.h"

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

// Thread-safe: tests run commands from several threads (two prunes at once), and an unlocked
// generator gave both the same name, so one's output was written over the other's.
std::string randomSuffix() {
  static std::mutex mu;
  static std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(getpid()));
  std::lock_guard lock(mu);
  return fmt::format("{:x}", rng() & 0xffffffffffULL);
}



}  // namespace

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

// The outbox tables of each config writeConfig() wrote: (database, table).
std::map<std::string, std::vector<std::pair<std::string, std::string>>>& configuredTables() {
  static std::map<std::string, std::vector<std::pair<std::string, std::string>>> tables;
  return tables;
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

std::string SourceSpec::stream() const {
  auto it = extra.find("stream");
  if (it != extra.end()) return it->second.substr(1, it->second.size() - 2);
  std::string up;
  for (char c : name) up.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  return "CONTROL_" + up;
}

std::string writeConfig(const std::vector<SourceSpec>& sources, const std::string& extraToml) {
  std::string path = fmt::format("{}/config-{}.toml", tempDir(), randomSuffix());
  for (const auto& s : sources) configuredTables()[path].emplace_back(s.database->name(), s.outboxTable());
  std::ofstream out(path);
  if (extraToml.find("[nats]") == std::string::npos) {
    out << fmt::format("[nats]\nurl = \"{}\"\nack_timeout = \"2s\"\n\n", stack().natsUrl);
  }
  out << "[log]\nlevel = \"debug\"\n\n";
  if (extraToml.find("[http]") == std::string::npos) out << "[http]\nlisten = \"127.0.0.1:0\"\n\n";
  out << extraToml << "\n";
  for (const auto& s : sources) {
    auto given = [&](const char* key, const std::string& otherwise) {
      auto it = s.extra.find(key);
      return it != s.extra.end() ? it->second : "\"" + otherwise + "\"";
    };
    out << fmt::format("[[source]]\nname = \"{}\"\ndsn = {}\npassword = {}\n", s.name, given("dsn", s.database->dsn()),
                       given("password", stack().mysqlPassword));
    if (!s.extra.count("poll_interval")) out << "poll_interval = \"20ms\"\n";
    // The tests wait for a replica to verify at the version they wrote last: a summary kept for the
    // default minute would hold that back (summary_cache_test.cpp sets its own).
    if (!s.extra.count("summary_interval")) out << "summary_interval = \"0\"\n";
    for (const auto& [k, v] : s.extra) {
      if (k != "dsn" && k != "password") out << k << " = " << v << "\n";
    }
    out << "\n";
  }
  return path;
}

CommandResult runBridge(const std::vector<std::string>& args) {
  std::string cmd = stack().bridgeBinary;
  for (const auto& a : args) cmd += " '" + a + "'";
  return runCommand(cmd);
}

CommandResult runCommand(const std::string& shellCommand) {
  std::string base = fmt::format("{}/cmd-{}", tempDir(), randomSuffix());
  std::string cmd = shellCommand + fmt::format(" >{}.out 2>{}.err </dev/null", base, base);
  int raw = std::system(cmd.c_str());
  CommandResult r;
  r.exitCode = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = readFile(base + ".out");
  r.err = readFile(base + ".err");
  // tools/test gives the run a directory of its own, whose every output the secrets suite scans:
  // keep them there.
  if (std::getenv("OUTBOX_TEST_TMP") == nullptr) {
    std::remove((base + ".out").c_str());
    std::remove((base + ".err").c_str());
  }
  return r;
}

void migrate(const std::string& configPath) {
  auto r = runBridge({"migrate", "--config", configPath});
  if (r.exitCode != 0) throw std::runtime_error("migrate failed: " + r.err);
  for (const auto& [database, table] : configuredTables()[configPath]) {
    auto conn = db::Connection::open(stackParams(database));
    if (!conn.isOk()) throw std::runtime_error(conn.status().message());
    Status s = (*conn)->exec(fmt::format(
        "CREATE TRIGGER IF NOT EXISTS `{0}_append_only` BEFORE UPDATE ON `{0}` FOR EACH ROW SIGNAL SQLSTATE '45000' "
        "SET MESSAGE_TEXT = 'outbox rows are append-only (a test trigger refuses every UPDATE)'",
        table));
    if (!s.isOk()) throw std::runtime_error("trigger on " + table + ": " + s.message());
  }
}

void allowOutboxUpdates(TestDatabase& database, const std::string& table) {
  Status s = database.sql().exec(fmt::format("DROP TRIGGER IF EXISTS `{}_append_only`", table));
  if (!s.isOk()) throw std::runtime_error(s.message());
}

BridgeProcess::BridgeProcess(std::string configPath)
    : configPath_(std::move(configPath)), logPath_(fmt::format("{}/bridge-{}.log", tempDir(), randomSuffix())) {}

void BridgeProcess::start() {
  startedAt_ = readFile(logPath_).size();  // the log is appended to: this run's lines start here
  if (!process_.start({stack().bridgeBinary, "run", "--config", configPath_}, logPath_)) {
    throw std::runtime_error("cannot start " + stack().bridgeBinary);
  }
}

int BridgeProcess::stop(std::chrono::milliseconds* took) {
  auto begin = std::chrono::steady_clock::now();
  auto code = process_.terminate(std::chrono::seconds(20));
  if (took) *took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - begin);
  return code.value_or(-1);
}

void BridgeProcess::kill() { process_.kill(); }

void BridgeProcess::pause() { process_.signal(SIGSTOP); }

void BridgeProcess::resume() { process_.signal(SIGCONT); }

void BridgeProcess::sendSignal(int sig) { process_.signal(sig); }

bool BridgeProcess::running() { return process_.running(); }

pid_t BridgeProcess::pid() const { return process_.pid(); }

std::string BridgeProcess::log() const { return readFile(logPath_); }

int BridgeProcess::httpPort(std::chrono::milliseconds timeout) const {
  return loggedPort("http: listening on http://", timeout);
}

int BridgeProcess::loggedPort(const std::string& marker, std::chrono::milliseconds timeout) const {
  int port = 0;
  waitUntil([&] {
    std::string text = log();
    auto at = text.rfind(marker);
    if (at == std::string::npos || at < startedAt_) return false;  // an earlier run's port
    auto colon = text.find(':', at + marker.size());
    port = std::atoi(text.c_str() + colon + 1);
    return port > 0;
  }, timeout);
  if (port <= 0) throw std::runtime_error("the bridge logged no '" + marker + "' port:\n" + log());
  return port;
}

HttpReply httpRequest(int port, const std::string& method, const std::string& path, const std::string& body,
                      const std::map<std::string, std::string>& headers) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(std::chrono::seconds(30));
  httplib::Headers extra;
  for (const auto& [k, v] : headers) extra.emplace(k, v);
  client.set_default_headers(extra);
  httplib::Result res = method == "GET"    ? client.Get(path)
                        : method == "POST" ? client.Post(path, body, "application/json")
                        : method == "PUT"  ? client.Put(path, body, "application/json")
                                           : client.Delete(path);
  HttpReply reply;
  if (!res) return reply;
  reply.status = res->status;
  reply.body = res->body;
  for (const auto& [k, v] : res->headers) reply.headers[k] = v;
  return reply;
}

double metricSample(const std::string& page, const std::string& nameAndLabels) {
  auto at = page.find("\n" + nameAndLabels + " ");
  if (at == std::string::npos) return -1;
  return std::stod(page.substr(at + nameAndLabels.size() + 2));
}

double sourceMetric(int port, const std::string& name, const std::string& source) {
  return metricSample(httpRequest(port, "GET", "/metrics").body, fmt::format("{}{{source=\"{}\"}}", name, source));
}

namespace {
void openssl(const std::string& args) {
  auto r = runCommand("openssl " + args);
  if (r.exitCode != 0) throw std::runtime_error("openssl " + args + ": " + r.err);
}
constexpr const char* kEcKey = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
}  // namespace

void makeCa(const std::string& base) {
  openssl(fmt::format("req -x509 {} -days 1 -subj '/CN=test CA {}' -keyout {}-ca-key.pem -out {}-ca.pem", kEcKey,
                      randomSuffix(), base, base));
}

void makeCertificate(const std::string& caPem, const std::string& caKey, const std::string& out,
                     const std::string& subjectAltName) {
  openssl(fmt::format("req {} -subj '/CN=test' -keyout {}-key.pem -out {}.csr", kEcKey, out, out));
  std::string extensions;
  if (!subjectAltName.empty()) {
    std::ofstream(out + ".ext") << "subjectAltName=" << subjectAltName << "\n";
    extensions = fmt::format("-extfile {}.ext", out);
  }
  // A serial of its own: a client refuses two certificates of one CA with the same serial.
  openssl(fmt::format("x509 -req -in {0}.csr -CA {1} -CAkey {2} -set_serial 0x{3} -days 1 {4} -out {0}.pem", out, caPem,
                      caKey, randomSuffix(), extensions));
}

int freeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  if (port == 0) throw std::runtime_error("no free loopback port");
  return port;
}

int connectTo(int port, std::chrono::milliseconds timeout) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool sendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string readAll(int fd, std::chrono::milliseconds quiet) {
  timeval tv{static_cast<time_t>(quiet.count() / 1000), static_cast<suseconds_t>((quiet.count() % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

std::vector<int> statuses(const std::string& bytes) {
  std::vector<int> out;
  // Answer after answer, each skipped by its Content-Length; one without (chunked, or ended by the
  // close) is the last.
  for (size_t at = 0; bytes.compare(at, 9, "HTTP/1.1 ") == 0;) {
    out.push_back(std::atoi(bytes.c_str() + at + 9));
    size_t headEnd = bytes.find("\r\n\r\n", at);
    size_t length = bytes.find("\r\nContent-Length: ", at);
    if (headEnd == std::string::npos || length == std::string::npos || length > headEnd) break;
    at = headEnd + 4 + std::strtoul(bytes.c_str() + length + 18, nullptr, 10);
  }
  return out;
}

HttpReply rawHttp(int port, const std::string& request, std::chrono::milliseconds timeout) {
  HttpReply reply;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return reply;
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
      response.append(buf, static_cast<size_t>(n));
      // One response is enough: stop at the end of its body.
      auto headerEnd = response.find("\r\n\r\n");
      auto lengthAt = response.find("Content-Length: ");
      if (headerEnd != std::string::npos && lengthAt != std::string::npos && lengthAt < headerEnd &&
          response.size() >= headerEnd + 4 + std::stoul(response.substr(lengthAt + 16))) {
        break;
      }
    }
  }
  ::close(fd);
  if (response.rfind("HTTP/1.1 ", 0) != 0) return reply;
  reply.status = std::stoi(response.substr(9, 3));
  auto headerEnd = response.find("\r\n\r\n");
  if (headerEnd != std::string::npos) reply.body = response.substr(headerEnd + 4);
  return reply;
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

StreamReader::StreamReader() : StreamReader(stack().natsUrl) {}

StreamReader::StreamReader(const std::string& natsUrl) {
  auto c = nats::Connection::connect(NatsConfig{.url = natsUrl}, "outbox-tests");
  if (!c.isOk()) throw std::runtime_error("nats-server is not reachable: " + c.status().message());
  conn_ = std::move(c).value();
  auto js = nats::JetStream::create(*conn_, std::chrono::milliseconds(5000), 1024);
  if (!js.isOk()) throw std::runtime_error(js.status().message());
  js_ = std::move(js).value();
}

nats::StreamState StreamReader::state(const std::string& stream) {
  auto s = js_->streamState(stream);
  if (!s.isOk()) throw std::runtime_error(s.status().message());
  return *s;
}

bool StreamReader::exists(const std::string& stream) { return js_->streamState(stream).isOk(); }

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

std::vector<VersionAck> publishAsBridge(const SourceSpec& source, const std::vector<OutboxRow>& rows, uint64_t epoch,
                                        uint64_t afterSeq, bool fenceOnPreviousVersion) {
  SourceConfig sc;
  sc.name = source.name;
  sc.stream = source.stream();
  sc.subjectPrefix = "control." + source.name;
  NatsConfig nats{.url = stack().natsUrl};
  auto conn = nats::Connection::connect(nats, "outbox-tests");
  if (!conn.isOk()) throw std::runtime_error("nats-server is not reachable: " + conn.status().message());
  JetStreamPublisher publisher(sc, nats, **conn);
  if (Status s = publisher.prepare(); !s.isOk()) throw std::runtime_error(s.message());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (Status s = publisher.publish(rows[i], epoch, afterSeq + i, fenceOnPreviousVersion); !s.isOk()) {
      throw std::runtime_error(s.message());
    }
  }
  std::vector<VersionAck> acks;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);  // a shared machine can be slow
  while (acks.size() < rows.size() && std::chrono::steady_clock::now() < deadline) {
    publisher.waitForAcks(std::chrono::milliseconds(20));
    publisher.takeAcks(acks);
  }
  return acks;
}

std::vector<nats::StoredMessage> StreamReader::readAll(const std::string& stream, const std::string& subjectPrefix) {
  auto st = state(stream);
  if (st.messages == 0) return {};
  auto r = js_->readRange(stream, subjectPrefix + ".>", st.firstSeq, st.lastSeq, std::chrono::milliseconds(5000));
  if (!r.isOk()) throw std::runtime_error(r.status().message());
  return std::move(r).value();
}

void requireDenseOnce(const SourceSpec& source, uint64_t count) {
  StreamReader reader;
  std::string violation = checkDenseOnce(reader.readAll(source.stream(), "control." + source.name), source.name, count);
  if (!violation.empty()) throw std::runtime_error("stream " + source.stream() + ": " + violation);
}

uint64_t headerU64(const nats::StoredMessage& m, const std::string& key) {
  auto it = m.headers.find(key);
  if (it == m.headers.end()) return 0;
  return std::stoull(it->second);
}

std::string checkDenseOnce(const std::vector<nats::StoredMessage>& messages, const std::string& source,
                           uint64_t expectedCount, uint64_t firstVersion) {
  if (messages.size() != expectedCount) {
    return fmt::format("stream holds {} messages, expected {}", messages.size(), expectedCount);
  }
  uint64_t lastSeq = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    uint64_t version = headerU64(m, "Outbox-Version");
    uint64_t want = firstVersion + i;
    if (version != want) return fmt::format("message {} (seq {}) has version {}, expected {}", i, m.seq, version, want);
    if (m.seq <= lastSeq) return fmt::format("sequence {} after {}", m.seq, lastSeq);
    lastSeq = m.seq;
    auto id = m.headers.count("Nats-Msg-Id") ? m.headers.at("Nats-Msg-Id") : "";
    if (id != fmt::format("{}:{}", source, version)) return fmt::format("seq {}: Nats-Msg-Id '{}'", m.seq, id);
    if (!m.headers.count("Outbox-Source") || m.headers.at("Outbox-Source") != source) {
      return fmt::format("seq {}: Outbox-Source missing or wrong", m.seq);
    }
  }
  return "";
}

}  // namespace outbox::test

namespace outbox::test {

struct ForwardingProxy::Impl {
  httplib::Server server;
  std::thread thread;
};

ForwardingProxy::ForwardingProxy(int targetPort, Rewrite rewrite) : impl_(std::make_unique<Impl>()) {
  auto served = std::make_shared<std::atomic<int>>(0);
  impl_->server.Get(".*", [targetPort, rewrite, served](const httplib::Request& req, httplib::Response& res) {
    auto real = httpRequest(targetPort, "GET", req.target);
    res.status = real.status;
    res.set_content(rewrite(served->fetch_add(1), req.target, real.body), "application/json");
  });
  port_ = impl_->server.bind_to_any_port("127.0.0.1");
  impl_->thread = std::thread([this] { impl_->server.listen_after_bind(); });
}

ForwardingProxy::~ForwardingProxy() {
  impl_->server.stop();
  impl_->thread.join();
}

struct TcpProxy::Impl {
  int listener = -1;
  std::atomic<bool> stopping{false};
  std::atomic<bool> cut{false};
  std::atomic<int> target{0};
  std::atomic<uint64_t> generation{0};  // retarget() ends the connections of older generations
  std::thread acceptor;
  std::mutex mu;
  std::vector<std::thread> pipes;  // GUARDED_BY(mu)
  std::string lastWords;           // GUARDED_BY(mu): sent to a client a new generation ends

  static int connectTo(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  // Copies bytes both ways until either end closes, the proxy stops or is retargeted; while cut,
  // reads nothing (the kernel buffers fill and the senders stall, as behind a dead link).
  void pipe(int client, uint64_t born) {
    int server = connectTo(target.load());
    if (server < 0) {
      ::close(client);
      return;
    }
    char buf[16384];
    while (!stopping && generation == born) {
      pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (cut) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      if (::poll(fds, 2, 50) <= 0) continue;
      bool closed = false;
      for (int i = 0; i < 2 && !closed; ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
        int to = i == 0 ? server : client;
        for (ssize_t sent = 0; n > 0 && sent < n;) {
          ssize_t w = ::send(to, buf + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
          if (w <= 0) break;
          sent += w;
        }
        closed = n <= 0;
      }
      if (closed) break;
    }
    if (!stopping && generation != born) {
      std::string words;
      {
        std::lock_guard lock(mu);
        words = lastWords;
      }
      if (!words.empty()) ::send(client, words.data(), words.size(), MSG_NOSIGNAL);
    }
    ::close(client);
    ::close(server);
  }
};

TcpProxy::TcpProxy(int targetPort) : impl_(std::make_unique<Impl>()) {
  impl_->target = targetPort;
  impl_->listener = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(impl_->listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(impl_->listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(impl_->listener, 64) != 0 ||
      ::getsockname(impl_->listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error("tcp proxy: cannot listen");
  }
  port_ = ntohs(addr.sin_port);
  impl_->acceptor = std::thread([impl = impl_.get()] {
    while (!impl->stopping) {
      pollfd fd{impl->listener, POLLIN, 0};
      if (::poll(&fd, 1, 50) <= 0) continue;
      int client = ::accept(impl->listener, nullptr, nullptr);
      if (client < 0) continue;
      std::lock_guard lock(impl->mu);
      impl->pipes.emplace_back([impl, client, born = impl->generation.load()] { impl->pipe(client, born); });
    }
  });
}

TcpProxy::~TcpProxy() {
  impl_->stopping = true;
  impl_->acceptor.join();
  std::lock_guard lock(impl_->mu);
  for (auto& t : impl_->pipes) t.join();
  ::close(impl_->listener);
}

void TcpProxy::cut() { impl_->cut = true; }
void TcpProxy::heal() { impl_->cut = false; }

void TcpProxy::retarget(int targetPort) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->lastWords.clear();
  }
  impl_->target = targetPort;
  ++impl_->generation;
}

void TcpProxy::closeClients(const std::string& lastWords) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->lastWords = lastWords;
  }
  ++impl_->generation;
}

}  // namespace outbox::test

#include "harness.h"

#include <sys/wait.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "harness_internal.h"
#include "relay/jetstream_publisher.h"

// The bridge under test: its config, its commands and process, certificates for its TLS, and the
// stream it writes (read back, or published to as it would).

namespace outbox::test {

// The outbox tables of each config writeConfig() wrote: (database, table).
std::map<std::string, std::vector<std::pair<std::string, std::string>>>& configuredTables() {
  static std::map<std::string, std::vector<std::pair<std::string, std::string>>> tables;
  return tables;
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

#define BOOST_TEST_MODULE snapshot_integration
#include <boost/test/unit_test.hpp>

#include <httplib.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "config/subject_template.h"
#include "accounts_source.h"
#include "harness.h"
#include "replica/replica.h"
#include "snapshot/checksum.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

std::map<std::string, std::optional<std::string>> replicaTable(const Replica& replica) {
  std::map<std::string, std::optional<std::string>> out;
  for (const auto& [key, values] : replica.records()) out[key] = values.at(1);
  return out;
}

Replica::Options replicaOptions(int port, const std::string& source, std::vector<std::string>* lines = nullptr) {
  Replica::Options o;
  o.baseUrl = fmt::format("http://127.0.0.1:{}", port);
  o.source = source;
  o.nats.url = stack().natsUrl;
  o.verifyInterval = 100ms;
  if (lines) o.report = [lines](const std::string& l) { lines->push_back(l); };
  return o;
}

// Steps the replica until `done` or the deadline.
bool stepUntil(Replica& replica, const std::function<bool()>& done, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    (void)replica.step(50ms);
    if (done()) return true;
  }
  return false;
}

}  // namespace

// ADR-021 validation 3: the watermark is the highest published version, the checksum matches a
// fresh recomputation over the same records, and stream.seq holds the watermark's message.
BOOST_AUTO_TEST_CASE(adr021_snapshot_watermark_and_checksum) {
  AccountsSource src("snapwm");
  auto conn = src.database.connect();
  for (uint64_t i = 1; i <= 50; ++i) src.change(*conn, i, fmt::format("Account {}", i));
  src.change(*conn, 7, std::nullopt);
  src.change(*conn, 9, "", true);
  BridgeProcess bridge(src.config);
  bridge.start();
  int port = bridge.httpPort();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return src.published() == 52; }, 20s), bridge.log());
  auto reply = httpRequest(port, "GET", "/v1/sources/" + src.spec.name + "/control-snapshot");
  BOOST_REQUIRE_EQUAL(reply.status, 200);
  BOOST_TEST(reply.headers["Content-Type"] == "application/json");
  auto snap = parseSnapshot(reply.body, true);
  BOOST_REQUIRE_MESSAGE(snap.isOk(), snap.status().message());
  BOOST_TEST(snap->watermark == 52u);
  BOOST_TEST(snap->watermark == src.database.scalar("SELECT MAX(version) FROM " + src.spec.outboxTable() + "_versions"));
  BOOST_TEST(snap->epoch == 1u);
  BOOST_TEST(snap->recordCount == 49u);
  BOOST_TEST(snap->key == "id");
  BOOST_TEST((snap->columns == std::vector<std::string>{"id", "displayName"}));
  // A fresh recomputation over the same record set, read straight from the table.
  uint64_t fresh = 0;
  auto rows = src.database.sql().query("SELECT id, display_name FROM accounts");
  BOOST_REQUIRE(rows.isOk());
  while (rows->next()) {
    std::vector<std::optional<std::string>> values{std::string(rows->text(0))};
    auto name = rows->optText(1);
    values.push_back(name ? std::optional<std::string>(std::string(*name)) : std::nullopt);
    fresh += recordHash(values);
  }
  BOOST_TEST(snap->checksum == fresh);
  // stream.seq holds the watermark's message.
  StreamReader reader;
  auto message = reader.js().getMessage(snap->streamName, snap->streamSeq);
  BOOST_REQUIRE(message.isOk());
  BOOST_REQUIRE(message->has_value());
  BOOST_TEST(headerU64(**message, "Outbox-Version") == snap->watermark);
  // The alias path and the summary agree.
  auto alias = httpRequest(port, "GET", "/" + src.spec.name + "/control-snapshot?summary=true");
  BOOST_REQUIRE_EQUAL(alias.status, 200);
  auto summary = parseSnapshot(alias.body, false);
  BOOST_REQUIRE(summary.isOk());
  BOOST_TEST(summary->checksum == snap->checksum);
  BOOST_TEST(summary->recordCount == snap->recordCount);
  BOOST_TEST(alias.body.find("\"records\"") == std::string::npos);
  BOOST_TEST(bridge.stop() == 0);
}

// A snapshot taken while producers write and the bridge publishes; a replica bootstrapped from
// it and following the stream ends equal to the database, and its incrementally kept checksum
// equals a fresh ?summary=true.
BOOST_AUTO_TEST_CASE(a_replica_bootstrapped_mid_flight_ends_equal_to_the_database) {
  AccountsSource src("follow");
  BridgeProcess bridge(src.config);
  bridge.start();
  int port = bridge.httpPort();
  std::atomic<bool> producing{true};
  std::vector<std::thread> producers;
  for (int t = 0; t < 3; ++t) {
    producers.emplace_back([&, t] {
      auto conn = src.database.connect();
      std::mt19937 rng(t);
      for (int i = 0; producing; ++i) {
        uint64_t id = 1 + rng() % 300;
        if (rng() % 10 == 0) {
          src.change(*conn, id, std::nullopt, true);
        } else {
          src.change(*conn, id, fmt::format("name {} {}", t, i));
        }
        std::this_thread::sleep_for(2ms);
      }
    });
  }
  BOOST_REQUIRE(waitUntil([&] { return src.published() > 300; }, 30s));
  std::vector<std::string> lines;
  Replica replica(replicaOptions(port, src.spec.name, &lines));
  BOOST_REQUIRE_MESSAGE(replica.bootstrap().isOk(), bridge.log());
  BOOST_TEST(replica.appliedVersion() > 0u);
  stepUntil(replica, [] { return false; }, 2s);  // follow while they write
  producing = false;
  for (auto& p : producers) p.join();
  // Everything is published; then the replica catches up and verifies.
  uint64_t total = src.database.scalar("SELECT COUNT(*) FROM " + src.spec.outboxTable());
  BOOST_REQUIRE(waitUntil([&] { return src.published() == total; }, 30s));
  BOOST_REQUIRE(stepUntil(replica, [&] { return replica.lastVerifiedVersion() == total; }, 30s));
  BOOST_TEST(replica.appliedVersion() == total);
  BOOST_TEST((replicaTable(replica) == src.table()));
  auto summary = parseSnapshot(httpRequest(port, "GET", "/v1/sources/" + src.spec.name + "/control-snapshot?summary=true").body, false);
  BOOST_REQUIRE(summary.isOk());
  BOOST_TEST(replica.checksum() == summary->checksum);
  BOOST_TEST(replica.counters().bootstraps == 1u);
  BOOST_TEST(replica.counters().gaps == 0u);
  BOOST_TEST(replica.counters().applied > 0u);
  BOOST_TEST(bridge.stop() == 0);
}

// Issue 21: the snapshot, its checksum and the replica do not depend on the subjects' shape — a
// source with a subject per key (and a partition token) bootstraps and follows as any other.
BOOST_AUTO_TEST_CASE(a_replica_follows_a_source_with_per_key_subjects) {
  AccountsSource src("perkey", "", {{"subject", "\"control.{name}.{{entity_type}}.{{partition:4}}.{{entity_key}}\""}});
  BridgeProcess bridge(src.config);
  const int port = src.seedAndStart(bridge, 100);
  Replica replica(replicaOptions(port, src.spec.name));
  BOOST_REQUIRE_MESSAGE(replica.bootstrap().isOk(), bridge.log());
  BOOST_TEST(replica.appliedVersion() == 100u);
  auto conn = src.database.connect();
  for (uint64_t i = 1; i <= 60; ++i) {
    if (i % 5 == 0) {
      src.change(*conn, i, std::nullopt, true);
    } else {
      src.change(*conn, i, fmt::format("renamed {}", i));
    }
  }
  src.change(*conn, 101, std::string("a.b *>"));  // a display name, not a key; the key is 101
  BOOST_REQUIRE(waitUntil([&] { return src.published() == 161u; }, 30s));
  BOOST_REQUIRE(stepUntil(replica, [&] { return replica.lastVerifiedVersion() == 161u; }, 30s));
  BOOST_TEST((replicaTable(replica) == src.table()));
  auto summary = parseSnapshot(httpRequest(port, "GET", "/v1/sources/" + src.spec.name + "/control-snapshot?summary=true").body, false);
  BOOST_REQUIRE(summary.isOk());
  BOOST_TEST(replica.checksum() == summary->checksum);
  BOOST_TEST(replica.counters().gaps == 0u);
  // The messages are where the template says.
  StreamReader reader;
  auto messages = reader.readAll(src.spec.stream(), "control." + src.spec.name);
  BOOST_REQUIRE_EQUAL(messages.size(), 161u);
  for (const auto& m : messages) {
    const std::string& key = m.headers.at("Outbox-Entity-Key");
    BOOST_TEST(m.subject == fmt::format("control.{}.account.{}.{}", src.spec.name, keyPartition(key, 4), key));
  }
  BOOST_TEST(bridge.stop() == 0);
}

// The consumer rejects a corrupted snapshot and retries until it gets a good one.
BOOST_AUTO_TEST_CASE(a_corrupted_snapshot_is_rejected_and_retried) {
  AccountsSource src("corrupt");
  BridgeProcess bridge(src.config);
  int port = src.seedAndStart(bridge, 20);
  // A proxy that corrupts the first two snapshots it passes on: a changed name, then a cut.
  ForwardingProxy proxy(port, [](int n, const std::string&, std::string body) {
    if (n == 0) body.replace(body.find("Account 7"), 9, "Account X");
    if (n == 1) body.resize(body.size() - 30);
    return body;
  });
  std::vector<std::string> lines;
  Replica replica(replicaOptions(proxy.port(), src.spec.name, &lines));
  BOOST_TEST(!replica.bootstrap().isOk());
  BOOST_TEST(!replica.bootstrap().isOk());
  BOOST_TEST(replica.bootstrap().isOk());
  BOOST_TEST(replica.counters().rejectedSnapshots == 2u);
  BOOST_TEST(replica.size() == 20u);
  BOOST_TEST((replicaTable(replica) == src.table()));
  bool sawChecksum = false;
  for (const auto& l : lines) sawChecksum = sawChecksum || l.find("snapshot rejected: checksum says") != std::string::npos;
  BOOST_TEST(sawChecksum);
  BOOST_TEST(bridge.stop() == 0);
}

// Issue 19, finding 2: no connection of the bridge set its own isolation level, so with a global
// transaction_isolation = READ-UNCOMMITTED the scan read a producer's uncommitted row, versioned
// and published it, and the producer then rolled back: a rolled-back row was in the stream, and a
// snapshot counted an uncommitted record. Every connection now sets the level its reads rely on.
BOOST_AUTO_TEST_CASE(a_global_read_uncommitted_lets_no_rolled_back_change_out) {
  AccountsSource src("isolation");
  // New connections, the bridge's included, start at READ UNCOMMITTED until the test ends.
  struct GlobalIsolation {
    db::Connection& conn;
    explicit GlobalIsolation(db::Connection& c) : conn(c) {
      Status s = conn.exec("SET GLOBAL TRANSACTION ISOLATION LEVEL READ UNCOMMITTED");
      if (!s.isOk()) throw std::runtime_error(s.message());
    }
    ~GlobalIsolation() { (void)conn.exec("SET GLOBAL TRANSACTION ISOLATION LEVEL REPEATABLE READ"); }
  } readUncommitted(src.database.sql());
  BridgeProcess bridge(src.config);
  int port = src.seedAndStart(bridge, 3);
  auto producer = src.database.connect();
  for (const std::string& sql : {std::string("START TRANSACTION"),
                                std::string("INSERT INTO accounts VALUES (4, 'Never committed')"),
                                fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) SELECT 'account', id, "
                                            "'upsert', JSON_OBJECT('id', id, 'displayName', display_name) FROM accounts "
                                            "WHERE id = 4",
                                            src.spec.outboxTable())}) {
    BOOST_REQUIRE(producer->exec(sql).isOk());
  }
  // While it is open: a snapshot does not hold it, and the relay, polling, does not publish it.
  const auto snapshot = httpRequest(port, "GET", "/v1/sources/" + src.spec.name + "/control-snapshot");
  BOOST_REQUIRE_EQUAL(snapshot.status, 200);
  BOOST_TEST(snapshot.body.find("\"recordCount\":3,") != std::string::npos, snapshot.body);
  BOOST_TEST(snapshot.body.find("Never committed") == std::string::npos, snapshot.body);
  std::this_thread::sleep_for(2s);
  BOOST_REQUIRE(producer->exec("ROLLBACK").isOk());
  auto conn = src.database.connect();
  src.change(*conn, 5, "Committed");
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return src.published() >= 4; }, 20s), bridge.log());
  std::this_thread::sleep_for(300ms);
  StreamReader reader;
  auto messages = reader.readAll(src.spec.stream(), "control." + src.spec.name);
  for (const auto& m : messages) {
    BOOST_TEST(m.headers.at("Outbox-Entity-Key") != "4", "the rolled-back change is in the stream: " << m.data);
  }
  BOOST_TEST(messages.size() == 4u);
  BOOST_TEST(src.published() == 4u);
  BOOST_TEST(bridge.stop() == 0);
}

BOOST_AUTO_TEST_CASE(the_replica_re_bootstraps_after_an_epoch_bump) {
  AccountsSource src("bump");
  BridgeProcess bridge(src.config);
  int port = src.seedAndStart(bridge, 10);
  auto conn = src.database.connect();
  Replica replica(replicaOptions(port, src.spec.name));
  BOOST_REQUIRE(replica.bootstrap().isOk());
  auto bump = runBridge({"epoch", "bump", "--config", src.config, "--source", src.spec.name, "--reason", "test"});
  BOOST_REQUIRE_MESSAGE(bump.exitCode == 0, bump.err);
  src.change(*conn, 11, "after the bump");
  BOOST_REQUIRE(waitUntil([&] { return src.published() == 11; }, 20s));
  BOOST_REQUIRE(stepUntil(replica, [&] { return replica.epoch() == 2 && replica.appliedVersion() == 11; }, 20s));
  BOOST_TEST(replica.counters().epochChanges >= 1u);
  BOOST_TEST(replica.counters().bootstraps == 2u);
  BOOST_TEST((replicaTable(replica) == src.table()));
  BOOST_TEST(bridge.stop() == 0);
}

BOOST_AUTO_TEST_CASE(the_replica_re_bootstraps_when_it_meets_a_gap) {
  AccountsSource src("gap");
  BridgeProcess bridge(src.config);
  int port = src.seedAndStart(bridge, 10);
  auto conn = src.database.connect();
  const std::string path = "/v1/sources/" + src.spec.name + "/control-snapshot";
  std::string atTen = httpRequest(port, "GET", path).body;  // a snapshot taken at watermark 10
  for (uint64_t i = 11; i <= 20; ++i) src.change(*conn, i, fmt::format("Account {}", i));
  BOOST_REQUIRE(waitUntil([&] { return src.published() == 20; }, 20s));
  // A gap: version 15 disappears from the stream.
  StreamReader reader;
  for (const auto& m : reader.readAll(src.spec.stream(), "control." + src.spec.name)) {
    if (headerU64(m, "Outbox-Version") == 15) BOOST_REQUIRE(reader.js().deleteMessage(src.spec.stream(), m.seq).isOk());
  }
  // The replica starts from the snapshot at 10 (served once by a proxy), so it reads 11..20
  // from the stream and meets the gap at 15.
  ForwardingProxy proxy(port, [&](int n, const std::string& target, std::string body) {
    return n == 0 && target == path ? atTen : body;
  });
  std::vector<std::string> lines;
  Replica replica(replicaOptions(proxy.port(), src.spec.name, &lines));
  BOOST_REQUIRE(replica.bootstrap().isOk());
  BOOST_TEST(replica.appliedVersion() == 10u);
  BOOST_REQUIRE(stepUntil(replica, [&] { return replica.counters().gaps > 0 && replica.appliedVersion() == 20; }, 20s));
  BOOST_TEST(replica.counters().bootstraps == 2u);
  bool sawGap = false;
  for (const auto& l : lines) sawGap = sawGap || l.find("gap: expected version 15, got 16") != std::string::npos;
  BOOST_TEST(sawGap);
  BOOST_TEST((replicaTable(replica) == src.table()));
  BOOST_TEST(bridge.stop() == 0);
}

// Quotes, backslashes, control characters, non-ASCII, empty strings and NULL survive the
// snapshot and the deltas exactly.
BOOST_AUTO_TEST_CASE(unusual_strings_round_trip_exactly) {
  AccountsSource src("strings");
  auto conn = src.database.connect();
  std::vector<std::optional<std::string>> names{
      std::string("quote \" and backslash \\"), std::string("tab\tnewline\ncr\rbell\x07"), std::string(""),
      std::nullopt, std::string("Zürich ☃ 東京 😀"), std::string("{\"looks\": \"like json\"}"), std::string("</script>")};
  for (size_t i = 0; i < names.size(); ++i) src.change(*conn, i + 1, names[i]);
  BridgeProcess bridge(src.config);
  bridge.start();
  int port = bridge.httpPort();
  BOOST_REQUIRE(waitUntil([&] { return src.published() == names.size(); }, 20s));
  auto snap = parseSnapshot(httpRequest(port, "GET", "/v1/sources/" + src.spec.name + "/control-snapshot").body, true);
  BOOST_REQUIRE_MESSAGE(snap.isOk(), snap.status().message());
  for (const auto& record : snap->records) {
    size_t index = std::stoul(*record[0]) - 1;
    BOOST_TEST((record[1] == names[index]), "record " << index + 1);
  }
  // The same strings through the deltas: a replica bootstrapped from an empty table.
  AccountsSource empty("strings2");
  BridgeProcess second(empty.config);
  second.start();
  int port2 = second.httpPort();
  Replica replica(replicaOptions(port2, empty.spec.name));
  BOOST_REQUIRE(waitUntil([&] { return httpRequest(port2, "GET", "/readyz").status == 200; }, 20s));
  BOOST_REQUIRE(replica.bootstrap().isOk());
  auto conn2 = empty.database.connect();
  for (size_t i = 0; i < names.size(); ++i) empty.change(*conn2, i + 1, names[i]);
  BOOST_REQUIRE(waitUntil([&] { return empty.published() == names.size(); }, 20s));
  BOOST_REQUIRE(stepUntil(replica, [&] { return replica.lastVerifiedVersion() == names.size(); }, 20s));
  BOOST_TEST((replicaTable(replica) == empty.table()));
  BOOST_TEST(bridge.stop() == 0);
  BOOST_TEST(second.stop() == 0);
}

BOOST_AUTO_TEST_CASE(http_errors_are_json_with_the_right_status) {
  AccountsSource src("http");
  BridgeProcess bridge(src.config);
  bridge.start();
  int port = bridge.httpPort();
  auto unknown = httpRequest(port, "GET", "/v1/sources/nope/control-snapshot");
  BOOST_TEST(unknown.status == 404);
  BOOST_TEST(unknown.body == R"({"error":"unknown source 'nope'"})");
  auto route = httpRequest(port, "GET", "/v2/whatever");
  BOOST_TEST(route.status == 404);
  BOOST_TEST(route.body.find("\"error\"") != std::string::npos);
  for (const char* method : {"POST", "PUT", "DELETE"}) {
    auto r = httpRequest(port, method, "/v1/sources/" + src.spec.name + "/control-snapshot");
    BOOST_TEST(r.status == 405, method);
    BOOST_TEST(r.headers["Allow"] == "GET, HEAD");
    BOOST_TEST(r.body.find("\"error\"") != std::string::npos);
  }
  BOOST_TEST(httpRequest(port, "POST", "/metrics").status == 405);
  auto badParam = httpRequest(port, "GET", "/v1/sources/" + src.spec.name + "/control-snapshot?summary=maybe");
  BOOST_TEST(badParam.status == 400);
  BOOST_TEST(badParam.body == R"({"error":"summary must be true or false"})");
  // Oversized: a body past the limit, and a URI past httplib's.
  auto big = httpRequest(port, "POST", "/v1/sources/x/anything", std::string(100 * 1024, 'x'));
  BOOST_TEST(big.status == 413);
  BOOST_TEST(big.body.find("\"error\"") != std::string::npos);
  auto longUri = httpRequest(port, "GET", "/v1/sources/" + std::string(20000, 'a') + "/control-snapshot");
  BOOST_TEST(longUri.status == 414);
  // Nothing that went wrong leaks SQL or credentials.
  for (const auto& body : {unknown.body, route.body, badParam.body, big.body}) {
    BOOST_TEST(body.find("SELECT") == std::string::npos);
    BOOST_TEST(body.find(stack().mysqlPassword) == std::string::npos);
  }
  BOOST_TEST(httpRequest(port, "GET", "/healthz").body == R"({"status":"ok"})");
  BOOST_TEST(httpRequest(port, "GET", "/readyz").body == R"({"status":"ready"})");
  BOOST_TEST(bridge.stop() == 0);
}

// A client that asks for a big snapshot and never reads it must not hold up anyone else.
BOOST_AUTO_TEST_CASE(a_slow_client_does_not_block_other_requests) {
  AccountsSource src("slow");
  BOOST_REQUIRE(src.database.sql()
                    .exec("INSERT INTO accounts SELECT seq, CONCAT('account number ', seq, ' ', REPEAT('x', 100)) "
                          "FROM seq_1_to_100000")
                    .isOk());
  BridgeProcess bridge(src.config);
  bridge.start();
  int port = bridge.httpPort();
  std::vector<int> sockets;
  for (int i = 0; i < 3; ++i) {  // three stalled readers of a ~13 MB document
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    BOOST_REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    std::string request = "GET /v1/sources/" + src.spec.name + "/control-snapshot HTTP/1.1\r\nHost: x\r\n\r\n";
    BOOST_REQUIRE(write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
    sockets.push_back(fd);
  }
  std::this_thread::sleep_for(500ms);
  auto begin = std::chrono::steady_clock::now();
  BOOST_TEST(httpRequest(port, "GET", "/healthz").status == 200);
  BOOST_TEST(httpRequest(port, "GET", "/metrics").status == 200);
  auto summary = httpRequest(port, "GET", "/v1/sources/" + src.spec.name + "/control-snapshot?summary=true");
  BOOST_TEST(summary.status == 200);
  BOOST_TEST(summary.body.find("\"recordCount\":100000") != std::string::npos);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - begin);
  BOOST_TEST(took.count() < 5000);
  for (int fd : sockets) close(fd);
  BOOST_TEST(bridge.stop() == 0);
}

// The command-line consumer: bootstraps, follows, verifies, dumps the replica.
BOOST_AUTO_TEST_CASE(the_replica_command_prints_its_state_changes_and_dumps_the_replica) {
  AccountsSource src("cli");
  BridgeProcess bridge(src.config);
  int port = src.seedAndStart(bridge, 5);
  auto conn = src.database.connect();
  std::string dump = tempDir() + "/replica-" + src.spec.name + ".json";
  Subprocess replica;
  std::string log = tempDir() + "/replica-" + src.spec.name + ".log";
  replica.start({stack().bridgeBinary, "replica", "--url", fmt::format("http://127.0.0.1:{}", port), "--source",
                 src.spec.name, "--nats", stack().natsUrl, "--dump", dump, "--verify-interval", "0.1"},
                log);
  auto logText = [&] {
    std::ifstream in(log);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return logText().find("bootstrapped: epoch 1, watermark 5") != std::string::npos; }, 20s),
                        logText());
  for (uint64_t i = 6; i <= 8; ++i) src.change(*conn, i, fmt::format("Account {}", i));
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return logText().find("verified at version 8: 8 records") != std::string::npos; }, 20s),
                        logText());
  BOOST_TEST(replica.terminate(std::chrono::seconds(10)).value_or(-1) == 0);
  std::ifstream in(dump);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST(text.find(R"("appliedVersion":8)") != std::string::npos, text);
  BOOST_TEST(text.find(R"({"id":8,"displayName":"Account 8"})") != std::string::npos, text);
  BOOST_TEST(logText().find("stopped at version 8") != std::string::npos);
  BOOST_TEST(bridge.stop() == 0);
}

#define BOOST_TEST_MODULE snapshot_integration
// The control snapshot and bootstrapping from it: its watermark and checksum, a replica
// bootstrapped mid-flight or on per-key subjects, a corrupted snapshot, a global READ UNCOMMITTED.
// A replica following the stream is in snapshot_replica_test.cpp, the endpoint's clients in
// snapshot_clients_test.cpp, column types in snapshot_types_test.cpp; the helpers in snapshot.h.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "config/subject_template.h"
#include "accounts_source.h"
#include "harness.h"
#include "replica/replica.h"
#include "snapshot.h"
#include "snapshot/checksum.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

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

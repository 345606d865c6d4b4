#define BOOST_TEST_MODULE fault_wake
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "harness.h"
#include "wake.h"

// Waking up (docs/design.md, "Waking up", issue 20): the binlog doorbell wakes a source's relay when a
// transaction that wrote its outbox table commits, so a row is published within milliseconds
// however long poll_interval is; without it the source waits for the poll. The doorbell's
// connection killed, the binary logs rotated and purged, MariaDB restarted, its grant revoked and
// given back: nothing lost, polling meanwhile, the doorbell back afterwards. Real MariaDB (the
// stack's writes a binary log) and nats-server.
// Fifty sources, rows the binary log does not carry and a quiet source's epoch bump are in
// wake_sources_test.cpp; the binlog reader in wake_binlog_reader_test.cpp; WatchedSource in wake.h.

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

// The server's binlog_format for the sessions that start while it lives (the bridge's and a
// producer's), as a server at its defaults has it; the stack's own is set back after.
class GlobalBinlogFormat {
 public:
  explicit GlobalBinlogFormat(const std::string& format) : root_(std::move(db::Connection::open(stackParams())).value()) {
    auto q = root_->query("SELECT @@global.binlog_format");
    BOOST_REQUIRE(q.isOk() && q->next());
    before_ = std::string(q->text(0));
    BOOST_REQUIRE(root_->exec("SET GLOBAL binlog_format = '" + format + "'").isOk());
  }
  ~GlobalBinlogFormat() { (void)root_->exec("SET GLOBAL binlog_format = '" + before_ + "'"); }

 private:
  std::unique_ptr<db::Connection> root_;
  std::string before_;
};

}  // namespace

// Issue 33: on MIXED, MariaDB's default, most statements reach the binary log as text, and the
// doorbell rang every source on each — the bridge's own marks and versions included, which rang
// again. The table an INSERT writes is read from its text: other tables, UPDATEs and the bridge's
// own writes ring nothing, a row of the source's table rings it once.
BOOST_AUTO_TEST_CASE(on_mixed_the_doorbell_rings_for_its_own_table_only) {
  GlobalBinlogFormat mixed("MIXED");
  WatchedSource w("wake_mixed");
  BOOST_REQUIRE(w.producer->exec("CREATE TABLE other (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)").isOk());
  w.start();
  w.requireDoorbell(true);
  BOOST_TEST(w.bridge.log().find("watching the binary log (binlog_format MIXED)") != std::string::npos, w.bridge.log());
  std::this_thread::sleep_for(1s);  // past the session's first polls
  const double scans = w.metric("outbox_scans_total");
  for (int i = 0; i < 20; ++i) {
    BOOST_REQUIRE(w.producer->exec(fmt::format("INSERT INTO other (v) VALUES ({})", i)).isOk());
    BOOST_REQUIRE(w.producer->exec(fmt::format("UPDATE other SET v = v + 1 WHERE v = {}", i)).isOk());
  }
  std::this_thread::sleep_for(1s);
  BOOST_TEST(w.metric("outbox_scans_total") == scans, "40 statements on another table woke the source");
  for (int i = 0; i < 3; ++i) {
    w.requireRungAtOnce(fmt::format("row {}", i));
    // Its versions, its mark and its lease, written by the bridge itself, ring nothing (the polls
    // that follow the flow count no ring).
    std::this_thread::sleep_for(300ms);
    const double rung = w.wakeups("binlog");
    std::this_thread::sleep_for(2s);
    BOOST_TEST(w.wakeups("binlog") == rung, "the bridge's own writes rang its source after row " << i);
  }
  requireDenseOnce(w.source, w.inserted);
}

BOOST_AUTO_TEST_CASE(with_the_doorbell_rows_are_published_within_50ms_at_a_10s_poll_interval) {
  WatchedSource w("wake_doorbell");
  w.start();
  w.requireDoorbell(true);
  std::this_thread::sleep_for(1s);  // past the session's first polls
  w.requireNoScansFor(2s);
  // The bound is 50 ms; two shared cores may miss it once.
  int fast = 0;
  for (int i = 0; i < 5; ++i) {
    fast += w.requireRungAtOnce(fmt::format("row {}", i)) ? 1 : 0;
    std::this_thread::sleep_for(100ms);
  }
  BOOST_TEST(fast >= 4);
  // ROW on the tuned server, MIXED on the one at its defaults (fault_wake_defaults).
  BOOST_TEST(w.bridge.log().find("watching the binary log (binlog_format " + globalBinlogFormat() + ")") !=
                 std::string::npos,
             w.bridge.log());
  requireDenseOnce(w.source, w.inserted);
}

BOOST_AUTO_TEST_CASE(polling_only_a_quiet_source_waits_for_the_idle_check) {
  WatchedSource w("wake_poll", {{"wake", "\"poll\""}, {"poll_interval", "\"1s\""}});
  w.start();
  // Quiet long enough that the flow's polls have slowed to poll_interval (half the quiet): then
  // the relay leaves the idle check to find new rows, and scans nothing of its own.
  BOOST_REQUIRE(waitUntil([&] { return w.metric("outbox_relay_running") == 1; }, 20s));
  std::this_thread::sleep_for(4s);
  w.requireNoScansFor(3s);
  const double byPoll = w.wakeups("poll");
  const auto start = std::chrono::steady_clock::now();
  w.insertOne();
  BOOST_REQUIRE_MESSAGE(w.published(5s), w.bridge.log());
  const auto took = std::chrono::steady_clock::now() - start;
  BOOST_TEST(w.metric("outbox_doorbell_up") == 0);
  BOOST_TEST(w.wakeups("binlog") == 0);
  BOOST_TEST(w.wakeups("poll") >= byPoll + 1);  // the idle check saw the new id and rang (no own poll is due)
  BOOST_TEST(took <= 4s);  // the idle check, each second, plus the mark (500 ms); its own poll is 10 s away
  BOOST_TEST(w.bridge.log().find("binlog doorbell") == std::string::npos, w.bridge.log());
  requireDenseOnce(w.source, w.inserted);
}

BOOST_AUTO_TEST_CASE(a_late_commit_rings_its_source) {
  WatchedSource w("wake_late");
  w.start();
  w.requireDoorbell(true);
  auto held = w.database.connect();
  BOOST_REQUIRE(held->begin().isOk());
  BOOST_REQUIRE(held->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('item', 'late', "
                                       "'upsert', '{{\"n\":-1}}')",
                                       w.table))
                    .isOk());
  w.insertOne();  // above the held row: the held id is a hole now
  BOOST_REQUIRE_MESSAGE(w.published(5s), w.bridge.log());
  BOOST_REQUIRE(waitUntil([&] { return w.metric("outbox_open_holes") == 1; }, 5s));
  std::this_thread::sleep_for(1s);
  const double rung = w.wakeups("binlog");
  BOOST_REQUIRE(held->commit().isOk());
  ++w.inserted;
  BOOST_REQUIRE_MESSAGE(w.published(5s), w.bridge.log());
  BOOST_TEST(w.wakeups("binlog") >= rung + 1);  // nothing else committed meanwhile
  requireDenseOnce(w.source, w.inserted);
}

BOOST_AUTO_TEST_CASE(the_doorbell_comes_back_after_a_kill_rotated_and_purged_logs_and_a_restart) {
  WatchedSource w("wake_faults");
  w.start();
  w.requireDoorbell(true);
  w.requireRungAtOnce("at start");

  // Its connection killed: rows committed meanwhile are published; the doorbell comes back.
  const uint64_t dump = w.dumpThread();
  BOOST_REQUIRE(dump != 0);
  BOOST_REQUIRE(w.database.sql().exec(fmt::format("KILL {}", dump)).isOk());
  for (int i = 0; i < 3; ++i) w.insertOne();
  BOOST_REQUIRE_MESSAGE(w.published(15s), w.bridge.log());
  BOOST_REQUIRE(waitUntil([&] { return w.dumpThread() != 0 && w.dumpThread() != dump; }, 15s));
  w.requireRungAtOnce("after KILL");

  // The log rotated and the old files purged under the dump.
  BOOST_REQUIRE(w.database.sql().exec("FLUSH BINARY LOGS").isOk());
  auto current = w.database.sql().query("SHOW MASTER STATUS");
  BOOST_REQUIRE(current.isOk() && current->next());
  BOOST_REQUIRE(w.database.sql().exec(fmt::format("PURGE BINARY LOGS TO '{}'", current->text(0))).isOk());
  w.requireRungAtOnce("after FLUSH and PURGE BINARY LOGS");

  // MariaDB restarted: rows committed while it comes back are published, and so on.
  stackCommand("restart", stack().mysqlService);
  auto producer = w.database.connect();
  w.producer = std::move(producer);
  for (int i = 0; i < 3; ++i) w.insertOne();
  BOOST_REQUIRE_MESSAGE(w.published(60s), w.bridge.log());
  BOOST_REQUIRE(waitUntil([&] { return w.dumpThread() != 0; }, 30s));
  w.requireDoorbell(true);
  w.requireRungAtOnce("after a restart of MariaDB");
  requireDenseOnce(w.source, w.inserted);
}

BOOST_AUTO_TEST_CASE(without_the_grant_one_warning_names_it_and_the_source_polls_until_it_is_given) {
  TestDatabase database("wake_grant");
  const std::string user = "wk_" + database.name().substr(database.name().size() - 8);
  const std::string password = "wk-secret-" + database.name().substr(database.name().size() - 8);
  registerSecret(password);
  auto& sql = database.sql();
  BOOST_REQUIRE(sql.exec(fmt::format("CREATE USER '{}'@'%' IDENTIFIED BY '{}'", user, password)).isOk());
  struct DropUser {
    db::Connection& sql;
    std::string user;
    ~DropUser() { (void)sql.exec(fmt::format("DROP USER IF EXISTS '{}'@'%'", user)); }
  } dropUser{sql, user};
  BOOST_REQUIRE(sql.exec(fmt::format("GRANT ALL ON `{}`.* TO '{}'@'%'", database.name(), user)).isOk());
  BOOST_REQUIRE(sql.exec(fmt::format("GRANT PROCESS ON *.* TO '{}'@'%'", user)).isOk());

  SourceSpec source{uniqueName("wg", database), &database,
                    {{"dsn", fmt::format("\"mysql://{}@{}:{}/{}\"", user, stack().mysqlHost, stack().mysqlPort,
                                         database.name())},
                     {"password", fmt::format("\"{}\"", password)},
                     {"poll_interval", "\"1s\""}}};
  const std::string config = writeConfig({source});
  migrate(config);
  BridgeProcess bridge(config);
  bridge.start();
  const int port = bridge.httpPort();
  auto producer = database.connect();
  auto insert = [&](int n) {
    BOOST_REQUIRE(producer->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('item', "
                                             "'k', 'upsert', '{{\"n\":{}}}')",
                                             source.outboxTable(), n))
                      .isOk());
  };
  const std::string grant = fmt::format("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{}'@'%'", user);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return bridge.log().find(grant) != std::string::npos; }, 20s), bridge.log());
  for (int n = 0; n < 3; ++n) insert(n);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 3; }, 20s),
                        bridge.log());
  BOOST_TEST(sourceMetric(port, "outbox_doorbell_up", source.name) == 0);
  // Retried every 10 s, the warning is not repeated.
  std::this_thread::sleep_for(11s);
  const std::string log = bridge.log();
  BOOST_TEST(log.find(grant) == log.rfind(grant), log);

  BOOST_REQUIRE(sql.exec(grant).isOk());
  BOOST_REQUIRE_MESSAGE(
      waitUntil([&] { return sourceMetric(port, "outbox_doorbell_up", source.name) == 1; }, 30s), bridge.log());
  insert(3);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 4; }, 20s),
                        bridge.log());
  requireDenseOnce(source, 4);
}

#define BOOST_TEST_MODULE fault_wake
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "harness.h"

// Waking up (ARCHITECTURE.md 3b, issue 20): the binlog doorbell wakes a source's relay when a
// transaction that wrote its outbox table commits, so a row is published within milliseconds
// however long poll_interval is; without it the source waits for the poll. The doorbell's
// connection killed, the binary logs rotated and purged, MariaDB restarted, its grant revoked and
// given back: nothing lost, polling meanwhile, the doorbell back afterwards. Real MariaDB (the
// stack's writes a binary log) and nats-server.

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

// A source with poll_interval 10 s (so only a ring explains a row published at once), its bridge
// started, and a producer's connection.
struct WatchedSource {
  TestDatabase database;
  SourceSpec source;
  std::string config;
  std::string table;
  BridgeProcess bridge;
  std::unique_ptr<db::Connection> producer;
  int port = 0;
  uint64_t inserted = 0;

  explicit WatchedSource(const std::string& purpose, std::map<std::string, std::string> extra = {})
      : database(purpose),
        source{uniqueName("wk", database), &database, withPollInterval(std::move(extra))},
        config(writeConfig({source})),
        table(source.outboxTable()),
        bridge(config),
        producer(database.connect()) {
    migrate(config);
  }
  static std::map<std::string, std::string> withPollInterval(std::map<std::string, std::string> extra) {
    extra.try_emplace("poll_interval", "\"10s\"");
    return extra;
  }
  void start() {
    bridge.start();
    port = bridge.httpPort();
  }
  std::string page() { return httpRequest(port, "GET", "/metrics").body; }
  double metric(const std::string& name) { return sourceMetric(port, name, source.name); }
  double wakeups(const std::string& by) {
    return metricSample(page(), fmt::format("outbox_wakeups_total{{source=\"{}\",by=\"{}\"}}", source.name, by));
  }
  // Rows published within 50 ms of their INSERT (created_at) so far.
  double within50ms() {
    return metricSample(page(), fmt::format("outbox_commit_to_ack_seconds_bucket{{source=\"{}\",le=\"0.05\"}}",
                                            source.name));
  }
  void insertOne() {
    BOOST_REQUIRE(producer->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('item', "
                                             "'k{}', 'upsert', '{{\"n\":{}}}')",
                                             table, inserted, inserted))
                      .isOk());
    ++inserted;
  }
  bool published(std::chrono::milliseconds within) {
    return waitUntil([&] { return database.state(source.name).publishedThrough == inserted; }, within);
  }
  void requireDoorbell(bool up, std::chrono::milliseconds within = 30s) {
    // The gauge follows the relay's polls, and the doorbell rings every source when it comes or goes.
    BOOST_REQUIRE_MESSAGE(waitUntil([&] { return metric("outbox_doorbell_up") == (up ? 1 : 0); }, within),
                          bridge.log());
  }
  // A row committed now is in the stream within 50 ms: the doorbell rang (poll_interval is 10 s).
  void requireRungAtOnce(const std::string& when) {
    BOOST_TEST_CONTEXT(when) {
      // A ring as the doorbell connects can still be followed by its poll's retries: let them pass.
      std::this_thread::sleep_for(200ms);
      const double fast = within50ms();
      const double rung = wakeups("binlog");
      insertOne();
      BOOST_REQUIRE_MESSAGE(published(2s), bridge.log());
      BOOST_TEST(within50ms() == fast + 1);
      BOOST_TEST(wakeups("binlog") >= rung + 1);
    }
  }
  // The Id of the doorbell's dump on the server (0: none).
  uint64_t dumpThread() {
    return database.scalar(
        "SELECT COALESCE(MAX(ID), 0) FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'");
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(with_the_doorbell_rows_are_published_within_50ms_at_a_10s_poll_interval) {
  WatchedSource w("wake_doorbell");
  w.start();
  w.requireDoorbell(true);
  std::this_thread::sleep_for(3s);  // past the session's first polls, which follow the flow
  for (int i = 0; i < 5; ++i) {
    w.requireRungAtOnce(fmt::format("row {}", i));
    std::this_thread::sleep_for(100ms);
  }
  BOOST_TEST(w.bridge.log().find("watching the binary log (binlog_format ROW)") != std::string::npos, w.bridge.log());
  requireDenseOnce(w.source, w.inserted);
}

BOOST_AUTO_TEST_CASE(polling_only_a_quiet_source_waits_for_the_idle_check) {
  WatchedSource w("wake_poll", {{"wake", "\"poll\""}, {"poll_interval", "\"1s\""}});
  w.start();
  // Quiet long enough that the flow's polls have slowed to poll_interval (an eighth of the quiet).
  BOOST_REQUIRE(waitUntil([&] { return w.metric("outbox_relay_running") == 1; }, 20s));
  std::this_thread::sleep_for(9s);
  const double byPoll = w.wakeups("poll");
  const auto start = std::chrono::steady_clock::now();
  w.insertOne();
  BOOST_REQUIRE_MESSAGE(w.published(5s), w.bridge.log());
  const auto took = std::chrono::steady_clock::now() - start;
  BOOST_TEST(w.metric("outbox_doorbell_up") == 0);
  BOOST_TEST(w.wakeups("binlog") == 0);
  BOOST_TEST(w.wakeups("poll") >= byPoll + 1);  // the idle check saw the new id and rang
  BOOST_TEST(took <= 2s);
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
  stackCommand("restart", "mariadb");
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

BOOST_AUTO_TEST_CASE(fifty_sources_on_one_database_publish_every_row_once_in_order) {
  TestDatabase database("wake_fifty");
  std::vector<SourceSpec> sources;
  for (int i = 0; i < 50; ++i) sources.push_back({fmt::format("w{}_{}", i, uniqueName("f", database)), &database, {}});
  const std::string config = writeConfig(sources);
  migrate(config);
  BridgeProcess bridge(config);
  bridge.start();
  auto producer = database.connect();
  // Rounds of one-row and several-row transactions over every source, some rolled back.
  for (int round = 0; round < 4; ++round) {
    for (const auto& s : sources) {
      BOOST_REQUIRE(producer->begin().isOk());
      BOOST_REQUIRE(producer->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES "
                                               "('item', 'a', 'upsert', '{{\"n\":{}}}'), ('item', 'b', 'upsert', "
                                               "'{{\"n\":{}}}')",
                                               s.outboxTable(), 2 * round, 2 * round + 1))
                        .isOk());
      BOOST_REQUIRE(producer->commit().isOk());
      BOOST_REQUIRE(producer->begin().isOk());
      BOOST_REQUIRE(producer->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES "
                                               "('item', 'gone', 'upsert', '{{}}')",
                                               s.outboxTable()))
                        .isOk());
      producer->rollback();
    }
  }
  for (const auto& s : sources) {
    BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(s.name).publishedThrough == 8; }, 60s),
                          s.name + "\n" + bridge.log());
    requireDenseOnce(s, 8);
  }
  // Every source's stream holds its rows in the order of their ids (entity 'a' and 'b' alternate).
  StreamReader reader;
  for (const auto& s : sources) {
    auto messages = reader.readAll(s.stream(), "control." + s.name);
    BOOST_REQUIRE_EQUAL(messages.size(), 8u);
    for (size_t i = 0; i < messages.size(); ++i) {
      BOOST_TEST(messages[i].data.find(fmt::format("\"n\":{}", i)) != std::string::npos, s.name << " " << i);
    }
  }
}

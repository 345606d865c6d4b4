#define BOOST_TEST_MODULE fault_wake
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "db/binlog.h"
#include "bridged_source.h"
#include "harness.h"

// Waking up (docs/design.md, "Waking up", issue 20): the binlog doorbell wakes a source's relay when a
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
// (started by start()), and a producer's connection.
struct WatchedSource : BridgedSource {
  uint64_t inserted = 0;

  explicit WatchedSource(const std::string& purpose, std::map<std::string, std::string> extra = {})
      : BridgedSource(purpose, "wk", withPollInterval(std::move(extra))) {}
  static std::map<std::string, std::string> withPollInterval(std::map<std::string, std::string> extra) {
    extra.try_emplace("poll_interval", "\"10s\"");
    return extra;
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
  // A row committed now is in the stream at once, woken by the doorbell (poll_interval and the
  // idle check are 10 s): within a second, after a binlog ring. Returns whether it took at most
  // 50 ms (commit to ack).
  bool requireRungAtOnce(const std::string& when) {
    bool fast = false;
    BOOST_TEST_CONTEXT(when) {
      // A ring as the doorbell connects can still be followed by its poll's retries: let them pass.
      std::this_thread::sleep_for(200ms);
      const double before = within50ms();
      const double rung = wakeups("binlog");
      insertOne();
      BOOST_REQUIRE_MESSAGE(published(1s), bridge.log());
      BOOST_TEST(wakeups("binlog") >= rung + 1);
      fast = within50ms() == before + 1;
    }
    return fast;
  }
  // No scan of its own while quiet: the relay waits for a ring (or its minute-long quiet poll).
  void requireNoScansFor(std::chrono::milliseconds quiet) {
    const double scans = metric("outbox_scans_total");
    std::this_thread::sleep_for(quiet);
    BOOST_TEST(metric("outbox_scans_total") == scans);
  }
  // The Id of the doorbell's dump on the server (0: none).
  uint64_t dumpThread() {
    return database.scalar(
        "SELECT COALESCE(MAX(ID), 0) FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'");
  }
};

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
  // At rest, the 50 sources scan nothing: the doorbell and the one idle check watch them.
  const int port = bridge.httpPort();
  auto scans = [&] {
    double sum = 0;
    const std::string page = httpRequest(port, "GET", "/metrics").body;
    for (const auto& s : sources) sum += metricSample(page, fmt::format("outbox_scans_total{{source=\"{}\"}}", s.name));
    return sum;
  };
  std::this_thread::sleep_for(2s);
  const double before = scans();
  std::this_thread::sleep_for(3s);
  BOOST_TEST(scans() == before);
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

// A producer whose writes the binary log does not carry (sql_log_bin = 0 here; a binlog_ignore_db
// filter alike): no ring ever comes for them, and the idle check, which leaves the sources the
// doorbell watches to it, still looks at them every Wakeup::kWatchedCheck (5 s).
BOOST_AUTO_TEST_CASE(rows_the_binary_log_does_not_carry_are_found_by_the_idle_check_within_seconds) {
  WatchedSource w("wake_nolog", {{"poll_interval", "\"1s\""}});
  w.start();
  w.requireDoorbell(true);
  std::this_thread::sleep_for(1s);
  const double rung = w.wakeups("binlog"), polled = w.wakeups("poll");
  BOOST_REQUIRE(w.producer->exec("SET SESSION sql_log_bin = 0").isOk());
  const auto start = std::chrono::steady_clock::now();
  w.insertOne();
  BOOST_REQUIRE_MESSAGE(w.published(15s), w.bridge.log());
  BOOST_TEST((std::chrono::steady_clock::now() - start <= 8s));
  BOOST_TEST(w.wakeups("binlog") == rung);
  BOOST_TEST(w.wakeups("poll") >= polled + 1);
  BOOST_REQUIRE(w.producer->exec("SET SESSION sql_log_bin = 1").isOk());
  requireDenseOnce(w.source, w.inserted);
}

// Review of issue 20: an `epoch bump` writes no outbox row; it writes outbox_epoch_history, which
// the doorbell rings every source of the database for, and wakes the quiet leader (poll_interval
// 10 s: the idle check is no faster), which finishes it within the command's wait.
BOOST_AUTO_TEST_CASE(an_epoch_bump_on_a_quiet_watched_source_is_finished_at_once) {
  WatchedSource w("wake_bump");
  w.start();
  w.requireDoorbell(true);
  for (int i = 0; i < 3; ++i) w.insertOne();
  BOOST_REQUIRE_MESSAGE(w.published(5s), w.bridge.log());
  std::this_thread::sleep_for(2s);
  w.requireNoScansFor(1s);  // quiet: asleep until something rings
  const double rung = w.wakeups("binlog");
  const auto start = std::chrono::steady_clock::now();
  auto bump = runBridge({"epoch", "bump", "--config", w.config, "--source", w.source.name, "--reason", "quiet"});
  BOOST_REQUIRE_MESSAGE(bump.exitCode == 0, bump.err);
  BOOST_TEST(bump.out.find("epoch 2, versions continue after 3") != std::string::npos, bump.out << w.bridge.log());
  BOOST_TEST((std::chrono::steady_clock::now() - start < 5s));
  BOOST_TEST(w.wakeups("binlog") >= rung + 1);
  w.insertOne();
  BOOST_REQUIRE_MESSAGE(w.published(5s), w.bridge.log());
}

// What the doorbell reads (db::BinlogReader) on the stack's MariaDB: the tables a committed
// transaction wrote, by database; nothing for rows deleted, a rollback or an XA PREPARE;
// the table a statement logged as text inserts into; the database of DDL; "unknown" where the log
// does not say (XA COMMIT).
BOOST_AUTO_TEST_CASE(the_binlog_reader_tells_commits_by_table_and_says_when_it_cannot) {
  TestDatabase one("wake_rd1");
  TestDatabase two("wake_rd2");
  for (auto* d : {&one, &two}) {
    BOOST_REQUIRE(d->sql().exec("CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)").isOk());
  }
  auto reader = db::BinlogReader::open(stackParams(), 1'500'000'000u + static_cast<uint32_t>(getpid()), 500ms);
  BOOST_REQUIRE_MESSAGE(reader.isOk(), reader.status().message());
  BOOST_TEST((*reader)->format() == globalBinlogFormat());
  auto next = [&] { return nextCommit(**reader); };  // heartbeats skipped, within 10 s
  auto& a = one.sql();
  BOOST_REQUIRE(a.exec("INSERT INTO t (v) VALUES (1)").isOk());
  auto c = next();
  BOOST_TEST(!c.unknown);
  BOOST_TEST((c.tables == std::vector<std::string>{one.name() + ".t"}));

  // Rows deleted (prune): nothing to look for; the next commit reported is the insert after it.
  BOOST_REQUIRE(a.exec("DELETE FROM t WHERE v = 1").isOk());
  BOOST_REQUIRE(a.exec("INSERT INTO t (v) VALUES (6)").isOk());
  c = next();
  BOOST_TEST(!c.unknown);
  BOOST_TEST((c.tables == std::vector<std::string>{one.name() + ".t"}));
  BOOST_TEST(one.scalar("SELECT COUNT(*) FROM t WHERE v = 1") == 0u);

  BOOST_REQUIRE(a.begin().isOk());  // rolled back: nothing; the next commit is the other database's
  BOOST_REQUIRE(a.exec("INSERT INTO t (v) VALUES (2)").isOk());
  a.rollback();
  BOOST_REQUIRE(two.sql().exec("INSERT INTO t (v) VALUES (3)").isOk());
  c = next();
  BOOST_TEST((c.tables == std::vector<std::string>{two.name() + ".t"}));

  // XA: the PREPARE says nothing (not committed); the COMMIT, logged alone, names no table.
  BOOST_REQUIRE(a.exec("XA START 'wk'").isOk());
  BOOST_REQUIRE(a.exec("INSERT INTO t (v) VALUES (4)").isOk());
  BOOST_REQUIRE(a.exec("XA END 'wk'").isOk());
  BOOST_REQUIRE(a.exec("XA PREPARE 'wk'").isOk());
  BOOST_REQUIRE(a.exec("XA COMMIT 'wk'").isOk());
  c = next();
  BOOST_TEST(c.unknown);

  // A statement logged as a statement (STATEMENT, or MIXED, MariaDB's default): the table it
  // inserts into is read from it; an UPDATE adds no rows and says nothing (issue 33).
  BOOST_REQUIRE(a.exec("SET SESSION binlog_format = 'STATEMENT'").isOk());
  BOOST_REQUIRE(a.exec("INSERT INTO t (v) VALUES (5)").isOk());
  c = next();
  BOOST_TEST(!c.unknown);
  BOOST_TEST((c.tables == std::vector<std::string>{one.name() + ".t"}));
  BOOST_REQUIRE(a.exec("UPDATE t SET v = 7 WHERE v = 5").isOk());
  BOOST_REQUIRE(a.exec("INSERT INTO " + two.name() + ".t (v) VALUES (8)").isOk());
  c = next();
  BOOST_TEST((c.tables == std::vector<std::string>{two.name() + ".t"}));
  BOOST_REQUIRE(a.exec("SET SESSION binlog_format = DEFAULT").isOk());  // the server's own again

  // DDL: a look for its database's sources, not rows to wait for; then a row commit again, by table.
  BOOST_REQUIRE(a.exec("CREATE TABLE u (id INT PRIMARY KEY)").isOk());
  c = next();
  BOOST_TEST(!c.unknown);
  BOOST_TEST(c.tables.empty());
  BOOST_TEST((c.databases == std::vector<std::string>{one.name()}));
  BOOST_REQUIRE(a.exec("INSERT INTO u VALUES (1)").isOk());
  c = next();
  BOOST_TEST((c.tables == std::vector<std::string>{one.name() + ".u"}));
}

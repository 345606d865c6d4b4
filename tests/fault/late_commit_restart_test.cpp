// Late commits across a restart (docs/design.md, "Contract v2: finding late commits"): a late row
// through a SIGKILL, a v1 source migrated to v2 under a running producer, and a row held PREPARED
// for days against what a restart costs. Part of fault_late_commit (late_commit_test.cpp).
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <thread>

#include <fmt/format.h>

#include "db/migrate.h"
#include "bridged_source.h"
#include "harness.h"
#include "config/config.h"
#include "relay/scanner.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

// The bridge SIGKILLed while holes are open and a late transaction is still open; restarted (it
// rebuilds its holes from scan_floor..scan_cursor); the late row is still published, once.
BOOST_AUTO_TEST_CASE(a_late_row_survives_a_sigkill_with_holes_open) {
  TestDatabase database("lkill");
  SourceSpec source{uniqueName("lk", database), &database, {{"batch_size", "100"}}};
  // The killed bridge keeps its lease until the TTL: keep that short here.
  std::string config = writeConfig({source}, "[lease]\nttl = \"2s\"\nheartbeat = \"500ms\"\n");
  migrate(config);
  const std::string table = source.outboxTable();
  // The first scan starts with the late row's id below every visible row.
  auto holder = database.connect();
  BOOST_REQUIRE(holder->begin().isOk());
  BOOST_REQUIRE(holder->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES "
                                         "('item', 'late', 'upsert', '{{\"n\":-1}}')", table)).isOk());
  auto producer = database.connect();
  insertRows(*producer, table, 100, 0);
  BridgeProcess bridge(config);
  bridge.start();
  for (int n = 100; n < 2000; n += 100) insertRows(*producer, table, 100, n);
  std::this_thread::sleep_for(150ms);
  bridge.kill();
  insertRows(*producer, table, 500, 2000);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 2500; }, 30s),
                        bridge.log());
  std::this_thread::sleep_for(300ms);
  BOOST_TEST(versionOf(database, table, -1) == 0u);
  // The late row's id is still an open hole: the scan floor is below it.
  BOOST_TEST(database.state(source.name).scanFloor.value_or(99) == 0u);
  BOOST_REQUIRE(holder->commit().isOk());
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 2501; }, 10s),
                        bridge.log());
  BOOST_TEST(versionOf(database, table, -1) == 2501u);
  requireDenseOnce(source, 2501);
  BOOST_TEST(bridge.stop() == 0);
}

// The migration of a v1 source (versions in the outbox table) to v2 while a producer keeps
// inserting: no version is lost or changed, the assigned-but-unpublished tail and the pending
// rows are published once, after the versions the stream already has.
BOOST_AUTO_TEST_CASE(a_v1_source_migrates_to_v2_under_a_running_producer) {
  TestDatabase database("v1");
  SourceSpec source{uniqueName("v1", database), &database, {}};
  std::string config = writeConfig({source});
  const std::string table = source.outboxTable();
  auto& sql = database.sql();
  // The v1 database, built by the v1 files as `outbox-bridge migrate` of v1 applied them.
  auto apply = [&](const std::string& scope, const std::string& file, const std::string& target) {
    std::string text = readFile(stack().sourceRoot + "/sql/" + scope + "/" + file);
    BOOST_REQUIRE_MESSAGE(!text.empty(), file);
    for (size_t at = text.find("{{outbox_table}}"); at != std::string::npos; at = text.find("{{outbox_table}}"))
      text.replace(at, 16, target);
    for (const auto& statement : db::splitStatements(text)) BOOST_REQUIRE_MESSAGE(sql.exec(statement).isOk(), statement);
    BOOST_REQUIRE(sql.exec(fmt::format("INSERT INTO outbox_schema_migrations (file, target) VALUES ('{}', '{}')", file,
                                       target)).isOk());
  };
  BOOST_REQUIRE(sql.exec("CREATE TABLE outbox_schema_migrations (file VARCHAR(255) NOT NULL, target VARCHAR(64) NOT NULL "
                         "DEFAULT '', applied_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), PRIMARY KEY "
                         "(file, target))").isOk());
  for (const char* f : {"001_bridge_tables.sql", "002_pause.sql", "003_epoch_history.sql"}) apply("bridge", f, "");
  apply("outbox", "001_outbox_table.sql", table);
  // What a v1 bridge left: versions 1..300 in the stream and marked, 301..320 assigned but not
  // yet published, rows 321..400 pending.
  insertRows(sql, table, 400, 0);
  BOOST_REQUIRE(sql.exec(fmt::format("UPDATE {} SET version = id WHERE id <= 320", table)).isOk());
  BOOST_REQUIRE(sql.exec(fmt::format("INSERT INTO outbox_source_state (source, assigned_through, published_through) "
                                     "VALUES ('{}', 320, 0)", source.name)).isOk());
  // The stream as the v1 bridge left it: 1..300.
  {
    std::vector<OutboxRow> rows = readOutboxRows(sql, table, "id <= 300");
    for (auto& r : rows) r.version = r.id;
    BOOST_REQUIRE_EQUAL(publishAsBridge(source, rows, 1, 0, false).size(), 300u);
  }
  BOOST_REQUIRE(sql.exec(fmt::format("UPDATE outbox_source_state SET published_through = 300, published_stream_seq = 300 "
                                     "WHERE source = '{}'", source.name)).isOk());

  // The producer keeps inserting through the migration.
  std::atomic<bool> producing{true};
  std::atomic<int> produced{400};
  std::thread producer([&] {
    auto conn = database.connect();
    while (producing) {
      insertRows(*conn, table, 10, produced);
      produced += 10;
      std::this_thread::sleep_for(5ms);
    }
  });
  auto migrated = runBridge({"migrate", "--config", config});
  BridgeProcess bridge(config);
  bridge.start();
  std::this_thread::sleep_for(1s);
  producing = false;
  producer.join();
  BOOST_REQUIRE_MESSAGE(migrated.exitCode == 0, migrated.err);
  const uint64_t total = static_cast<uint64_t>(produced.load());
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == total; }, 30s),
                        bridge.log());
  // No version lost or changed: rows 1..320 kept theirs.
  BOOST_TEST(database.scalar(fmt::format("SELECT COUNT(*) FROM {0}_versions WHERE version = outbox_id AND outbox_id <= "
                                         "320", table)) == 320u);
  BOOST_TEST(database.unversioned(table) == 0u);
  requireDenseOnce(source, total);
  BOOST_TEST(bridge.stop() == 0);
}

// Issue 19, finding 4: a row held open for days — an XA transaction left PREPARED survives
// disconnects and restarts, and idle_transaction_timeout does not apply — rightly stays an open
// hole, and pinned scan_floor below it: every session start then read every versioned id since
// (O(rows since the floor)), past the read timeout at a few million, and the source never published
// again. Now the hole is recorded in outbox_scan_holes and the floor moves on: a restart costs the
// open holes. Timed from the bridge's start to a new row's publication, with 200,000 and then
// 2,000,000 rows committed and published after the held one: the second restart takes at most 1.5
// times the first, each under 2 s; and the held row, committed at last, is published once.
BOOST_AUTO_TEST_CASE(a_row_held_prepared_for_days_does_not_slow_a_restart) {
  BridgedSource s("xahole", "xa", {{"batch_size", "1000"}});
  const std::string xid = fmt::format("'outbox-test-{}'", s.source.name);
  // The prepared transaction outlives its connection; it is ended however the test ends (an open
  // one would also block the database's DROP).
  struct Prepared {
    TestDatabase& database;
    std::string xid;
    bool ended = false;
    ~Prepared() {
      if (!ended) (void)database.connect()->exec("XA ROLLBACK " + xid);
    }
  } prepared{s.database, xid};
  {
    auto xa = s.database.connect();
    for (const std::string& sql :
         {"XA START " + xid,
          fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('item', 'held', 'upsert', "
                      "'{{\"n\":-1}}')",
                      s.table),
          "XA END " + xid, "XA PREPARE " + xid}) {
      BOOST_REQUIRE_MESSAGE(xa->exec(sql).isOk(), sql);
    }
  }
  s.start();
  uint64_t rows = 0;  // committed and published, the held one aside
  auto fill = [&](uint64_t total) {
    while (rows < total) {
      const uint64_t n = std::min<uint64_t>(200'000, total - rows);
      BOOST_REQUIRE(s.producer->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) SELECT 'item', "
                                                 "seq, 'upsert', '{{\"n\":0}}' FROM seq_1_to_{}",
                                                 s.table, n))
                        .isOk());
      rows += n;
    }
    BOOST_REQUIRE_MESSAGE(
        waitUntil([&] { return s.database.state(s.source.name).publishedThrough == rows; }, 180s), s.bridge.log());
  };
  // From the bridge's start to a row committed then being in the stream (its mark, written a
  // quarter second later or with the next row's versions, is not what a restart costs).
  StreamReader reader;
  auto restart = [&] {
    BOOST_REQUIRE(s.bridge.stop() == 0);
    const auto t0 = std::chrono::steady_clock::now();
    s.start();
    insertRows(*s.producer, s.table, 1, 1);
    ++rows;
    BOOST_REQUIRE_MESSAGE(waitUntil([&] { return reader.state(s.source.stream()).lastSeq == rows; }, 60s),
                          s.bridge.log());
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  };
  fill(200'000);
  std::this_thread::sleep_for(Scanner::kPinAfter + 1s);  // the held hole is recorded by now
  // The fastest of three restarts each time: one alone is at the mercy of a shared machine.
  auto fastestRestart = [&] { return std::min({restart(), restart(), restart()}); };
  fill(200'010);
  const auto atTwoHundredThousand = fastestRestart();
  fill(2'000'000);
  // What a restart reads, whatever the machine's load: the versions between scan_floor and
  // scan_cursor, and the recorded ranges. Not the 2,000,000 rows: at most the last INSERTs' (the
  // floor waits below their holes until the producer is seen between statements, or kPinAfter),
  // and the held row's one id.
  const SourceState before = s.database.state(s.source.name);
  const uint64_t aboveFloor = before.scanCursor.value_or(0) - before.scanFloor.value_or(0);
  const uint64_t recorded = s.database.scalar(fmt::format(
      "SELECT COALESCE(SUM(last_id - first_id + 1), 0) FROM outbox_scan_holes WHERE source = '{}'", s.source.name));
  BOOST_TEST_MESSAGE(fmt::format("before the restarts at 2,000,000 rows: {} ids above the floor, {} recorded", aboveFloor,
                                 recorded));
  BOOST_TEST(aboveFloor <= 600'000u);
  BOOST_TEST(recorded <= 10u);
  const auto atTwoMillion = fastestRestart();
  BOOST_TEST_MESSAGE(fmt::format("restart to publishing: {} ms at 200,000 rows, {} ms at 2,000,000",
                                 atTwoHundredThousand.count(), atTwoMillion.count()));
  BOOST_TEST(atTwoHundredThousand.count() < 2000);
  BOOST_TEST(atTwoMillion.count() < 2000);
  // A restart that read the rows would take ten times as long, and reading 2,000,000 ids alone
  // takes over half a second on a MariaDB at its defaults (a COUNT(*) of them: 0.54 s). What the
  // scan reads at a start is bounded above (ids above the floor, recorded ranges); the time is
  // the rest of a start, which load blurs: other lanes share the two cores (45 -> 87 ms once),
  // and on the tuned server (TLS; a large ROW binary log) a start after 2,000,000 rows took
  // 459 ms against 150 ms once, the scan reading 0 ids above its floor (its connections and the
  // stream's reconcile, not the rows: issue 33's note). Within 1.5x, or 400 ms more.
  BOOST_TEST(atTwoMillion.count() <= std::max(atTwoHundredThousand.count() * 3 / 2, atTwoHundredThousand.count() + 400),
             atTwoMillion.count() << " ms at 2,000,000 rows, " << atTwoHundredThousand.count() << " ms at 200,000"
                                  << s.bridge.log());
  BOOST_TEST(s.openHoles() == 1.0);  // the held row, all along
  // Committed at last: published once, after everything else.
  BOOST_REQUIRE(s.database.connect()->exec("XA COMMIT " + xid).isOk());
  prepared.ended = true;
  s.requirePublished(rows + 1);
  BOOST_TEST(versionOf(s.database, s.table, -1) == rows + 1);
  BOOST_TEST(s.bridge.stop() == 0);
}

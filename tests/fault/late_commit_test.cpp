#define BOOST_TEST_MODULE fault_late_commit
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <thread>

#include <fmt/format.h>

#include "db/migrate.h"
#include "bridged_source.h"
#include "harness.h"
#include "config/config.h"
#include "relay/mysql_store.h"
#include "relay/scanner.h"

// Contract v2 (docs/design.md, "Contract v2: finding late commits"): rows that commit late, ids
// that never commit, and the bridge never touching a producer's row — against the real MariaDB
// and nats-server.

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;


// Issue 9: one producer transaction that inserted its outbox row and stays open used to stall the
// whole source (the assign UPDATE waited on its locks). Now the others flow at once, the open
// row is an open hole (gauged), and once it commits it is published once, with a later version.
BOOST_AUTO_TEST_CASE(a_transaction_held_open_for_a_minute_stalls_nothing_and_its_row_is_published_once) {
  BridgedSource f("hold", "hld");
  f.start();

  auto holder = f.holdOpen(-1);
  const auto opened = std::chrono::steady_clock::now();
  // And a bulk job: 20,000 rows in one INSERT ... SELECT, left open between statements. Its rows
  // are locked: a probe that took them one by one (or bisected a range of them) spent the
  // scan's time on tens of thousands of lock errors a second and stalled the source.
  auto bulk = f.database.connect();
  BOOST_REQUIRE(bulk->begin().isOk());
  BOOST_REQUIRE(bulk->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) SELECT 'item', seq, "
                                       "'upsert', '{{\"n\":-5}}' FROM seq_1_to_20000", f.table)).isOk());
  // Thousands of others commit while both are open, in small transactions, and flow at once.
  for (int n = 0; n < 3000; n += 20) insertRows(*f.producer, f.table, 20, n);
  f.requirePublished(3000);
  BOOST_TEST((std::chrono::steady_clock::now() - opened < 30s));
  BOOST_TEST(f.openHoles() >= 1);
  // It stays open a minute in all; nothing it holds is taken for dead; a row committed meanwhile
  // is published within moments.
  std::chrono::milliseconds slowest{0};
  while (std::chrono::steady_clock::now() - opened < 60s) {
    std::this_thread::sleep_for(1s);
    const uint64_t published = f.database.state(f.source.name).publishedThrough;
    const auto committed = std::chrono::steady_clock::now();
    insertRows(*f.producer, f.table, 1, 10000 + static_cast<int>(published));
    BOOST_REQUIRE_MESSAGE(
        waitUntil([&] { return f.database.state(f.source.name).publishedThrough == published + 1; }, 10s),
        f.bridge.log());
    slowest = std::max(slowest, std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                                      committed));
  }
  BOOST_TEST(slowest.count() < 1000, "a row committed while the bulk job was open waited " << slowest.count() << " ms");
  BOOST_REQUIRE(bulk->exec("ROLLBACK").isOk());
  // Everything committed so far is published (the open row is not visible to this count).
  const uint64_t before = f.database.scalar("SELECT COUNT(*) FROM " + f.table);
  BOOST_REQUIRE(waitUntil([&] { return f.database.state(f.source.name).publishedThrough == before; }, 10s));
  BOOST_TEST(sourceMetric(f.port, "outbox_oldest_open_hole_seconds", f.source.name) >= 50);
  BOOST_TEST(versionOf(f.database, f.table, -1) == 0u);
  BOOST_REQUIRE(holder->commit().isOk());
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return f.database.state(f.source.name).publishedThrough == before + 1; }, 10s),
                        f.bridge.log());
  BOOST_TEST(versionOf(f.database, f.table, -1) == before + 1);  // later than every row that committed before it
  requireDenseOnce(f.source, before + 1);
  BOOST_REQUIRE(waitUntil([&] { return f.openHoles() == 0; }, 10s));
  BOOST_TEST(f.bridge.stop() == 0);
}

// Ids that never commit — rolled back one by one and by a multi-row INSERT ... SELECT, and the
// permanent gaps of auto_increment_increment = 3 (as on Galera) — are holes that die: every
// committed row is published once, the scan floor catches up with the cursor, and nothing stays
// open.
BOOST_AUTO_TEST_CASE(rolled_back_ids_and_auto_increment_gaps_close_their_holes) {
  BridgedSource f("gaps", "gap", {{"batch_size", "200"}});
  f.start();
  auto committer = f.database.connect();
  auto rollbacker = f.database.connect();
  BOOST_REQUIRE(committer->exec("SET SESSION auto_increment_increment = 3").isOk());
  int committed = 0;
  for (int round = 0; round < 10; ++round) {
    BOOST_REQUIRE(rollbacker->begin().isOk());
    BOOST_REQUIRE(rollbacker->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) SELECT 'item', "
                                               "seq, 'upsert', '{{\"n\":-2}}' FROM seq_1_to_250", f.table)).isOk());
    insertRows(*committer, f.table, 50, committed);
    committed += 50;
    for (int i = 0; i < 20; ++i) {
      BOOST_REQUIRE(rollbacker->exec("ROLLBACK").isOk());
      BOOST_REQUIRE(rollbacker->begin().isOk());
      BOOST_REQUIRE(rollbacker->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES "
                                                 "('item', 'x', 'upsert', '{{\"n\":-3}}')", f.table)).isOk());
    }
    BOOST_REQUIRE(rollbacker->exec("ROLLBACK").isOk());
    insertRows(*committer, f.table, 50, committed);
    committed += 50;
  }
  // Runs of ids by the hundred thousand and the billion: a rolled-back INSERT ... SELECT of
  // 200,000 rows, and a row with an explicit id a billion above the rest. Each is one hole (a
  // range), read and probed as one: per id, the scan's memory and probes grew with the ids.
  BOOST_REQUIRE(rollbacker->begin().isOk());
  BOOST_REQUIRE(rollbacker->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) SELECT 'item', "
                                             "seq, 'upsert', '{{\"n\":-4}}' FROM seq_1_to_200000", f.table)).isOk());
  BOOST_REQUIRE(rollbacker->exec("ROLLBACK").isOk());
  insertRows(*committer, f.table, 50, committed);
  committed += 50;
  BOOST_REQUIRE(committer->exec(fmt::format("INSERT INTO {} (id, entity_type, entity_key, op, payload) SELECT "
                                            "MAX(id) + 1000000000, 'item', 'far', 'upsert', '{{\"n\":{}}}' FROM {}",
                                            f.table, committed, f.table)).isOk());
  ++committed;
  insertRows(*committer, f.table, 49, committed);
  committed += 49;
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return f.database.state(f.source.name).publishedThrough == 1100u; }, 30s),
                        f.bridge.log());
  // Every hole dies, and the floor reaches the cursor.
  BOOST_REQUIRE_MESSAGE(waitUntil([&] {
                          auto s = f.database.state(f.source.name);
                          return f.openHoles() == 0 && s.scanCursor &&
                                 s.scanFloor == s.scanCursor;
                        }, 20s),
                        f.bridge.log());
  auto state = f.database.state(f.source.name);
  BOOST_REQUIRE(state.scanCursor.has_value());
  BOOST_TEST(*state.scanCursor >= f.database.scalar("SELECT MAX(id) FROM " + f.table));
  BOOST_TEST(f.database.unversioned(f.table) == 0u);
  requireDenseOnce(f.source, 1100);
  BOOST_TEST(f.bridge.stop() == 0);
}

// Open transactions' rows in the middle of rolled-back ids keep only their own ids open: the
// rolled-back ids around them die while they stay open, two between the two held rows too
// (review finding: a NOWAIT locking read of a range also locks the first row past it, so the ids
// just below a held row read as held).
BOOST_AUTO_TEST_CASE(a_held_row_between_rolled_back_ids_keeps_only_its_own_id_open) {
  BridgedSource f("held1", "h1");
  f.start();
  insertRows(*f.producer, f.table, 1, 0);
  f.requirePublished(1);
  auto rollbacker = f.database.connect();
  f.burnIds(*rollbacker, 100);
  auto holder = f.holdOpen(-1);
  f.burnIds(*rollbacker, 2);
  auto second = f.holdOpen(-7);
  f.burnIds(*rollbacker, 100);
  insertRows(*f.producer, f.table, 10, 1);
  f.requirePublished(11);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return f.openHoles() == 2; }, 10s), "open holes: " << f.openHoles());
  BOOST_REQUIRE(holder->commit().isOk());
  BOOST_REQUIRE(second->commit().isOk());
  f.requirePublished(13);
  BOOST_TEST(versionOf(f.database, f.table, -1) == 12u);
  BOOST_TEST(versionOf(f.database, f.table, -7) == 13u);
  BOOST_REQUIRE(waitUntil([&] { return f.openHoles() == 0; }, 10s));
  requireDenseOnce(f.source, 13);
  BOOST_TEST(f.bridge.stop() == 0);
}

// A producer that deletes its own outbox row and then undoes the delete (ROLLBACK TO SAVEPOINT,
// as nested transactions of ORMs do) brings the row back: while its transaction is open the id
// must stay open, though a plain read shows no row there (review finding: a READ UNCOMMITTED
// probe alone let the hole die and the row was never published).
BOOST_AUTO_TEST_CASE(a_row_deleted_and_restored_by_a_savepoint_rollback_is_still_published) {
  BridgedSource f("savept", "sp");
  f.start();
  insertRows(*f.producer, f.table, 1, 0);
  f.requirePublished(1);
  auto holder = f.holdOpen(-1);
  BOOST_REQUIRE(holder->exec("SAVEPOINT s").isOk());
  BOOST_REQUIRE(holder->exec(fmt::format("DELETE FROM {} WHERE id = LAST_INSERT_ID()", f.table)).isOk());
  insertRows(*f.producer, f.table, 10, 1);
  f.requirePublished(11);
  // Twenty scans, each probing the hole while its holder sits between statements, keep it open.
  const double scans = sourceMetric(f.port, "outbox_scans_total", f.source.name);
  BOOST_REQUIRE(waitUntil([&] { return sourceMetric(f.port, "outbox_scans_total", f.source.name) >= scans + 20; }, 20s));
  BOOST_TEST(f.openHoles() == 1);
  BOOST_REQUIRE(holder->exec("ROLLBACK TO SAVEPOINT s").isOk());
  BOOST_REQUIRE(holder->commit().isOk());
  f.requirePublished(12);
  BOOST_TEST(versionOf(f.database, f.table, -1) == 12u);
  requireDenseOnce(f.source, 12);
  BOOST_TEST(f.bridge.stop() == 0);
}

// A truncated outbox table starts its ids again from 1, below the scan cursor: rows there would
// never be scanned. The bridge halts and says so, and resumes by itself once AUTO_INCREMENT is
// above the cursor again.
BOOST_AUTO_TEST_CASE(a_truncated_outbox_table_halts_the_source_instead_of_losing_rows) {
  BridgedSource f("trunc", "tr");
  insertRows(*f.producer, f.table, 100, 0);
  f.start();
  f.requirePublished(100);
  BOOST_TEST(f.bridge.stop() == 0);
  BOOST_REQUIRE(f.producer->exec("TRUNCATE TABLE " + f.table).isOk());
  f.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] {
                          return f.bridge.log().find("AUTO_INCREMENT (1) is not above the scan cursor (100)") !=
                                 std::string::npos;
                        }, 20s),
                        f.bridge.log());
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return sourceMetric(f.port, "outbox_halted", f.source.name) == 1; }, 10s),
                        httpRequest(f.port, "GET", "/metrics").body + f.bridge.log());
  BOOST_REQUIRE(f.producer->exec(fmt::format("ALTER TABLE {} AUTO_INCREMENT = 101", f.table)).isOk());
  insertRows(*f.producer, f.table, 20, 100);
  f.requirePublished(120);
  BOOST_TEST(f.database.scalar("SELECT MIN(id) FROM " + f.table) == 101u);
  BOOST_TEST(sourceMetric(f.port, "outbox_halted", f.source.name) == 0);
  requireDenseOnce(f.source, 120);
  BOOST_TEST(f.bridge.stop() == 0);
}

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

// Issue 19, finding 5: the connections that may still insert a hole's ids were every connection
// inside a statement — a report, a dump or a SELECT SLEEP(600) too, so no hole found while one ran
// could die, and each poll read them all. Now, where the server shows metadata locks, only those
// that hold one on the outbox table that a writer takes: a statement writing it (a trigger's
// instructions included, whose QUERY_ID and TIME_MS start anew while the INSERT that fired them
// holds its reserved ids) and a transaction that wrote it, until it ends. Read as the scan reads it.
// Where the server does not show them (no metadata_lock_info: MariaDB's default, the
// fault_late_commit_defaults run), every connection inside a statement stays a suspect: the scan
// cannot tell, and a late row must not be lost.
BOOST_AUTO_TEST_CASE(only_connections_that_may_write_the_outbox_table_are_suspects) {
  BridgedSource s("writers", "wr");
  s.slowTrigger();
  insertRows(*s.producer, s.table, 1, 0);
  const std::string row = fmt::format("('item', 'slow', 'upsert', '{{\"n\":1}}')");
  Running sleeper(s.database, {"DO SLEEP(3)"});
  Running reader(s.database, {fmt::format("SELECT (SELECT COUNT(*) FROM {}), SLEEP(3)", s.table)});
  Running triggered(s.database, {fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES {}, {}, {}",
                                             s.table, row, row, row)});
  Running wroteThenSleeps(s.database, {"BEGIN",
                                       fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES "
                                                   "('item', 'k', 'upsert', '{{\"n\":2}}')",
                                                   s.table),
                                       "DO SLEEP(3)", "COMMIT"});
  std::this_thread::sleep_for(1500ms);  // inside the second row's trigger by now
  const Config config = loadConfig(s.config, processEnvironment());
  MysqlOutboxStore store(config.sources.front());
  auto read = store.readNew(0, 10, /*withConnections=*/true);
  BOOST_REQUIRE_MESSAGE(read.isOk(), read.status().message());
  BOOST_REQUIRE(read->busy.has_value());
  const auto& busy = read->busy->busy;
  auto suspect = [&](uint64_t id) { return std::find(busy.begin(), busy.end(), id) != busy.end(); };
  BOOST_TEST(suspect(triggered.id));
  BOOST_TEST(suspect(wroteThenSleeps.id));
  const bool narrowed = metadataLocksVisible();
  BOOST_TEST(suspect(sleeper.id) == !narrowed);
  BOOST_TEST(suspect(reader.id) == !narrowed);
}

// The same end to end, as issues 19 and 33 tell it: auto_increment_increment = 3 makes every gap
// between committed ids a hole, and a SELECT SLEEP(600) runs throughout. Every row is published
// once, and on any server the holes' entries stay few, one statement a scan reads them, and the
// bridge's memory stays flat (issue 33: without metadata_lock_info they took an entry each and
// 1,000 to a statement). Where the server shows metadata locks, the open hole ids stay few too
// (they grew by 4,000 a second); without, they stay open until the statement ends, as they must.
// (Commit-to-ack under the same load is a figure of tools/bench, not a timed test.)
BOOST_AUTO_TEST_CASE(a_long_statement_elsewhere_keeps_one_id_holes_bounded) {
  BridgedSource s("sleeper", "sl", {{"batch_size", "500"}});
  s.start();
  const int seconds = std::getenv("OUTBOX_TEST_LONG") ? 120 : 20;
  constexpr int kRate = 2000;
  SleepingElsewhere sleeping(s.database);
  auto rssKiB = [&] {
    const std::string status = readFile(fmt::format("/proc/{}/status", s.bridge.pid()));
    const auto at = status.find("VmRSS:");
    return at == std::string::npos ? 0ul : std::stoul(status.substr(at + 6));
  };
  PacedProducers producers(s, 4, kRate, seconds);
  std::atomic<int>& committed = producers.committed;
  std::atomic<bool>& failed = producers.failed;
  double mostHoles = 0, mostEntries = 0;
  unsigned long rssEarly = 0, rssLate = 0;
  while (committed < kRate * seconds && !failed) {
    std::this_thread::sleep_for(200ms);
    mostHoles = std::max(mostHoles, s.openHoles());
    mostEntries = std::max(mostEntries, sourceMetric(s.port, "outbox_open_hole_ranges", s.source.name));
    if (!rssEarly && committed >= kRate * seconds / 4) rssEarly = rssKiB();
  }
  const double reads = sourceMetric(s.port, "outbox_hole_reads_total", s.source.name);
  const double scans = sourceMetric(s.port, "outbox_scans_total", s.source.name);
  producers.join();
  BOOST_REQUIRE(!failed);
  s.requirePublished(static_cast<uint64_t>(committed));
  rssLate = rssKiB();
  const bool locksShown = s.database.scalar("SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = "
                                           "'METADATA_LOCK_INFO' AND PLUGIN_STATUS = 'ACTIVE'") > 0;
  BOOST_TEST_MESSAGE(fmt::format("metadata locks {}: {} rows in {} s; at most {} open hole ids in at most {} entries; "
                                 "{} hole reads in {} scans; RSS {} -> {} KiB",
                                 locksShown ? "shown" : "not shown", committed.load(),
                                 std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() -
                                                                                  producers.start).count(),
                                 mostHoles, mostEntries, reads, scans, rssEarly, rssLate));
  // A few polls' worth of young holes and a span or two (an entry each before: 40,000 here).
  BOOST_TEST(mostEntries <= 1000.0);
  BOOST_TEST(reads > 0.0);
  BOOST_TEST(reads <= scans);  // one statement a scan (was one per 1,000 holes)
  if (locksShown) BOOST_TEST(mostHoles <= 10000.0);  // 598 here; without the plugin's answer, 4,000 more a second
  BOOST_TEST(rssLate <= rssEarly + 16 * 1024);
  requireDenseOnce(s.source, static_cast<uint64_t>(committed));
  BOOST_TEST(s.bridge.stop() == 0);
}

// The review's sequence for the retirement by lock age: one multi-row INSERT reserves all its ids
// at its first row, then a slow BEFORE INSERT trigger runs for each of the rest, while another
// producer commits a row above them. The holes they leave stay open while the INSERT runs — its
// writer's lock on the table is older than they are — and every row is published once.
BOOST_AUTO_TEST_CASE(ids_reserved_by_an_insert_still_in_its_triggers_stay_open_until_it_commits) {
  BridgedSource s("slowtrig", "st");
  s.slowTrigger();
  s.start();
  insertRows(*s.producer, s.table, 1, 0);
  s.requirePublished(1);
  {
    const std::string slow = "('item', 'slow', 'upsert', '{\"n\":2}')";
    Running inserting(s.database, {fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('item', "
                                               "'fast', 'upsert', '{{\"n\":1}}'), {}, {}, {}, {}",
                                               s.table, slow, slow, slow, slow)});
    std::this_thread::sleep_for(300ms);
    insertRows(*s.producer, s.table, 1, 3);  // above the reserved ids, committed at once
    s.requirePublished(2);
    BOOST_TEST(s.openHoles() >= 1.0);  // the reserved ids, while the triggers run
  }
  s.requirePublished(7);
  requireDenseOnce(s.source, 7);
  BOOST_TEST(s.bridge.stop() == 0);
}

// Issue 33 (review: "span death untested on a real server"): one-id holes beside a writer that
// stays inside its statement (eight rows, each held a second by a slow trigger) are folded into a
// span on the real server — with metadata_lock_info or without, the writer is a suspect of every
// hole found while it runs — and the span dies there once it ends: the locking probe of its rows
// without a version meets no row and no lock. Its late rows (the writer's own) are published, once.
BOOST_AUTO_TEST_CASE(a_span_of_one_id_holes_dies_on_the_server_once_its_writer_ends) {
  BridgedSource s("spandeath", "sd");
  s.slowTrigger();
  s.start();
  insertRows(*s.producer, s.table, 1, 0);
  s.requirePublished(1);
  auto ranges = [&] { return sourceMetric(s.port, "outbox_open_hole_ranges", s.source.name); };
  constexpr int kRows = 60;
  constexpr int kSlowRows = 8;  // the writer's: it runs eight seconds
  double mostHoles = 0, fewestRanges = 1e9;
  {
    const std::string slow = "('item', 'slow', 'upsert', '{\"n\":-1}')";
    std::string values = slow;
    for (int i = 1; i < kSlowRows; ++i) values += ", " + slow;
    Running writer(s.database, {fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES {}", s.table,
                                            values)});
    // Ids 3 apart, each commit leaving two never used: a hole beside every row.
    BOOST_REQUIRE(s.producer->exec("SET SESSION auto_increment_increment = 3").isOk());
    for (int n = 1; n <= kRows; ++n) {
      insertRows(*s.producer, s.table, 1, n);
      std::this_thread::sleep_for(10ms);
    }
    BOOST_REQUIRE(s.producer->exec("SET SESSION auto_increment_increment = 1").isOk());
    // While the writer still runs (eight seconds from its start): its reserved ids and the 59 holes
    // between the producer's rows open, in a span or a few.
    const bool folded = waitUntil([&] {
      const double holes = s.openHoles(), entries = ranges();
      mostHoles = std::max(mostHoles, holes);
      if (holes >= 2 * (kRows - 1)) fewestRanges = std::min(fewestRanges, entries);
      return holes >= 2 * (kRows - 1) && entries >= 1 && entries <= 3;
    }, 3s);
    BOOST_TEST_MESSAGE(fmt::format("at most {} open hole ids; {} entries at fewest with them open", mostHoles,
                                   fewestRanges));
    BOOST_REQUIRE_MESSAGE(folded, "the holes were not folded into a span:\n" << s.bridge.log());
    s.requirePublished(1 + kRows);
  }  // the writer commits
  const bool died = waitUntil([&] { return s.openHoles() == 0.0 && ranges() == 0.0; }, 30s);
  BOOST_REQUIRE_MESSAGE(died, fmt::format("{} open hole ids in {} entries", s.openHoles(), ranges()) << s.bridge.log());
  s.requirePublished(1 + kRows + kSlowRows);
  requireDenseOnce(s.source, 1 + kRows + kSlowRows);
  BOOST_TEST(s.bridge.stop() == 0);
}

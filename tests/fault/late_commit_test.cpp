#define BOOST_TEST_MODULE fault_late_commit
#include <boost/test/unit_test.hpp>

#include <thread>

#include <fmt/format.h>

#include "bridged_source.h"
#include "harness.h"

// Contract v2 (docs/design.md, "Contract v2: finding late commits"): rows that commit late, ids
// that never commit, and the bridge never touching a producer's row — against the real MariaDB
// and nats-server. Its restarts are in late_commit_restart_test.cpp, the connections the scan
// suspects in late_commit_spans_test.cpp, quiet spans in quiet_spans_test.cpp.

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
  // is published within moments: under a second (the mark of a lone row waits 500 ms), but for
  // two at most, none over 5 s, where a scan stuck on the locked rows waited seconds each time
  // (two: a machine that stalls for a second now and then).
  std::chrono::milliseconds slowest{0};
  int overASecond = 0;
  while (std::chrono::steady_clock::now() - opened < 60s) {
    std::this_thread::sleep_for(1s);
    const uint64_t published = f.database.state(f.source.name).publishedThrough;
    const auto committed = std::chrono::steady_clock::now();
    insertRows(*f.producer, f.table, 1, 10000 + static_cast<int>(published));
    BOOST_REQUIRE_MESSAGE(
        waitUntil([&] { return f.database.state(f.source.name).publishedThrough == published + 1; }, 10s),
        f.bridge.log());
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - committed);
    slowest = std::max(slowest, took);
    overASecond += took >= 1s ? 1 : 0;
  }
  BOOST_TEST(overASecond <= 2, overASecond << " rows committed while the bulk job was open waited over a second");
  BOOST_TEST(slowest.count() < 5000, "a row committed while the bulk job was open waited " << slowest.count() << " ms");
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

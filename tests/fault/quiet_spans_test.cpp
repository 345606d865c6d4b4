// Quiet spans (docs/design.md, "Quiet spans"), against the real MariaDB: what the scan reads of
// each connection's statement, and holes beside a long statement elsewhere left unread while it
// runs, with every late row still published in its entity's order. Part of fault_late_commit:
// run on the tuned server (metadata_lock_info: holes die, no span is quiet) and on the defaults
// one (fault_late_commit_defaults: every busy connection a suspect, spans quiet).
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cstdlib>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "bridged_source.h"
#include "config/config.h"
#include "harness.h"
#include "relay/mysql_store.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

struct Reading {
  ConnectionReading reading;
  std::optional<ConnectionReading::Statement> of(uint64_t connection) const {
    for (size_t i = 0; i < reading.busy.size(); ++i) {
      if (reading.busy[i] == connection && i < reading.statements.size()) return reading.statements[i];
    }
    return std::nullopt;
  }
  bool busy(uint64_t connection) const {
    return std::find(reading.busy.begin(), reading.busy.end(), connection) != reading.busy.end();
  }
};

Reading readBusy(MysqlOutboxStore& store) {
  auto read = store.readNew(0, 10, /*withConnections=*/true);
  BOOST_REQUIRE_MESSAGE(read.isOk(), read.status().message());
  BOOST_REQUIRE(read->busy.has_value());
  return Reading{*read->busy};
}

}  // namespace

// What a span's quiet rests on, as MariaDB shows it: a statement keeps its QUERY_ID while it runs
// and shows an execution state; each instruction of a stored procedure (a COMMIT between two
// among them) takes a new one; a connection whose statement ended is not busy. Where the server
// shows metadata locks, the scan does not number statements (holes die by lock instead).
BOOST_AUTO_TEST_CASE(each_statement_is_numbered_anew_and_shows_it_still_executes) {
  BridgedSource s("numbered", "nu");
  BOOST_REQUIRE(s.database.sql()
                    .exec(fmt::format("CREATE PROCEDURE {}_steps() BEGIN DO SLEEP(2); COMMIT; DO SLEEP(3); END",
                                      s.table))
                    .isOk());
  const Config config = loadConfig(s.config, processEnvironment());
  MysqlOutboxStore store(config.sources.front());
  // Each reading 1.5 s from the nearest change it must not cross: room for a machine that stalls.
  Running sleeper(s.database, {"DO SLEEP(5)"});
  Running steps(s.database, {fmt::format("CALL {}_steps()", s.table)});
  requireExecuting(s.database, {&sleeper, &steps});
  std::this_thread::sleep_for(500ms);
  const Reading first = readBusy(store);
  std::this_thread::sleep_for(3000ms);  // the procedure's second SLEEP (2-5 s), after its COMMIT
  const Reading second = readBusy(store);
  std::this_thread::sleep_for(3000ms);  // the sleeper has ended (5 s)
  const Reading third = readBusy(store);

  if (metadataLocksVisible()) {  // neither writes the table: no suspect
    BOOST_TEST(!first.busy(sleeper.id));
    BOOST_TEST(!first.reading.numbered);
    BOOST_TEST(first.reading.statements.empty());
    return;
  }
  BOOST_TEST(first.busy(sleeper.id));
  BOOST_TEST(second.busy(steps.id));
  BOOST_TEST(!third.busy(sleeper.id));
  BOOST_TEST(first.reading.numbered);
  BOOST_TEST(!first.reading.applier);
  const auto a = first.of(sleeper.id), b = second.of(sleeper.id);
  BOOST_TEST_REQUIRE((a && b));
  BOOST_TEST(a->query == b->query);  // one statement throughout
  BOOST_TEST(a->executing);           // 'User sleep'
  BOOST_TEST(b->executing);
  const auto c = first.of(steps.id), d = second.of(steps.id);
  BOOST_TEST_REQUIRE((c && d));
  BOOST_TEST(c->query != d->query);  // a new instruction, after the procedure's COMMIT
  BOOST_TEST(d->executing);
}

// Found by review: while a statement sends its result (or its OK) the server shows 'Writing to
// net' instead of its stage, after its commit too, for as long as the client does not read. Such a
// connection is not executing: a span it may hold is read each poll.
BOOST_AUTO_TEST_CASE(a_statement_sending_to_a_client_that_does_not_read_is_not_executing) {
  BridgedSource s("netwrite", "nw");
  const Config config = loadConfig(s.config, processEnvironment());
  MysqlOutboxStore store(config.sources.front());
  const db::ConnectParams admin = stackParams(s.database.name(), s.database.port());
  // `sleep` never reads: the pipe fills, the client stops reading, the server waits to write.
  const std::string marker = uniqueName("netwrite", s.database);
  BOOST_REQUIRE(std::system(fmt::format("MYSQL_PWD='{}' mariadb --quick -N -h{} -P{} -u{} -D{} -e \"SELECT '{}', "
                                        "REPEAT('x', 100000) FROM seq_1_to_5000\" 2>/dev/null | sleep 8 &",
                                        admin.password, admin.host, admin.port, admin.user, admin.database, marker)
                                .c_str()) == 0);
  // The server writes until the socket's buffers are full, and shows 'Writing to net' meanwhile
  // for moments too: a reading counts only when the connection showed that state before it and
  // still shows it after (on a busy machine, once, the reading caught it between two writes).
  auto watcher = s.database.connect();
  auto writingToNet = [&]() -> std::optional<uint64_t> {
    auto rows = watcher->query(fmt::format("SELECT ID FROM information_schema.PROCESSLIST WHERE STATE = "
                                           "'Writing to net' AND INFO LIKE '%{}%'",
                                           marker));
    if (!rows.isOk() || !rows->next()) return std::nullopt;
    return rows->u64(0);
  };
  uint64_t writer = 0;
  std::optional<Reading> stuck;
  for (int attempt = 0; attempt < 10 && !stuck; ++attempt) {
    BOOST_REQUIRE(waitUntil([&] { return writingToNet().has_value(); }, std::chrono::seconds(5)));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto before = writingToNet();
    if (!before) continue;
    Reading reading = readBusy(store);
    if (writingToNet() == before) {
      writer = *before;
      stuck = std::move(reading);
    }
  }
  BOOST_REQUIRE_MESSAGE(stuck.has_value(), "the writer never stayed in 'Writing to net' across a reading");
  const Reading& reading = *stuck;
  (void)s.database.connect()->exec(fmt::format("KILL {}", writer));
  if (metadataLocksVisible()) {  // it writes no table: no suspect
    BOOST_TEST(!reading.busy(writer));
    return;
  }
  const auto statement = reading.of(writer);
  BOOST_TEST_REQUIRE(statement.has_value());
  BOOST_TEST(!statement->executing);
}

// Issue 33's case on any server: one-id holes (auto_increment_increment = 3) at 1,000 rows/s beside
// a SELECT SLEEP(600). Where the server does not show who writes the table, the spans behind the
// young holes go quiet (gauged) and are not read while the sleep runs. Meanwhile a transaction
// holds a row between statements for 3 s (its span is not clear: read each poll), and an INSERT
// reserves two ids, writes its first row and sleeps 2 s before its second: each row is
// published before the change to its entity written after its commit, and every row once.
BOOST_AUTO_TEST_CASE(a_long_statement_elsewhere_leaves_its_spans_quiet_and_late_rows_in_order) {
  BridgedSource s("quiet", "qs", {{"batch_size", "500"}});
  s.start();
  SleepingElsewhere sleeping(s.database);
  constexpr int kSeconds = 8;
  PacedProducers producers(s, 2, 1000, kSeconds);
  std::atomic<int>& committed = producers.committed;
  std::atomic<bool>& failed = producers.failed;
  const auto start = producers.start;
  std::vector<std::thread> threads;
  // At 3 s: a row held between statements for 3 s, then the entity's next change.
  threads.emplace_back([&] {
    std::this_thread::sleep_until(start + 3s);
    auto conn = s.database.connect();
    if (!conn->begin().isOk()) failed = true;
    producers.insert(*conn, "held", "-1");
    std::this_thread::sleep_for(3s);
    if (!conn->commit().isOk()) failed = true;
    producers.insert(*conn, "held", "-2");
  });
  // At 4 s: two ids reserved at once, the second row written 2 s after the first; then the next.
  threads.emplace_back([&] {
    std::this_thread::sleep_until(start + 4s);
    auto conn = s.database.connect();
    if (!conn->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('item', 'slow', "
                                "'upsert', '{{\"n\":-3}}'), ('item', 'slow', 'upsert', CONCAT('{{\"n\":', -4 + "
                                "SLEEP(2), '}}'))",
                                s.table))
             .isOk()) {
      failed = true;
    }
    committed += 2;
    producers.insert(*conn, "slow", "-5");
  });
  double mostQuiet = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(kSeconds) && !failed) {
    std::this_thread::sleep_for(200ms);
    mostQuiet = std::max(mostQuiet, sourceMetric(s.port, "outbox_quiet_hole_ranges", s.source.name));
  }
  for (auto& t : threads) t.join();
  producers.join();
  BOOST_REQUIRE(!failed);
  s.requirePublished(static_cast<uint64_t>(committed.load()));
  BOOST_TEST(versionOf(s.database, s.table, -1) < versionOf(s.database, s.table, -2));
  BOOST_TEST(versionOf(s.database, s.table, -3) < versionOf(s.database, s.table, -4));
  BOOST_TEST(versionOf(s.database, s.table, -4) < versionOf(s.database, s.table, -5));
  BOOST_TEST(versionOf(s.database, s.table, -1) > 0u);
  BOOST_TEST(s.database.scalar(fmt::format("SELECT COUNT(*) FROM {}_versions", s.table)) == static_cast<uint64_t>(committed.load()));
  // Where the server shows who writes the table the holes die instead; here the spans go quiet.
  if (!metadataLocksVisible()) BOOST_TEST(mostQuiet >= 1);
  BOOST_TEST(s.bridge.stop() == 0);
}

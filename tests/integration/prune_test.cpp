#define BOOST_TEST_MODULE prune
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <regex>
#include <thread>

#include <fmt/format.h>

#include "harness.h"
#include "prune/prune.h"
#include "replica/replica.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

struct PruneFixture {
  TestDatabase database;
  SourceSpec spec;
  std::string config;

  explicit PruneFixture(const std::string& purpose, std::map<std::string, std::string> extra = {})
      : database(purpose), spec{uniqueName(purpose.substr(0, 3), database), &database, std::move(extra)} {
    config = writeConfig({spec});
    migrate(config);
  }
  std::string table() const { return spec.outboxTable(); }
  uint64_t rows() { return database.scalar("SELECT COUNT(*) FROM " + table()); }
  uint64_t published() { return database.state(spec.name).publishedThrough; }
  // Time passes for the rows up to `version`: they look `age` old.
  void age(uint64_t throughVersion, const std::string& interval) {
    allowOutboxUpdates(database, table());  // the test plays time passing
    Status s = database.sql().exec(fmt::format(
        "UPDATE {0} o JOIN {0}_versions v ON v.outbox_id = o.id SET o.created_at = o.created_at - INTERVAL {1} "
        "WHERE v.version <= {2}",
        table(), interval, throughVersion));
    if (!s.isOk()) throw std::runtime_error(s.message());
  }
  CommandResult prune(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"prune", "--config", config};
    args.insert(args.end(), extra.begin(), extra.end());
    return runBridge(args);
  }
};

uint64_t deletedIn(const std::string& out) {
  std::smatch m;
  if (std::regex_search(out, m, std::regex("deleted (\\d+) rows"))) return std::stoull(m[1]);
  return 0;
}

}  // namespace

// Transactions are sized by how long the last one took: a slow database gets smaller ones (so
// none runs long), a fast one larger ones up to --batch, never swinging far in one step.
BOOST_AUTO_TEST_CASE(prune_transactions_follow_how_long_the_last_took) {
  using ms = std::chrono::duration<double, std::milli>;
  BOOST_TEST(pruneStep(1000, ms(20), 5000) == 1000u);   // on target: keep the size
  BOOST_TEST(pruneStep(1000, ms(80), 5000) == 500u);    // 4x too slow: halve (at most)
  BOOST_TEST(pruneStep(1000, ms(25), 5000) == 800u);    // a little slow: a little smaller
  BOOST_TEST(pruneStep(1000, ms(5), 5000) == 1500u);    // fast: grow by half (at most)
  BOOST_TEST(pruneStep(4000, ms(1), 5000) == 5000u);    // never past --batch
  BOOST_TEST(pruneStep(120, ms(900), 5000) == 100u);    // never below 100 rows...
  BOOST_TEST(pruneStep(50, ms(900), 60) == 60u);        // ...unless --batch is smaller
  BOOST_TEST(pruneStep(1, ms(0), 1) == 1u);
}

// ADR-021 validation 4: prune everything at or below a snapshot's watermark; a replica
// bootstrapped from that snapshot and following the stream still ends equal to the database.
BOOST_AUTO_TEST_CASE(adr021_prune_below_the_watermark_then_bootstrap) {
  PruneFixture f("prunewm", {{"snapshot_query", "\"SELECT id, display_name AS displayName FROM accounts\""}});
  auto& sql = f.database.sql();
  BOOST_REQUIRE(sql.exec("CREATE TABLE accounts (id BIGINT PRIMARY KEY, display_name VARCHAR(64))").isOk());
  auto change = [&](int id, const std::string& name) {
    BOOST_REQUIRE(sql.exec("START TRANSACTION").isOk());
    BOOST_REQUIRE(sql.exec(fmt::format("REPLACE INTO accounts VALUES ({}, '{}')", id, name)).isOk());
    BOOST_REQUIRE(sql.exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) SELECT 'account', id, "
                                       "'upsert', JSON_OBJECT('id', id, 'displayName', display_name) FROM accounts "
                                       "WHERE id = {}", f.table(), id)).isOk());
    BOOST_REQUIRE(sql.exec("COMMIT").isOk());
  };
  for (int i = 1; i <= 100; ++i) change(i, fmt::format("first {}", i));
  BridgeProcess bridge(f.config);
  bridge.start();
  int port = bridge.httpPort();
  BOOST_REQUIRE(waitUntil([&] { return f.published() == 100; }, 20s));
  std::string snapshot = httpRequest(port, "GET", "/v1/sources/" + f.spec.name + "/control-snapshot").body;
  auto parsed = parseSnapshot(snapshot, true);
  BOOST_REQUIRE(parsed.isOk());
  BOOST_REQUIRE_EQUAL(parsed->watermark, 100u);
  for (int i = 50; i <= 60; ++i) change(i, fmt::format("second {}", i));  // versions 101..111
  BOOST_REQUIRE(waitUntil([&] { return f.published() == 111; }, 20s));
  f.age(parsed->watermark, "2 HOUR");
  auto result = f.prune();
  BOOST_REQUIRE_MESSAGE(result.exitCode == 0, result.err);
  BOOST_TEST(deletedIn(result.out) == 100u, result.out);
  BOOST_TEST(f.database.scalar(fmt::format("SELECT MIN(version) FROM {}_versions", f.table())) == 101u);
  // The replica bootstraps from the snapshot taken before the prune (served once), then
  // follows the stream: it never needed the pruned rows.
  ForwardingProxy proxy(port, [&](int n, const std::string&, std::string body) { return n == 0 ? snapshot : body; });
  Replica::Options o;
  o.baseUrl = fmt::format("http://127.0.0.1:{}", proxy.port());
  o.source = f.spec.name;
  o.nats.url = stack().natsUrl;
  o.verifyInterval = 100ms;
  Replica replica(o);
  BOOST_REQUIRE(replica.bootstrap().isOk());
  BOOST_TEST(replica.appliedVersion() == 100u);
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (replica.lastVerifiedVersion() != 111 && std::chrono::steady_clock::now() < deadline) (void)replica.step(50ms);
  BOOST_TEST(replica.lastVerifiedVersion() == 111u);
  BOOST_TEST(replica.counters().bootstraps == 1u);
  std::map<std::string, std::string> expected;
  auto rows = sql.query("SELECT id, display_name FROM accounts");
  BOOST_REQUIRE(rows.isOk());
  while (rows->next()) expected[std::string(rows->text(0))] = std::string(rows->text(1));
  std::map<std::string, std::string> got;
  for (const auto& [key, values] : replica.records()) got[key] = values[1].value_or("");
  BOOST_TEST((got == expected));
  BOOST_TEST(bridge.stop() == 0);
}

// Producers insert and the bridge publishes while prune runs again and again: no unpublished row
// is deleted, every version reaches the stream, and producers never wait on the pruner's locks.
BOOST_AUTO_TEST_CASE(prune_while_producers_write_deletes_only_published_rows) {
  PruneFixture f("prunebusy", {{"batch_size", "100"}});
  BridgeProcess bridge(f.config);
  bridge.start();
  std::atomic<bool> producing{true};
  std::atomic<int> inserted{0};
  std::atomic<int64_t> slowestCommitMicros{0};
  std::atomic<int> slowCommits{0};  // over 250 ms: a pruner's lock waits are tens of ms
  std::thread producer([&] {
    auto conn = f.database.connect();
    BOOST_REQUIRE(conn->exec("SET SESSION innodb_lock_wait_timeout = 5").isOk());
    for (int i = 0; producing; ++i) {
      auto begin = std::chrono::steady_clock::now();
      // Rows that look old at once, so the pruner may take them as soon as they are published.
      Status s = conn->exec(fmt::format(
          "INSERT INTO {} (entity_type, entity_key, op, payload, created_at) VALUES ('item', '{}', 'upsert', "
          "'{{\"n\":{}}}', NOW(6) - INTERVAL 2 HOUR)",
          f.table(), i, i));
      if (!s.isOk()) throw std::runtime_error(s.message());
      auto took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - begin).count();
      slowestCommitMicros = std::max<int64_t>(slowestCommitMicros, took);
      slowCommits += took >= 250'000 ? 1 : 0;
      ++inserted;
      if (i % 50 == 0) std::this_thread::sleep_for(1ms);
    }
  });
  uint64_t deleted = 0;
  for (int run = 0; run < 15; ++run) {
    std::this_thread::sleep_for(100ms);
    auto r = f.prune({"--batch", "200"});
    BOOST_REQUIRE_MESSAGE(r.exitCode == 0, r.err);
    deleted += deletedIn(r.out);
  }
  producing = false;
  producer.join();
  const uint64_t total = static_cast<uint64_t>(inserted.load());
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return f.published() == total; }, 30s), bridge.log());
  // A row deleted before it was published would be missing from the stream below; every
  // inserted row is in it once, and each deleted row was counted once.
  BOOST_TEST(deleted > 0u);
  BOOST_TEST(f.rows() == total - deleted);
  BOOST_TEST(f.database.unversioned(f.table()) == 0u);
  StreamReader reader;
  auto messages = reader.readAll(f.spec.stream(), "control." + f.spec.name);
  BOOST_REQUIRE_EQUAL(checkDenseOnce(messages, f.spec.name, total), "");
  // A machine that stalls makes a commit or two slow; a pruner holding the producer's locks, many.
  BOOST_TEST(slowCommits.load() <= 3, slowCommits.load() << " producer inserts took over 250 ms");
  BOOST_TEST(slowestCommitMicros.load() < 3'000'000, "slowest producer insert " << slowestCommitMicros.load() << " us");
  BOOST_TEST(bridge.stop() == 0);
}

BOOST_AUTO_TEST_CASE(keep_dry_run_and_overlapping_runs) {
  PruneFixture f("prunekeep");
  insertRows(f.database.sql(), f.table(), 3000);
  BridgeProcess bridge(f.config);
  bridge.start();
  BOOST_REQUIRE(waitUntil([&] { return f.published() == 3000; }, 20s));
  f.age(2000, "2 HOUR");  // versions 1..2000 are old; 2001..3000 are fresh
  // --keep under ten minutes is refused and deletes nothing.
  auto refused = f.prune({"--keep", "5m"});
  BOOST_TEST(refused.exitCode == 2);
  BOOST_TEST(refused.err.find("--keep 5m is under the 10-minute minimum") != std::string::npos, refused.err);
  BOOST_TEST(f.rows() == 3000u);
  auto bad = f.prune({"--keep", "soon"});
  BOOST_TEST(bad.exitCode == 2);
  // --dry-run deletes nothing and says how many would go.
  auto dry = f.prune({"--dry-run"});
  BOOST_TEST(dry.exitCode == 0);
  BOOST_TEST(dry.out.find("would delete 2000 rows") != std::string::npos, dry.out);
  BOOST_TEST(f.rows() == 3000u);
  // A run while another holds the source's prune lock (taken here, as a running prune would):
  // it waits briefly, reports "skipped", exits 0 and deletes nothing.
  auto holder = f.database.connect();
  const std::string lock =
      holder->quote(fmt::format("outbox-prune:{}.{}", f.database.name(), f.spec.name).substr(0, 64));
  auto locked = holder->queryU64(fmt::format("SELECT GET_LOCK({}, 0)", lock));
  BOOST_REQUIRE(locked.isOk());
  BOOST_REQUIRE(locked->value_or(0) == 1);
  auto skipped = f.prune();
  BOOST_TEST(skipped.exitCode == 0, skipped.err);
  BOOST_TEST(skipped.out.find("skipped, another prune of this source is running") != std::string::npos, skipped.out);
  BOOST_TEST(f.rows() == 3000u);
  BOOST_REQUIRE(holder->exec(fmt::format("DO RELEASE_LOCK({})", lock)).isOk());
  // Two runs at once: both exit 0, and together they delete each old row once.
  CommandResult first, second;
  std::thread a([&] { first = f.prune({"--batch", "100"}); });
  std::thread b([&] { second = f.prune({"--batch", "100"}); });
  a.join();
  b.join();
  BOOST_TEST(first.exitCode == 0, first.err);
  BOOST_TEST(second.exitCode == 0, second.err);
  BOOST_TEST(deletedIn(first.out) + deletedIn(second.out) == 2000u, first.out + second.out);
  // The lock serialises them: one did all the work, the other found nothing left or skipped.
  // (Without it both would delete part of the range at the same time.)
  BOOST_TEST((deletedIn(first.out) == 0u || deletedIn(second.out) == 0u), first.out + second.out);
  BOOST_TEST(f.rows() == 1000u);  // the rows newer than --keep stay
  BOOST_TEST(f.database.scalar(fmt::format("SELECT MIN(version) FROM {}_versions", f.table())) == 2001u);
  // One summary line per source, nothing else.
  BOOST_TEST(std::count(first.out.begin(), first.out.end(), '\n') == 1);
  BOOST_TEST(bridge.stop() == 0);
}

// After everything published was pruned, new rows still get the next versions, and a restart
// of the bridge reconciles with the stream without needing the pruned rows.
BOOST_AUTO_TEST_CASE(versions_continue_after_pruning_everything_and_a_restart) {
  PruneFixture f("pruneall");
  insertRows(f.database.sql(), f.table(), 500);
  BridgeProcess bridge(f.config);
  bridge.start();
  BOOST_REQUIRE(waitUntil([&] { return f.published() == 500; }, 20s));
  BOOST_TEST(bridge.stop() == 0);
  f.age(500, "1 DAY");
  auto r = f.prune({"--keep", "10m"});
  BOOST_REQUIRE_MESSAGE(r.exitCode == 0, r.err);
  BOOST_TEST(deletedIn(r.out) == 500u);
  BOOST_TEST(f.rows() == 0u);
  insertRows(f.database.sql(), f.table(), 100, 500);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return f.published() == 600; }, 20s), bridge.log());
  BOOST_TEST(f.database.state(f.spec.name).haltedReason.empty());
  BOOST_TEST(f.database.scalar(fmt::format("SELECT MIN(version) FROM {}_versions", f.table())) == 501u);
  StreamReader reader;
  auto messages = reader.readAll(f.spec.stream(), "control." + f.spec.name);
  BOOST_REQUIRE_EQUAL(checkDenseOnce(messages, f.spec.name, 600), "");
  BOOST_TEST(bridge.stop() == 0);
}

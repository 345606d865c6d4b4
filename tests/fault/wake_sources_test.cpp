// Sources the doorbell watches (docs/design.md, "Waking up"): fifty on one database, rows the
// binary log does not carry found by the idle check, an epoch bump on a quiet source finished at
// once. Part of fault_wake (wake_test.cpp); WatchedSource is in wake.h.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "harness.h"
#include "wake.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

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

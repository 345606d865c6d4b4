#define BOOST_TEST_MODULE fault_idle_check
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "harness.h"

// The idle check keeps its word for each source (issue 33, "Timers that keep their word";
// docs/design.md, "Waking up"): the sources of one database share one idle check, and one of
// them whose table is missing, or whose table's metadata lock the check would wait for (an ALTER
// queued behind a long transaction), neither fails nor holds up the check of the others. Real
// MariaDB and nats-server.

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

// Two sources on one database, polled only (wake = "poll": the idle check alone tells a quiet
// source that rows came), poll_interval 1 s; `a` is the one the tests watch, `b` the one in
// trouble.
struct TwoSources {
  TestDatabase database;
  SourceSpec a, b;
  std::string config;
  BridgeProcess bridge;
  std::unique_ptr<db::Connection> producer;
  int port = 0;
  uint64_t inserted = 0;

  explicit TwoSources(const std::string& purpose)
      : database(purpose),
        a{uniqueName("ia", database), &database, {{"wake", "\"poll\""}, {"poll_interval", "\"1s\""}}},
        b{uniqueName("ib", database), &database, {{"wake", "\"poll\""}, {"poll_interval", "\"1s\""}}},
        config(writeConfig({a, b})),
        bridge(config),
        producer(database.connect()) {
    migrate(config);
  }
  void start() {
    bridge.start();
    port = bridge.httpPort();
    BOOST_REQUIRE_MESSAGE(waitUntil([&] { return sourceMetric(port, "outbox_relay_running", a.name) == 1; }, 20s),
                          bridge.log());
  }
  double scansOfA() { return sourceMetric(port, "outbox_scans_total", a.name); }
  // Quiet long enough that a's polls have slowed to poll_interval: with its idle check working it
  // then scans nothing of its own (polling_only_a_quiet_source_waits_for_the_idle_check).
  void requireAQuietAndChecked() {
    std::this_thread::sleep_for(4s);
    const double scans = scansOfA();
    std::this_thread::sleep_for(3s);
    BOOST_TEST(scansOfA() == scans, "a scanned on its own: its idle check failed\n" << bridge.log());
  }
  // A row into a's table, once a is quiet again (its polls slowed to poll_interval, so the idle
  // check is what finds the row); how long until it is published.
  std::chrono::milliseconds insertIntoA() {
    std::this_thread::sleep_for(4s);
    BOOST_REQUIRE(producer->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('item', "
                                             "'k', 'upsert', '{{\"n\":{}}}')",
                                             a.outboxTable(), inserted))
                      .isOk());
    ++inserted;
    const auto start = std::chrono::steady_clock::now();
    BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(a.name).publishedThrough == inserted; }, 20s),
                          bridge.log());
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  }
};

}  // namespace

// b's outbox table dropped while the bridge runs: its part of the shared statement fails
// ("doesn't exist"). The whole check failed with it, and a quiet a polled on its own every
// poll_interval. Now b is checked alone and a's check goes on: a scans nothing of its own, and its
// rows are found by the check within a poll_interval or two.
BOOST_AUTO_TEST_CASE(one_sources_missing_table_does_not_fail_the_idle_check_of_the_others) {
  TwoSources t("idle_missing");
  t.start();
  t.requireAQuietAndChecked();
  BOOST_REQUIRE(t.database.sql().exec("DROP TABLE " + t.b.outboxTable()).isOk());
  t.requireAQuietAndChecked();  // the check has met the missing table by now, a poll_interval on
  for (int i = 0; i < 2; ++i) {
    const auto took = t.insertIntoA();
    BOOST_TEST_MESSAGE("row " << i << " took " << took.count() << " ms");
    // The check each second and the mark (500 ms), where a failed check leaves a polling on its
    // own every 5 s (at a random phase); the rest is room for a machine that stalls.
    BOOST_TEST(took.count() <= 3500, "row " << i << " took " << took.count() << " ms");
  }
  requireDenseOnce(t.a, t.inserted);
  const std::string log = t.bridge.log();
  // Said once, naming b; the check of the sources as a whole never failed.
  const std::string warning = "idle check of source " + t.b.name + ":";
  BOOST_TEST(log.find(warning) != std::string::npos, log);
  BOOST_TEST(log.find(warning) == log.rfind(warning), log);
  BOOST_TEST(log.find("the sources poll on their own meanwhile") == std::string::npos, log);
}

// An ALTER of b's table queued behind a transaction that read it: every new reader of the table
// waits behind the ALTER, the idle check's statement too — for lock_wait_timeout, a day by
// default, while a, quiet and trusting its check, waited a minute for a poll of its own. Now the
// check gives up on b's table within a second and a's rows are found at once.
BOOST_AUTO_TEST_CASE(an_alter_queued_behind_a_long_transaction_does_not_hold_up_the_others) {
  TwoSources t("idle_mdl");
  t.start();
  t.requireAQuietAndChecked();
  auto holder = t.database.connect();
  BOOST_REQUIRE(holder->begin().isOk());
  BOOST_REQUIRE(holder->query("SELECT COUNT(*) FROM " + t.b.outboxTable()).isOk());
  auto alterer = t.database.connect();
  std::thread alter([&] {
    (void)alterer->exec("SET SESSION lock_wait_timeout = 60");
    (void)alterer->exec("ALTER TABLE " + t.b.outboxTable() + " ADD COLUMN idle_test INT NULL");
  });
  struct Release {
    db::Connection& holder;
    std::thread& alter;
    ~Release() {
      holder.rollback();
      alter.join();
    }
  } release{*holder, alter};
  BOOST_REQUIRE(waitUntil([&] {
    return t.database.scalar("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'Waiting for table "
                             "metadata lock' AND INFO LIKE 'ALTER TABLE%'") == 1;
  }, 10s));
  // The first round gives up on the shared statement after a second, then checks each alone
  // (b's waits a second more); later rounds check a without b, then b alone.
  for (int i = 0; i < 2; ++i) {
    const auto took = t.insertIntoA();
    BOOST_TEST_MESSAGE("row " << i << " took " << took.count() << " ms");
    // Normally under 3 s; a check waiting for b's table would hold a for a minute (its quiet poll).
    BOOST_TEST(took.count() <= 10000, "row " << i << " took " << took.count() << " ms\n" << t.bridge.log());
  }
  const std::string log = t.bridge.log();
  const auto warned = log.find("idle check of source " + t.b.name + ": ");
  BOOST_TEST((warned != std::string::npos && log.find("Lock wait timeout exceeded", warned) != std::string::npos), log);
  requireDenseOnce(t.a, t.inserted);
}

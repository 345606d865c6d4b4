#define BOOST_TEST_MODULE fault_crash
#include <boost/test/unit_test.hpp>

#include <csignal>

#include <random>
#include <thread>

#include <fmt/format.h>

#include "harness.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

void requireDenseOnce(const SourceSpec& source, uint64_t count) {
  StreamReader reader;
  auto messages = reader.readAll(source.stream(), "control." + source.name);
  BOOST_REQUIRE_EQUAL(checkDenseOnce(messages, source.name, count), "");
}

}  // namespace

// ADR-021 validation 2: the bridge killed with SIGKILL at random points mid-publish, restarted
// each time, some restarts only after the stream's duplicate window has passed: every version is
// in the stream exactly once.
BOOST_AUTO_TEST_CASE(adr021_sigkill_at_random_points_leaves_each_version_once) {
  TestDatabase database("kill");
  SourceSpec source{uniqueName("kil", database), &database,
                    {{"batch_size", "300"}, {"duplicate_window", "\"1s\""}}};
  std::string config = writeConfig({source});
  migrate(config);
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<int> killAfterMs(5, 150);
  BridgeProcess bridge(config);
  int total = 0;
  int caughtMidDrain = 0;
  for (int round = 0; round < 12; ++round) {
    insertRows(database.sql(), source.outboxTable(), 6000, total, "item", 150);
    total += 6000;
    bridge.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(killAfterMs(rng)));
    bridge.kill();
    if (database.state(source.name).publishedThrough < static_cast<uint64_t>(total)) ++caughtMidDrain;
    // Every third restart comes after the duplicate window: dedup cannot help, the fence and
    // reconcile must.
    if (round % 3 == 2) std::this_thread::sleep_for(1200ms);
  }
  // The kills must really land mid-drain for this test to mean anything.
  BOOST_TEST(caughtMidDrain >= 6);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(
      waitUntil([&] { return database.state(source.name).publishedThrough == static_cast<uint64_t>(total); }, 60s),
      bridge.log());
  requireDenseOnce(source, static_cast<uint64_t>(total));
  auto state = database.state(source.name);
  BOOST_TEST(state.assignedThrough == static_cast<uint64_t>(total));
  BOOST_TEST(state.haltedReason.empty());
  BOOST_TEST(bridge.stop() == 0);
}

BOOST_AUTO_TEST_CASE(sigterm_mid_drain_exits_within_five_seconds_and_resumes) {
  TestDatabase database("term");
  SourceSpec source{uniqueName("trm", database), &database, {{"batch_size", "200"}}};
  std::string config = writeConfig({source});
  migrate(config);
  insertRows(database.sql(), source.outboxTable(), 30000, 0, "item", 150);
  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE(waitUntil([&] { return database.state(source.name).publishedThrough > 2000; }, 30s));
  std::chrono::milliseconds took{};
  BOOST_TEST(bridge.stop(&took) == 0);
  BOOST_TEST(took.count() < 5000);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 30000; }, 60s),
                        bridge.log());
  requireDenseOnce(source, 30000);
  BOOST_TEST(bridge.stop() == 0);
}

// Issue 8: after the first signal the watcher thread ended and signals stayed blocked, so a
// second Ctrl-C did nothing while a stop waited on a database that did not answer. A second
// SIGTERM now exits at once (143); nothing is lost.
BOOST_AUTO_TEST_CASE(a_second_sigterm_exits_at_once_and_loses_nothing) {
  TestDatabase database("term2");
  SourceSpec source{uniqueName("tr2", database), &database, {{"batch_size", "200"}}};
  // The process that exits at once keeps its lease until the TTL: keep that short here.
  std::string config = writeConfig({source}, "[lease]\nttl = \"3s\"\nheartbeat = \"1s\"\n");
  migrate(config);
  insertRows(database.sql(), source.outboxTable(), 30000, 0, "item", 150);
  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE(waitUntil([&] { return database.state(source.name).publishedThrough > 2000; }, 30s));
  {
    // MariaDB frozen: every way out of a stop (the last mark, the lease release) waits on it.
    FrozenProcess frozenDatabase(readFile(stack().stackDir + "/mariadb/mariadbd.pid"));
    std::this_thread::sleep_for(200ms);
    bridge.sendSignal(SIGTERM);
    // A signal doubled within SignalWatcher::kSameRequest is the same request (a wrapper script's
    // cleanup): the stop goes on.
    std::this_thread::sleep_for(50ms);
    bridge.sendSignal(SIGTERM);
    std::this_thread::sleep_for(650ms);
    BOOST_REQUIRE_MESSAGE(bridge.running(), "the first SIGTERM did not wait for anything, or the doubled one exited");
    bridge.sendSignal(SIGTERM);
    BOOST_TEST(waitUntil([&] { return !bridge.running(); }, 1s), "still running 1 s after the second SIGTERM");
  }
  BOOST_TEST(bridge.stop() == 128 + SIGTERM);
  BOOST_TEST(bridge.log().find("a second SIGTERM/SIGINT: exiting now") != std::string::npos, bridge.log());
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 30000; }, 60s),
                        bridge.log());
  requireDenseOnce(source, 30000);
  BOOST_TEST(bridge.stop() == 0);
}

// Issue 8: a stop waited as long as its database calls did (InnoDB's 50 s lock wait, a read
// timeout). The first SIGTERM now ends the process within 5 s whatever it waits on (exit 1, with
// the reason on stderr); nothing is lost.
BOOST_AUTO_TEST_CASE(a_first_sigterm_exits_within_five_seconds_even_when_mariadb_does_not_answer) {
  TestDatabase database("term5");
  SourceSpec source{uniqueName("tr5", database), &database, {{"batch_size", "200"}}};
  std::string config = writeConfig({source}, "[lease]\nttl = \"3s\"\nheartbeat = \"1s\"\n");
  migrate(config);
  insertRows(database.sql(), source.outboxTable(), 30000, 0, "item", 150);
  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE(waitUntil([&] { return database.state(source.name).publishedThrough > 2000; }, 30s));
  {
    FrozenProcess frozenDatabase(readFile(stack().stackDir + "/mariadb/mariadbd.pid"));
    std::this_thread::sleep_for(200ms);
    auto signalled = std::chrono::steady_clock::now();
    bridge.sendSignal(SIGTERM);
    BOOST_TEST(waitUntil([&] { return !bridge.running(); }, 7s), "still running 7 s after SIGTERM");
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - signalled);
    BOOST_TEST(took.count() < 6000, took.count() << " ms");
    BOOST_TEST(took.count() >= 4500, took.count() << " ms: it did not wait for the stop at all");
  }
  BOOST_TEST(bridge.stop() == 1);
  BOOST_TEST(bridge.log().find("the stop did not finish within 5 s") != std::string::npos, bridge.log());
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 30000; }, 60s),
                        bridge.log());
  requireDenseOnce(source, 30000);
  BOOST_TEST(bridge.stop() == 0);
}

// Two bridges on one source at once: one leads, one stands by; every version once.
BOOST_AUTO_TEST_CASE(two_bridges_at_once_publish_each_version_once) {
  TestDatabase database("two");
  SourceSpec source{uniqueName("two", database), &database, {{"batch_size", "100"}}};
  std::string config = writeConfig({source});
  migrate(config);
  BridgeProcess first(config), second(config);
  first.start();
  second.start();
  int total = 0;
  for (int i = 0; i < 20; ++i) {
    insertRows(database.sql(), source.outboxTable(), 250, total, "item", 100);
    total += 250;
    std::this_thread::sleep_for(20ms);
  }
  BOOST_REQUIRE_MESSAGE(
      waitUntil([&] { return database.state(source.name).publishedThrough == static_cast<uint64_t>(total); }, 60s),
      first.log() + second.log());
  requireDenseOnce(source, static_cast<uint64_t>(total));
  BOOST_TEST(first.stop() == 0);
  BOOST_TEST(second.stop() == 0);
}

// Section 8: a leader frozen mid-drain (SIGSTOP) loses its lease; a standby takes over; the old
// leader, resumed, must not publish out of turn. Every version stays in the stream once.
BOOST_AUTO_TEST_CASE(a_stale_leader_resumed_after_its_lease_expired_publishes_nothing) {
  TestDatabase database("stale");
  SourceSpec source{uniqueName("stl", database), &database, {{"batch_size", "200"}}};
  std::string config = writeConfig({source}, "[lease]\nttl = \"2s\"\nheartbeat = \"500ms\"\n");
  migrate(config);
  BridgeProcess first(config), second(config);
  first.start();
  insertRows(database.sql(), source.outboxTable(), 60000, 0, "item", 150);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough >= 3000; }, 30s),
                        first.log());
  first.pause();
  uint64_t frozenAt = database.state(source.name).publishedThrough;
  BOOST_REQUIRE_MESSAGE(frozenAt < 60000, "the drain finished before the pause");
  uint64_t epochBefore = database.scalar("SELECT lease_epoch FROM outbox_bridge_lease WHERE source = '" + source.name + "'");
  second.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 60000; }, 60s),
                        second.log());
  BOOST_TEST(database.scalar("SELECT lease_epoch FROM outbox_bridge_lease WHERE source = '" + source.name + "'") ==
             epochBefore + 1);
  insertRows(database.sql(), source.outboxTable(), 1000, 60000, "item", 150);
  first.resume();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 61000; }, 30s),
                        second.log());
  std::this_thread::sleep_for(1500ms);  // give the resumed process every chance to misbehave
  requireDenseOnce(source, 61000);
  // Resumed, it found out (by its clock, or because the server had closed its frozen
  // transaction) and stood by.
  BOOST_TEST(first.log().find("standby: the lease is held by") != std::string::npos, first.log());
  BOOST_TEST(first.stop() == 0);
  BOOST_TEST(second.stop() == 0);
}

// A leader that stops cleanly releases its lease: the standby takes over long before the TTL.
BOOST_AUTO_TEST_CASE(a_standby_takes_over_at_once_when_the_leader_stops) {
  TestDatabase database("handover");
  SourceSpec source{uniqueName("hnd", database), &database, {}};
  std::string config = writeConfig({source}, "[lease]\nttl = \"30s\"\nheartbeat = \"300ms\"\n");
  migrate(config);
  BridgeProcess first(config), second(config);
  first.start();
  insertRows(database.sql(), source.outboxTable(), 100);
  BOOST_REQUIRE(waitUntil([&] { return database.state(source.name).publishedThrough == 100; }, 20s));
  second.start();
  BOOST_REQUIRE(waitUntil([&] { return second.log().find("standby") != std::string::npos; }, 10s));
  BOOST_TEST(first.stop() == 0);
  auto stopped = std::chrono::steady_clock::now();
  insertRows(database.sql(), source.outboxTable(), 100, 100);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 200; }, 20s),
                        second.log());
  auto took = std::chrono::steady_clock::now() - stopped;
  BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(took).count() < 5000);
  requireDenseOnce(source, 200);
  BOOST_TEST(second.stop() == 0);
}

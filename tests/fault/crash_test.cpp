#define BOOST_TEST_MODULE fault_crash
#include <boost/test/unit_test.hpp>

#include <csignal>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "harness.h"
#include "lease_holder.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

}  // namespace

// Every message the stream stores, as a consumer following it sees them: with a short max_age the
// stream itself forgets them, so "each version once" is checked on what was delivered.
class StreamRecorder {
 public:
  explicit StreamRecorder(const SourceSpec& source) : stream_(source.stream()) {
    StreamReader reader;
    if (!waitUntil([&] { return reader.exists(source.stream()); }, 10s)) throw std::runtime_error("no stream");
    auto sub = reader_.js().subscribe(source.stream(), "control." + source.name + ".>", 1);
    if (!sub.isOk()) throw std::runtime_error(sub.status().message());
    sub_ = std::move(sub).value();
    thread_ = std::thread([this] {
      while (!done_) {
        auto m = sub_->next(100ms);
        if (!m.isOk()) {
          error_ = m.status().message();
          return;
        }
        if (!*m) continue;
        std::lock_guard lock(mu_);
        messages_.push_back(std::move(**m));
      }
    });
  }
  ~StreamRecorder() {
    done_ = true;
    thread_.join();
  }
  size_t count() {
    std::lock_guard lock(mu_);
    return messages_.size();
  }
  std::vector<nats::StoredMessage> messages() {
    std::lock_guard lock(mu_);
    if (!error_.empty()) throw std::runtime_error("recorder: " + error_);
    return messages_;
  }
  // Whether every message the stream has stored so far (expired ones too) has reached it.
  bool caughtUp() {
    auto state = reader_.js().streamState(stream_);
    if (!state.isOk()) return false;
    std::lock_guard lock(mu_);
    return !messages_.empty() && messages_.back().seq >= state->lastSeq;
  }

 private:
  std::string stream_;
  StreamReader reader_;
  std::unique_ptr<nats::Subscription> sub_;
  std::atomic<bool> done_{false};
  std::mutex mu_;
  std::vector<nats::StoredMessage> messages_;
  std::string error_;
  std::thread thread_;
};

// ADR-021 validation 2: bridges killed with SIGKILL at random points mid-publish, restarted each
// time, some restarts only after the stream's duplicate window has passed: every version reaches
// the stream exactly once. Issue 8 asks for the same under two more conditions:
// - `expire`: max_age so short that messages expire while the bridge is down (the stream's last
//   sequence then runs ahead of what it holds, the case that used to republish or halt);
// - `takeover`: two bridges, each killed in turn, so a new leader repairs what the last one left.
void killAtRandomPoints(const std::string& tag, bool expire, bool takeover) {
  TestDatabase database(tag);
  std::map<std::string, std::string> settings{{"batch_size", "300"}, {"duplicate_window", "\"1s\""}};
  if (expire) settings["max_age"] = "\"3s\"";
  SourceSpec source{uniqueName(tag, database), &database, settings};
  std::string config = writeConfig({source}, takeover ? "[lease]\nttl = \"2s\"\nheartbeat = \"500ms\"\n" : "");
  migrate(config);
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<int> killAfterMs(5, 150);
  std::vector<std::unique_ptr<BridgeProcess>> bridges;
  for (int i = 0; i < (takeover ? 2 : 1); ++i) bridges.push_back(std::make_unique<BridgeProcess>(config));
  for (auto& b : bridges) b->start();
  StreamRecorder recorder(source);
  const int rowsPerRound = 6000;
  int total = 0;
  int caughtMidDrain = 0;
  // The bridge that holds the lease now (with two, the one a kill makes the other take over from).
  auto leader = [&]() -> BridgeProcess* {
    return takeover ? leaseHolder(database, source.name, bridges) : bridges[0].get();
  };
  for (int round = 0; round < 12; ++round) {
    insertRows(database.sql(), source.outboxTable(), rowsPerRound, total, "item", 150);
    total += rowsPerRound;
    for (auto& b : bridges) {
      if (!b->running()) b->start();
    }
    BridgeProcess* victim = leader();
    std::this_thread::sleep_for(std::chrono::milliseconds(killAfterMs(rng)));
    victim->kill();
    if (database.state(source.name).publishedThrough < static_cast<uint64_t>(total)) ++caughtMidDrain;
    // Every third restart comes after the duplicate window (and, with `expire`, after max_age):
    // dedup cannot help, the fence and reconcile must.
    if (round % 3 == 2) std::this_thread::sleep_for(expire ? 3500ms : 1200ms);
  }
  // The kills must really land mid-drain for this test to mean anything.
  BOOST_TEST(caughtMidDrain >= 6);
  for (auto& b : bridges) {
    if (!b->running()) b->start();
  }
  BOOST_REQUIRE_MESSAGE(
      waitUntil([&] { return database.state(source.name).publishedThrough == static_cast<uint64_t>(total); }, 90s),
      bridges[0]->log() + (takeover ? bridges[1]->log() : ""));
  // Everything the stream stored, a duplicate among it, has reached the recorder.
  BOOST_REQUIRE(waitUntil([&] { return recorder.count() >= static_cast<size_t>(total) && recorder.caughtUp(); }, 20s));
  BOOST_REQUIRE_EQUAL(checkDenseOnce(recorder.messages(), source.name, static_cast<uint64_t>(total)), "");
  if (!expire) requireDenseOnce(source, static_cast<uint64_t>(total));
  auto state = database.state(source.name);
  BOOST_TEST(state.assignedThrough == static_cast<uint64_t>(total));
  BOOST_TEST(state.epoch == 1u);
  BOOST_TEST(state.haltedReason.empty());
  for (auto& b : bridges) BOOST_TEST(b->stop() == 0);
}

BOOST_AUTO_TEST_CASE(adr021_sigkill_at_random_points_leaves_each_version_once) {
  killAtRandomPoints("kill", /*expire=*/false, /*takeover=*/false);
}

BOOST_AUTO_TEST_CASE(sigkill_at_random_points_while_messages_expire_leaves_each_version_once) {
  killAtRandomPoints("killx", /*expire=*/true, /*takeover=*/false);
}

BOOST_AUTO_TEST_CASE(sigkill_at_random_points_with_a_second_bridge_taking_over_leaves_each_version_once) {
  killAtRandomPoints("killt", /*expire=*/false, /*takeover=*/true);
}

BOOST_AUTO_TEST_CASE(sigkill_with_takeover_while_messages_expire_leaves_each_version_once) {
  killAtRandomPoints("killtx", /*expire=*/true, /*takeover=*/true);
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

// A bridge draining 30,000 rows is stopped while MariaDB is frozen (SIGSTOP), so every way out of
// a stop (the last mark, the lease release) waits on it: `signal` sends the signals and checks
// their timing. The bridge must then have exited with `exitCode`, saying `line`, and a restart
// must publish every row once.
void stopWhileMariadbIsFrozen(const std::string& tag, const std::function<void(BridgeProcess&)>& signal, int exitCode,
                              const std::string& line) {
  TestDatabase database(tag);
  SourceSpec source{uniqueName(tag, database), &database, {{"batch_size", "200"}}};
  // The process that exits early keeps its lease until the TTL: keep that short here.
  std::string config = writeConfig({source}, "[lease]\nttl = \"3s\"\nheartbeat = \"1s\"\n");
  migrate(config);
  insertRows(database.sql(), source.outboxTable(), 30000, 0, "item", 150);
  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE(waitUntil([&] { return database.state(source.name).publishedThrough > 2000; }, 30s));
  {
    FrozenProcess frozenDatabase(readFile(mysqlPidFile()));
    std::this_thread::sleep_for(200ms);
    signal(bridge);
  }
  BOOST_TEST(bridge.stop() == exitCode);
  BOOST_TEST(bridge.log().find(line) != std::string::npos, bridge.log());
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
  stopWhileMariadbIsFrozen("term2", [](BridgeProcess& bridge) {
    const auto first = std::chrono::steady_clock::now();
    bridge.sendSignal(SIGTERM);
    // A signal doubled within SignalWatcher::kSameRequest (500 ms) is the same request (a wrapper
    // script's cleanup): the stop goes on.
    std::this_thread::sleep_for(50ms);
    bridge.sendSignal(SIGTERM);
    if (std::chrono::steady_clock::now() - first >= 450ms) {
      // This process stalled: the bridge may have counted the doubled signal as a second request
      // (exited 143) or not; a third well apart from both is a second request either way.
      BOOST_TEST_MESSAGE("the doubled SIGTERM went 450 ms or more after the first: not checked");
      std::this_thread::sleep_for(600ms);
      if (bridge.running()) bridge.sendSignal(SIGTERM);
      BOOST_TEST(waitUntil([&] { return !bridge.running(); }, 3s));
      return;
    }
    std::this_thread::sleep_for(650ms);
    BOOST_REQUIRE_MESSAGE(bridge.running(), "the first SIGTERM did not wait for anything, or the doubled one exited");
    bridge.sendSignal(SIGTERM);
    // At once: the first's bound would end it (exit 1, not 143) only 5 s after the first.
    BOOST_TEST(waitUntil([&] { return !bridge.running(); }, 3s), "still running 3 s after the second SIGTERM");
  }, 128 + SIGTERM, "a second SIGTERM/SIGINT: exiting now");
}

// Issue 8: a stop waited as long as its database calls did (InnoDB's 50 s lock wait, a read
// timeout). The first SIGTERM now ends the process within 5 s whatever it waits on (exit 1, with
// the reason on stderr); nothing is lost.
BOOST_AUTO_TEST_CASE(a_first_sigterm_exits_within_five_seconds_even_when_mariadb_does_not_answer) {
  stopWhileMariadbIsFrozen("term5", [](BridgeProcess& bridge) {
    auto signalled = std::chrono::steady_clock::now();
    bridge.sendSignal(SIGTERM);
    BOOST_TEST(waitUntil([&] { return !bridge.running(); }, 15s), "still running 15 s after SIGTERM");
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - signalled);
    // 5 s and its exit; room for a machine that stalls (MariaDB stays frozen: a stop that waited on
    // it would not end at all).
    BOOST_TEST(took.count() < 8000, took.count() << " ms");
    BOOST_TEST(took.count() >= 4500, took.count() << " ms: it did not wait for the stop at all");
  }, 1, "the stop did not finish within 5 s");
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
  // Resumed, it finds out (by its clock, or because the server had closed its frozen
  // transaction) and stands by; by then anything it published out of turn is in the stream.
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return first.log().find("standby: the lease is held by") != std::string::npos; },
                                  20s),
                        first.log());
  requireDenseOnce(source, 61000);
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

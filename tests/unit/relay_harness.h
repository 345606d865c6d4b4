#pragma once

// The relay under test on its own thread, with the fakes of relay_fake_store.h and
// relay_fake_publisher.h, a lease row the test can change, and a manual clock. Used by
// tests/unit/relay_*.cpp.

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "lease/lease.h"
#include "manual_clock.h"
#include "relay/relay.h"
#include "relay_fake_publisher.h"
#include "relay_fake_store.h"

namespace outbox::test {

using namespace std::chrono_literals;

// A lease row shared by the relay's thread and the test, with the database's rules: a free lease
// is left to a lighter candidate when the test names one.
class SharedLeaseStore final : public LeaseStore {
 public:
  explicit SharedLeaseStore(const Clock& clock) : clock_(clock) {}
  std::mutex mu;
  std::string holder;
  uint64_t epoch = 0;
  Clock::TimePoint expires{};
  std::string lighter;
  int released = 0;
  int withdrawn = 0;
  std::function<void()> onLighter;  // runs once, when a round trip first names `lighter`
  std::function<uint64_t()> marked;  // what the relay had marked, read at release
  uint64_t markedAtRelease = 0;

  Result<LeaseGrant> tryAcquire(const std::string& me, std::chrono::milliseconds ttl, bool) override {
    std::function<void()> told;
    auto grant = acquire(me, ttl, told);
    if (told) told();
    return grant;
  }
  LeaseGrant acquire(const std::string& me, std::chrono::milliseconds ttl, std::function<void()>& told) {
    std::lock_guard lock(mu);
    if (!lighter.empty()) told = std::exchange(onLighter, nullptr);
    const auto now = clock_.now();
    const bool live = !holder.empty() && expires > now;
    if ((live && holder == me) || (!live && lighter.empty())) {
      if (holder != me) ++epoch;
      holder = me;
      expires = now + ttl;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(expires - now);
    const std::string now_holder = left.count() > 0 ? holder : "";
    return LeaseGrant{now_holder == me, now_holder, epoch, left, lighter};
  }
  Status release(const std::string& me) override {
    const uint64_t m = marked ? marked() : 0;
    std::lock_guard lock(mu);
    if (holder == me) expires = clock_.now();
    ++released;
    markedAtRelease = m;
    return Status::ok();
  }
  Status withdraw(const std::string&) override {
    std::lock_guard lock(mu);
    ++withdrawn;
    return Status::ok();
  }

 private:
  const Clock& clock_;
};

// The relay on its own thread, on a manual clock that jumps over every wait (auto-advance): no
// test waits out a timeout. Tests of timing turn auto-advance off and step time themselves.
struct Harness {
  SourceConfig source;
  FakeStore store;
  FakePublisher publisher;
  StopSignal stop;
  SourceMetrics metrics;
  ManualClock clock{/*autoAdvance=*/true};
  std::unique_ptr<Relay> relay;
  // A relay that leads by a lease (leadByLease() before start()).
  std::unique_ptr<SharedLeaseStore> leases;
  std::unique_ptr<LeaderLease> lease;
  std::thread thread;

  Harness() {
    source.name = "s";
    source.subjectPrefix = "control.s";
    source.batchSize = 10;
    source.pollInterval = 5ms;
  }
  Wakeup* wakeup = nullptr;  // set before start(): the relay waits on it
  SettleFeed* settleFeed = nullptr;  // set before start(): the relay feeds it
  bool readAhead = false;    // set before start(): the scan reads the next batch while one is assigned
  Wakeup watcher;
  // Before start(): the relay waits on `watcher`, which says a doorbell and an idle check watch it.
  void watched() {
    stop.onRequest([this] { watcher.stop(); });
    watcher.doorbell = true;
    watcher.idleChecked = true;
    wakeup = &watcher;
  }
  void start(std::chrono::milliseconds ackTimeout = 300ms) {
    Relay::Options options;
    options.wakeup = wakeup;
    options.settleFeed = settleFeed;
    options.maxInFlight = 30;
    options.ackTimeout = ackTimeout;
    options.haltRecheck = 20ms;
    if (readAhead) options.readStore = &store;  // the fake is locked: one store serves all three
    publisher.clock = &clock;
    publisher.stop = &stop;
    relay = std::make_unique<Relay>(source, store, store, publisher, lease.get(), stop, metrics, clock, options);
    thread = std::thread([this] { relay->run(); });
  }
  void leadByLease() {
    leases = std::make_unique<SharedLeaseStore>(clock);
    lease = std::make_unique<LeaderLease>(*leases, "me", 30s, 10s, clock);
  }
  // The relay on a clock that moves only when the test steps it (timeUntil, clock.run).
  void startStepped(std::chrono::milliseconds ackTimeout = 300ms) {
    clock.setAutoAdvance(false);
    start(ackTimeout);
    BOOST_REQUIRE(clock.settle());
  }
  // Steps the clock by `step`, letting the relay run after each, until `condition` holds: how
  // long that took on the relay's clock, or nullopt past `limit`.
  std::optional<std::chrono::milliseconds> timeUntil(const std::function<bool()>& condition,
                                                     std::chrono::milliseconds step, std::chrono::milliseconds limit) {
    for (auto t = 0ms; t <= limit; t += step) {
      if (condition()) return t;
      clock.advance(step);
      if (!clock.settle()) return std::nullopt;
    }
    return std::nullopt;
  }
  ~Harness() {
    stop.request();
    if (thread.joinable()) thread.join();
  }
  bool waitFor(const std::function<bool()>& condition) {
    for (int i = 0; i < 500; ++i) {
      if (condition()) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  // A crash after publish, before mark: versions 1..stored assigned and in the stream (epoch 1),
  // the marks at `marked`. Call before start().
  void crashBetweenAckAndMark(uint64_t stored, uint64_t marked) {
    for (uint64_t v = 1; v <= stored; ++v) {
      store.rows[v - 1].version = v;
      publisher.stream.push_back({v, 1});
      publisher.dedup[v] = v;
    }
    store.state.assignedThrough = stored;
    store.state.publishedThrough = marked;
    store.state.publishedStreamSeq = marked;
  }
  // Messages in the stream.
  size_t inStream() { return publisher.copy().size(); }
  // Versions 1..n exactly once, in order.
  bool streamIsDense(uint64_t n, uint64_t epoch = 1) {
    auto s = publisher.copy();
    if (s.size() != n) return false;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i].version != i + 1 || s[i].epoch != epoch) return false;
    }
    return true;
  }
};

}  // namespace outbox::test

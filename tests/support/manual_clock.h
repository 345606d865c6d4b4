#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>

#include "common/clock.h"

namespace outbox::test {

// A clock whose time moves only when told (thread-safe). Two ways to wait on it:
// - auto-advance on: a wait moves time to its end at once (after a real millisecond at most),
//   so code under test runs as fast as it can and never waits out a timeout for real;
// - auto-advance off: a wait lasts until the test moves time past its end with advance(); the
//   test steps time and, after each step, lets the code run until it waits again (settle()).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(bool autoAdvance = false) : autoAdvance_(autoAdvance) {}

  TimePoint now() const override {
    std::lock_guard lock(mu_);
    return now_;
  }

  bool waitFor(StopSignal& stop, std::chrono::milliseconds d) const override {
    std::unique_lock lock(mu_);
    const TimePoint until = now_ + d;
    if (autoAdvance_) {
      lock.unlock();
      bool stopped = stop.waitFor(std::min(d, std::chrono::milliseconds(1)));
      lock.lock();
      now_ = std::max(now_, until);
      return stopped;
    }
    auto waiting = waits_.insert(until);
    changed_.notify_all();
    // A stop request does not notify this condition: look every real millisecond.
    while (now_ < until && !stop.stopped() && !autoAdvance_) changed_.wait_for(lock, std::chrono::milliseconds(1));
    waits_.erase(waiting);
    if (autoAdvance_) now_ = std::max(now_, until);
    return stop.stopped();
  }

  bool waitFor(StopSignal& stop, std::chrono::milliseconds d, Wakeup& wake,
               const Wakeup::Rings& seen) const override {
    std::unique_lock lock(mu_);
    const TimePoint until = now_ + d;
    auto rung = [&] { return wake.rings().total() != seen.total(); };
    if (autoAdvance_) {
      lock.unlock();
      bool stopped = stop.waitFor(std::min(d, std::chrono::milliseconds(1)));
      lock.lock();
      if (!rung()) now_ = std::max(now_, until);
      return stopped;
    }
    auto waiting = waits_.insert(until);
    changed_.notify_all();
    // Neither a stop request nor a ring notifies this condition: look every real millisecond.
    while (now_ < until && !stop.stopped() && !rung() && !autoAdvance_) {
      changed_.wait_for(lock, std::chrono::milliseconds(1));
    }
    waits_.erase(waiting);
    if (autoAdvance_ && !rung()) now_ = std::max(now_, until);
    return stop.stopped();
  }

  // Moves time by `d`; waits that end by then return.
  void advance(std::chrono::milliseconds d) {
    std::lock_guard lock(mu_);
    now_ += d;
    changed_.notify_all();
  }

  // Waits (in real time, up to `limit`) until a thread waits on this clock with time left: the
  // code under test has done what the time so far let it do. False on timeout.
  bool settle(std::chrono::milliseconds limit = std::chrono::seconds(5)) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, limit, [&] { return !waits_.empty() && *waits_.rbegin() > now_; });
  }

  // advance() in steps of `step`, settling after each, for `total`.
  bool run(std::chrono::milliseconds total, std::chrono::milliseconds step) {
    for (auto t = std::chrono::milliseconds(0); t < total; t += step) {
      advance(step);
      if (!settle()) return false;
    }
    return true;
  }

  void setAutoAdvance(bool on) {
    std::lock_guard lock(mu_);
    autoAdvance_ = on;
    changed_.notify_all();
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  mutable TimePoint now_{std::chrono::seconds(1000)};
  mutable std::multiset<TimePoint> waits_;  // when each wait in progress ends
  bool autoAdvance_;
};

}  // namespace outbox::test

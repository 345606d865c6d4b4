#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "common/clock.h"
#include "relay/outbox_row.h"

namespace outbox {

// What the relay hands its source's settle thread (docs/design.md, "The settled stream (issue
// 36)", "Where it runs"): the rows the main stream acknowledged, oldest first, and whether a relay
// session is on. The relay never waits here beyond a mutex held for a swap: past `bound` rows
// waiting, what waits is dropped (the settle thread reads the gap back from the main stream).
// Thread-safe: one relay thread hands, one settle thread takes.
class SettleFeed {
 public:
  struct Row {
    OutboxRow row;
    uint64_t epoch = 0;       // the epoch its message was published in (Outbox-Epoch)
    // When the relay handed it, right after taking its ack: the change's time for the settler.
    // Stamped by the feed, under its lock (hand()).
    Clock::TimePoint ackedAt;
  };
  // What the settle thread takes at once.
  struct Taken {
    // The relay session these rows belong to (0: none on); a new number is a new session.
    uint64_t session = 0;
    std::vector<Row> rows;
    uint64_t dropped = 0;  // rows dropped since the last take (the bound was reached)
    // The feed's clock at the take, read under the lock hand() stamps under: every row handed
    // after this take, and so not in it, was stamped later.
    Clock::TimePoint at;
  };

  // `clock`: what stamps the rows and the takes (nullptr: the steady clock); it outlives the feed.
  explicit SettleFeed(size_t bound, const Clock* clock = nullptr)
      : bound_(bound), clock_(clock != nullptr ? *clock : steady_) {}

  // The relay: a session has begun (after reconcile) or ended (lease lost, hand-over, stop, a
  // failure). Rows handed outside a session are dropped.
  void begin();
  void end();
  // The relay: `rows` (acknowledged, oldest first) are moved in, as one vector when nothing waits,
  // each stamped with the feed's clock now.
  void hand(std::vector<Row>&& rows);

  // The settle thread: waits until rows or a session change come, or `timeout` passes; then
  // takes what waits.
  Taken take(std::chrono::nanoseconds timeout);
  // The settle thread: takes what waits now, without waiting; a wake() is left for take().
  Taken takeHanded();
  // Wakes a take() that waits (stop).
  void wake();

 private:
  Taken takeWaiting();  // REQUIRES(mu_)

  const size_t bound_;
  const SteadyClock steady_;
  const Clock& clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t session_ = 0;      // GUARDED_BY(mu_); 0 between sessions
  uint64_t sessions_ = 0;     // GUARDED_BY(mu_): sessions begun
  uint64_t takenSession_ = 0; // GUARDED_BY(mu_): the session the last take() reported
  std::vector<Row> waiting_;  // GUARDED_BY(mu_)
  uint64_t dropped_ = 0;      // GUARDED_BY(mu_)
  bool woken_ = false;        // GUARDED_BY(mu_)
};

}  // namespace outbox

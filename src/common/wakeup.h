#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <numeric>

#include "common/deadline.h"

namespace outbox {

// What woke a poll of the outbox table, as outbox_wakeups_total{by} counts it; a poll that more
// than one woke counts under the first of kWakeupLabels' order.
enum class WokeBy { kBinlog, kPoll, kFlow };

struct WakeupLabel {
  WokeBy by;
  const char* label;    // outbox_wakeups_total's `by`
  const char* meaning;  // for the metric's help (README, "Health and metrics" says the same)
};
inline constexpr WakeupLabel kWakeupLabels[] = {
    {WokeBy::kBinlog, "binlog", "the doorbell saw a commit that wrote the table"},
    {WokeBy::kPoll, "poll", "the database's shared idle check saw new ids, or the idle timer"},
    {WokeBy::kFlow, "flow", "rows just came, a full batch, open holes to probe"},
};

// What may wake a source's relay before its own next poll (docs/design.md, "Waking up"), and what it knows
// of them: the binlog doorbell rings when a transaction that wrote the source's outbox table
// commits; the shared idle check of its database rings when the table holds an id above what the
// scan has read. A ring says only when to look: a ring lost, late or wrong costs latency, never a
// row. Thread-safe: the ringers' threads ring, the relay thread waits and reads.
class Wakeup {
 public:
  // The ringers, in kRingers' order.
  enum class By { kBinlog, kBinlogNoRows, kIdleCheck };

  // Each ringer: the label a poll it woke counts under, and whether a ring is a commit with rows
  // for the poll to find (PollPacer::started).
  struct Ringer {
    By by;
    WokeBy wakes;
    bool bringsRows;
  };
  static constexpr Ringer kRingers[] = {
      // A commit wrote rows to the table (so a poll should read at least one).
      {By::kBinlog, WokeBy::kBinlog, true},
      // The binary log says to look without rows to wait for (an epoch bump, the doorbell coming
      // or going).
      {By::kBinlogNoRows, WokeBy::kBinlog, false},
      // The idle check saw new ids or a bump.
      {By::kIdleCheck, WokeBy::kPoll, false},
  };

  // How many times each ringer rang.
  struct Rings {
    std::array<uint64_t, std::size(kRingers)> count{};
    uint64_t operator[](By by) const { return count[static_cast<size_t>(by)]; }
    uint64_t total() const { return std::accumulate(count.begin(), count.end(), uint64_t{0}); }
  };

  // How often the idle check looks at the sources a doorbell watches too (the net under writes the
  // binary log does not carry), and how often such a source polls on its own while the idle check
  // fails.
  static constexpr std::chrono::seconds kWatchedCheck{5};

  void ring(By by) {
    {
      std::lock_guard lock(mu_);
      ++rings_.count[static_cast<size_t>(by)];
    }
    cv_.notify_all();
  }
  // Stop was requested: every wait from now on returns at once (StopSignal::onRequest).
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopped_ = true;
    }
    cv_.notify_all();
  }
  Rings rings() const {
    std::lock_guard lock(mu_);
    return rings_;
  }
  // Waits (real time) up to `d` (any length: the deadline saturates), or until a ring after those
  // counted in `seen`, or stop().
  void waitPast(const Rings& seen, std::chrono::milliseconds d) {
    const auto deadline = deadlineAfter(d);
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, deadline, [&] { return rings_.total() != seen.total() || stopped_; });
  }

  // Whether a doorbell watches the source's table now (connected, reading the binlog): then the
  // relay need not poll to find rows that come, only to probe open holes.
  std::atomic<bool> doorbell{false};
  // Whether the shared idle check runs for the source (its last check succeeded): then the relay's
  // idle timer is the check's.
  std::atomic<bool> idleChecked{false};
  // The highest outbox id the source's scan has read past (its cursor), for the idle check.
  std::atomic<uint64_t> readThrough{0};
  // The relay gave up waiting for the rows of binlog rings (their commits not visible within the
  // retries: a semi-synchronous commit waiting for its replica, say): the idle check looks at the
  // source every round, as if no doorbell watched it, until a poll reads rows again.
  std::atomic<bool> ringsUnanswered{false};

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Rings rings_;
  bool stopped_ = false;
};

// Both tables are indexed by their enums.
static_assert([] {
  for (size_t i = 0; i < std::size(Wakeup::kRingers); ++i) {
    if (static_cast<size_t>(Wakeup::kRingers[i].by) != i) return false;
  }
  for (size_t i = 0; i < std::size(kWakeupLabels); ++i) {
    if (static_cast<size_t>(kWakeupLabels[i].by) != i) return false;
  }
  return true;
}());

}  // namespace outbox

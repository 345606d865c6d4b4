#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "common/deadline.h"

namespace outbox {

// What may wake a source's relay before its own next poll (docs/design.md, "Waking up"), and what it knows
// of them: the binlog doorbell rings when a transaction that wrote the source's outbox table
// commits; the shared idle check of its database rings when the table holds an id above what the
// scan has read. A ring says only when to look: a ring lost, late or wrong costs latency, never a
// row. Thread-safe: the ringers' threads ring, the relay thread waits and reads.
class Wakeup {
 public:
  // kBinlog: a commit wrote rows to the table (so a poll should read at least one); kBinlogNoRows:
  // the binary log says to look without rows to wait for (an epoch bump, the doorbell coming or
  // going); kIdleCheck: the idle check saw new ids or a bump.
  enum class By { kBinlog, kBinlogNoRows, kIdleCheck };

  struct Rings {
    uint64_t binlog = 0;
    uint64_t binlogNoRows = 0;
    uint64_t idleCheck = 0;
    uint64_t total() const { return binlog + binlogNoRows + idleCheck; }
  };

  // How often the idle check looks at the sources a doorbell watches too (the net under writes the
  // binary log does not carry), and how often such a source polls on its own while the idle check
  // fails.
  static constexpr std::chrono::seconds kWatchedCheck{5};

  void ring(By by) {
    {
      std::lock_guard lock(mu_);
      ++(by == By::kBinlog ? rings_.binlog : by == By::kBinlogNoRows ? rings_.binlogNoRows : rings_.idleCheck);
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

}  // namespace outbox

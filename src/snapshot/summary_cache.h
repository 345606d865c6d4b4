#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>

#include "common/status.h"
#include "snapshot/document.h"

namespace outbox {

// One source's summaries (?summary=true): the whole table is read at most once per `interval`,
// and requests that arrive while it is read wait for that read rather than start another
// (docs/design.md, "The snapshot"). A summary kept is served as it was read — its watermark,
// stream sequence, count and checksum together, one consistent read — so a consumer compares it
// at its own watermark, as it would a fresh one. A failed read is shared by its waiters and not
// kept: the next request reads again. Thread-safe.
class SummaryCache {
 public:
  using Clock = std::chrono::steady_clock;
  // How a request got its summary: it read the table, it waited for a read already under way, or
  // the summary was kept from a read less than `interval` ago.
  enum class From { kRead, kShared, kCache };
  struct Served {
    SnapshotHeader header;
    From from = From::kRead;
    Clock::duration age{};          // since the read began
    Clock::duration freshFor{};     // until a request reads again (0 with interval 0)
    std::chrono::system_clock::time_point readAt;  // when the read began: which read this is
  };
  using Read = std::function<Result<SnapshotHeader>()>;

  // interval 0: every request reads (those that arrive during a read still share it).
  explicit SummaryCache(std::chrono::milliseconds interval, std::function<Clock::time_point()> now = Clock::now);

  // The summary kept, or the one being read, or `read()`'s (run on this thread, with no lock held).
  Result<Served> get(const Read& read);

 private:
  struct Kept {
    SnapshotHeader header;
    Clock::time_point at;
    std::chrono::system_clock::time_point readAt;
  };
  Served served(const Kept& kept, From from, Clock::time_point now) const;

  const std::chrono::milliseconds interval_;
  const std::function<Clock::time_point()> now_;
  std::mutex mu_;
  std::condition_variable readDone_;
  std::optional<Kept> kept_;      // GUARDED_BY(mu_)
  bool reading_ = false;          // GUARDED_BY(mu_)
  uint64_t reads_ = 0;            // GUARDED_BY(mu_): reads ended, to tell a waiter its read ended
  Status lastFailure_;            // GUARDED_BY(mu_): the last read's error, for its waiters
  bool lastFailed_ = false;       // GUARDED_BY(mu_)
};

}  // namespace outbox

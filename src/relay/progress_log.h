#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>

#include <spdlog/logger.h>

#include "common/clock.h"

namespace outbox {

// One info line per interval while rows flow, so the log shows the relay is alive; nothing while
// the source is idle. Lives as long as the relay (across sessions). Not thread-safe.
class ProgressLog {
 public:
  explicit ProgressLog(std::shared_ptr<spdlog::logger> log, std::chrono::seconds interval = std::chrono::seconds(30))
      : log_(std::move(log)), interval_(interval) {}

  // Called on every turn of the loop with the source's totals: logs the rows published since the
  // last line, when an interval has passed since it and some were. The first call only starts
  // counting.
  void tick(Clock::TimePoint now, uint64_t publishedRows, uint64_t publishedThrough, uint64_t publishedStreamSeq);

 private:
  std::shared_ptr<spdlog::logger> log_;
  const std::chrono::seconds interval_;
  Clock::TimePoint lastLine_;  // when tick() last looked (zero before the first)
  uint64_t loggedRows_ = 0;    // publishedRows then
};

}  // namespace outbox

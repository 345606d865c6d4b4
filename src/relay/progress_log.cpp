#include "relay/progress_log.h"

namespace outbox {

void ProgressLog::tick(Clock::TimePoint now, uint64_t publishedRows, uint64_t publishedThrough,
                       uint64_t publishedStreamSeq) {
  if (now - lastLine_ < interval_) return;
  if (publishedRows != loggedRows_ && lastLine_ != Clock::TimePoint{}) {
    log_->info("published {} rows in the last {} s; through version {} (seq {})", publishedRows - loggedRows_,
               std::chrono::duration_cast<std::chrono::seconds>(now - lastLine_).count(), publishedThrough,
               publishedStreamSeq);
  }
  loggedRows_ = publishedRows;
  lastLine_ = now;
}

}  // namespace outbox

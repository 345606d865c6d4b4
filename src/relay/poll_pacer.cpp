#include "relay/poll_pacer.h"

#include <algorithm>

namespace outbox {

void PollPacer::batchArrived(Clock::TimePoint now, bool pollAgain, size_t rowsRead, bool holesOpen, Watch watch) {
  const bool rowsCame = rowsRead > 0;
  if (rowsCame) ringsGivenUp_ = false;
  unanswered_ -= std::min<uint64_t>(unanswered_, rowsRead);
  if (unanswered_ == 0 && !(checkAgain_ && rowsCame)) ringRetries_ = kRingRetries;
  if (pollAgain) {
    if (rowsCame) lastRowsAt_ = now;
    next_ = now;
    cause_ = Cause::kFlow;
    return;
  }
  const auto flow = flowDelay(now, rowsCame);
  cause_ = Cause::kFlow;
  if (ringRetries_ >= kRingRetries && unanswered_ > 0) {
    ringsGivenUp_ = true;  // the idle check looks for their rows
    unanswered_ = 0;
  }
  if (watch.doorbell && ringRetries_ < kRingRetries) {
    // Rings this poll did not find as many rows for: their commits may not be visible yet.
    next_ = started_ + kFlowingPoll * (1 << ringRetries_++);
    return;
  }
  if (holesOpen || (!watch.doorbell && !watch.idleCheck)) {
    next_ = started_ + flow;
    cause_ = flow == longest_ ? Cause::kIdle : Cause::kFlow;
    return;
  }
  if (!watch.doorbell && flow < longest_) {
    next_ = started_ + flow;  // only the idle check watches: follow the flow down to its pace
    return;
  }
  // Rows that come ring (the doorbell), or the idle check finds them: a poll of its own a
  // kQuietPoll, in case both go wrong. A doorbell without a working idle check (not run yet, or
  // failing): this timer is the net the check would be, at its pace for watched sources, a
  // kWatchedCheck whatever poll_interval is (a poll_interval of an hour left rows the binary log
  // does not carry waiting an hour).
  next_ = started_ + (watch.idleCheck ? std::chrono::milliseconds(kQuietPoll)
                                      : std::chrono::milliseconds(Wakeup::kWatchedCheck));
  cause_ = Cause::kIdle;
}

std::chrono::milliseconds PollPacer::flowDelay(Clock::TimePoint now, bool rowsCame) {
  if (rowsCame) lastRowsAt_ = now;
  auto sinceRows = std::chrono::duration_cast<std::chrono::milliseconds>(now - lastRowsAt_);
  return std::min(std::max(kFlowingPoll, sinceRows / kFlowDivisor), longest_);
}

}  // namespace outbox

#include "relay/poll_pacer.h"

#include <algorithm>

namespace outbox {

std::chrono::milliseconds PollPacer::nextDelay(Clock::TimePoint now, bool rowsCame) {
  if (rowsCame) lastRowsAt_ = now;
  auto sinceRows = std::chrono::duration_cast<std::chrono::milliseconds>(now - lastRowsAt_);
  return std::min(std::max(kFlowingPoll, sinceRows / 8), longest_);
}

}  // namespace outbox

#pragma once

#include <chrono>

#include "common/clock.h"

namespace outbox {

// When the relay polls next (ARCHITECTURE.md 3b, "the flow"): at once after a full batch, within
// milliseconds while rows come, and later as they stop coming, up to poll_interval. Waits count
// from when a poll started, so the time a batch takes is not added to the wait of a row committed
// just after its read. Every time is the caller's (the relay's clock). Not thread-safe; the relay
// thread owns it.
class PollPacer {
 public:
  // The shortest wait between polls, while rows flow.
  static constexpr std::chrono::milliseconds kFlowingPoll{2};

  // `longest`: the wait once rows have stopped coming (poll_interval).
  explicit PollPacer(std::chrono::milliseconds longest) : longest_(longest) {}

  // A session begins at `now`: poll at once, counting as if rows had just come.
  void begin(Clock::TimePoint now) { next_ = lastRowsAt_ = now; }
  // A poll's batch started being prepared at `now`.
  void started(Clock::TimePoint now) { started_ = now; }
  // The batch of the poll started last arrived at `now`. `pollAgain`: it was full, or ended at a
  // poison row, so the next poll is due at once. Else the next is due nextDelay() after that poll
  // started. `rowsCame`: it read rows — a full batch too, so the poll after a drain still follows
  // the flow.
  void batchArrived(Clock::TimePoint now, bool pollAgain, bool rowsCame) {
    if (pollAgain) {
      if (rowsCame) lastRowsAt_ = now;
      next_ = now;
      return;
    }
    next_ = started_ + nextDelay(now, rowsCame);
  }
  // The next poll is due at `now` (the assigned tail has more, or new rows may be waiting).
  void pollAt(Clock::TimePoint now) { next_ = now; }

  bool due(Clock::TimePoint now) const { return now >= next_; }
  Clock::TimePoint next() const { return next_; }

 private:
  // The wait grows with the time since rows last came: a producer that pauses for a moment (a
  // slow commit, a GC) finds the relay still polling every few ms; one that stopped costs a poll
  // per poll_interval after a few seconds.
  std::chrono::milliseconds nextDelay(Clock::TimePoint now, bool rowsCame);

  const std::chrono::milliseconds longest_;
  Clock::TimePoint next_;        // when the next poll is due
  Clock::TimePoint started_;     // when the batch being prepared was started
  Clock::TimePoint lastRowsAt_;  // when a poll last read rows
};

}  // namespace outbox

#pragma once

#include <chrono>

#include "common/clock.h"
#include "common/wakeup.h"

namespace outbox {

// When the relay polls next (docs/design.md, Waking up): at once after a full batch, within milliseconds
// while rows come, and later as they stop coming, up to poll_interval. Waits count from when a
// poll started, so the time a batch takes is not added to the wait of a row committed just after
// its read. Every time is the caller's (the relay's clock). Not thread-safe; the relay thread
// owns it.
//
// What else wakes the source (a Wakeup) lets it poll less: while the binlog doorbell watches its
// table, a ring is what says rows came, so the relay polls on its own only to probe open holes
// (a rollback writes nothing to the binlog) and, after rings whose poll read fewer rows than
// rings (the binlog can be written a moment before the commit is visible), a few times more
// within kRingRetries, then leaves them to the idle check (ringsGivenUp); while the shared idle
// check of its database runs, the check is the idle timer.
// Either way a quiet source keeps a poll per kQuietPoll of its own, in case both go wrong.
class PollPacer {
 public:
  // The shortest wait between polls, while rows flow.
  static constexpr std::chrono::milliseconds kFlowingPoll{2};
  // Once rows stop coming, the wait is this fraction of the time since they last came: each poll
  // half again later than the last, so a row after a pause of T waits at most T / 2 and costs
  // about log1.5(T / 2 ms) polls (10 for 100 ms; an eighth, as before issue 20, cost 23).
  static constexpr int kFlowDivisor = 2;
  // After binlog rings, polls that read fewer rows than rings (or that answered several rings and
  // read rows) are repeated up to this many times, the wait doubling from kFlowingPoll (2 + 4 + 8
  // + 16 + 32 ms after the rings' poll).
  static constexpr int kRingRetries = 5;
  // The longest a source that something else watches goes without a poll of its own.
  static constexpr std::chrono::seconds kQuietPoll{60};

  // What watches the source besides its own polls, as the Wakeup says before each batch.
  struct Watch {
    bool doorbell = false;
    bool idleCheck = false;
  };
  // Why a poll is due, for outbox_wakeups_total.
  enum class Cause { kFlow, kIdle, kRing };

  // `longest`: the wait once rows have stopped coming (poll_interval).
  explicit PollPacer(std::chrono::milliseconds longest) : longest_(longest) {}

  // A session begins at `now`: poll at once, counting as if rows had just come.
  void begin(Clock::TimePoint now) {
    next_ = lastRowsAt_ = now;
    cause_ = Cause::kFlow;
    ringRetries_ = kRingRetries;
    unanswered_ = 0;
  }
  // A poll's batch started being prepared at `now`, answering `rings` binlog rings that came since
  // the last poll started (each a commit that wrote the table, so at least a row).
  void started(Clock::TimePoint now, uint64_t rings = 0) {
    started_ = now;
    checkAgain_ = rings >= 2;
    if (rings > 0) {
      unanswered_ += rings;
      ringRetries_ = 0;
    }
  }
  // The batch of the poll started last arrived at `now`. `pollAgain`: it was full, or ended at a
  // poison row, so the next poll is due at once. Else the next is due after that poll started, as
  // the class comment says. `rowsRead`: how many rows the new-row read returned (a full batch too,
  // so the poll after a drain still follows the flow); fewer than the rings answered, and the
  // commits of some may not be visible yet. `holesOpen`: the scan keeps open holes, which need
  // probes.
  void batchArrived(Clock::TimePoint now, bool pollAgain, size_t rowsRead, bool holesOpen, Watch watch);
  // Nothing else watches the source.
  void batchArrived(Clock::TimePoint now, bool pollAgain, bool rowsCame) {
    batchArrived(now, pollAgain, rowsCame ? 1 : 0, /*holesOpen=*/true, Watch());
  }
  // The next poll is due at `now` (the assigned tail has more, or new rows may be waiting).
  void pollAt(Clock::TimePoint now) {
    next_ = now;
    cause_ = Cause::kFlow;
  }
  // Something rang: the next poll is due at `now`.
  void rung(Clock::TimePoint now) {
    next_ = std::min(next_, now);
    cause_ = Cause::kRing;
  }

  bool due(Clock::TimePoint now) const { return now >= next_; }
  Clock::TimePoint next() const { return next_; }
  // Why the next poll is due: the flow (rows came, a full batch, holes to probe), the idle timer,
  // or a ring.
  Cause cause() const { return cause_; }
  // The retries after binlog rings ended before as many rows as rings were read, and no poll has
  // read rows since (Wakeup::ringsUnanswered: the idle check looks for them).
  bool ringsGivenUp() const { return ringsGivenUp_; }

 private:
  // The wait grows with the time since rows last came (kFlowDivisor): a producer that pauses for
  // a moment (a slow commit, a GC) finds the relay still polling within milliseconds; one that
  // stopped costs a poll per poll_interval (or none, the idle check watching) within a second.
  std::chrono::milliseconds flowDelay(Clock::TimePoint now, bool rowsCame);

  const std::chrono::milliseconds longest_;
  Clock::TimePoint next_;        // when the next poll is due
  Clock::TimePoint started_;     // when the batch being prepared was started
  Clock::TimePoint lastRowsAt_;  // when a poll last read rows
  Cause cause_ = Cause::kFlow;
  int ringRetries_ = kRingRetries;  // polls after a ring that read too few rows, so far
  uint64_t unanswered_ = 0;         // binlog rings whose commits no poll has read yet (as many rows)
  // The poll answers several rings: rows of one commit may stand for another's, not yet visible
  // (a multi-row commit and a one-row commit rang together), so one that read rows is followed
  // by one more.
  bool checkAgain_ = false;
  bool ringsGivenUp_ = false;
};

}  // namespace outbox

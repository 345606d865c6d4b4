#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "common/clock.h"
#include "relay/ack_tracker.h"
#include "relay/ports.h"

namespace outbox {

// A session's publishes between send and ack: the versions in flight, which of them the stream
// has stored (contiguously, through AckTracker), which failed, and the oldest still unanswered.
// Marks may come only from an open window: open() (reconcile) starts one at what the stream
// holds and close() forgets what is in flight, so an ack an earlier session left queued in the
// publisher never moves published_through.
// Not thread-safe; the relay thread owns it. Times are the caller's clock's.
class AckWindow {
 public:
  struct Sent {
    uint64_t version = 0;
    int64_t createdAtMicros = 0;  // the row's created_at, for commit-to-ack latency
    Clock::TimePoint sentAt;      // its ack is due by sentAt + the ack timeout
  };
  // What one take() found.
  struct Taken {
    // The first failed publish among the acks taken, if any. Such a version is never acked: the
    // contiguous mark stops below it until the next session reconciles.
    std::optional<VersionAck> failure;
    // The versions that moved below the contiguous mark, oldest first (now in the stream).
    // Valid until the next take().
    std::span<const Sent> published;
  };

  // Starts a session's window: every version up to `version` is in the stream, the last stored
  // at `seq`; nothing is in flight, and the next version sent is version + 1.
  void open(uint64_t version, uint64_t seq);
  // Forgets what is in flight (the publisher abandons it too) until the next open(). The
  // contiguous mark and nextVersion() stay as they were.
  void close();
  bool isOpen() const { return open_; }

  // Records that `row` was sent at `sentAt`. Its version must be nextVersion(): a session sends
  // versions in order, each once.
  void sent(const OutboxRow& row, Clock::TimePoint sentAt);
  // Takes the acks `publisher` received so far. Applies those of versions this window sent and
  // the stream has not yet acknowledged; ignores the rest (an ack queued by an earlier session, a
  // second ack of the same version). Then retires the versions now below the contiguous mark.
  Taken take(Publisher& publisher);

  // The oldest publish still in flight, when it was sent more than `timeout` before `now`. The
  // deadline is per publish: acks of later versions do not excuse a lost one.
  std::optional<Sent> overdue(Clock::TimePoint now, std::chrono::milliseconds timeout) const;
  // Every publish in flight has been answered: acked (waiting for a gap below it to fill) or
  // failed. What settle waits for; a failed publish is never acked, so waiting for that would
  // only hold the next session back.
  bool allAnswered() const;

  uint64_t contiguousVersion() const { return tracker_.contiguousVersion(); }
  uint64_t contiguousSeq() const { return tracker_.contiguousSeq(); }
  // The version the session sends next.
  uint64_t nextVersion() const { return next_; }
  // Versions sent and not yet below the contiguous mark: what bounds the tracker's memory.
  size_t inFlight() const { return inFlight_.size(); }

 private:
  bool open_ = false;
  uint64_t next_ = 1;
  AckTracker tracker_;
  // Sent and not yet below the contiguous mark, oldest first: the front is the oldest publish
  // still waiting for an ack.
  std::deque<Sent> inFlight_;
  std::set<uint64_t> failed_;        // versions in flight whose publish failed (answered, never acked)
  std::vector<VersionAck> acks_;     // take()'s scratch: the publisher's acks
  std::vector<Sent> published_;      // take()'s result: the versions it retired
};

}  // namespace outbox

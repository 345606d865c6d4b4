#pragma once

// What a new leader reads back before it settles anything (docs/design.md, "The settled stream
// (issue 36)", "Recovery"): the settled stream's last Outbox-Settled-Through, where the settled
// tail with Outbox-Settled-Seen above it begins, and where the main stream's replay after it
// begins. Both streams are behind a MessageReader (a JetStream's direct gets in the bridge, a
// vector in tests), so this is tested without a server.

#include <chrono>
#include <cstdint>
#include <optional>

#include "common/clock.h"
#include "common/status.h"
#include "nats/jetstream.h"
#include "settle/settled_message.h"

namespace outbox {

class MessageReader {
 public:
  struct Bounds {
    uint64_t first = 1;  // the stream's first and last sequence; first > last: it holds none
    uint64_t last = 0;
  };
  virtual ~MessageReader() = default;
  virtual Result<Bounds> bounds() = 0;
  // The message at `seq`; nullopt when none is (deleted, expired, purged).
  virtual Result<std::optional<nats::StoredMessage>> at(uint64_t seq) = 0;
  // The first message stored at or after `seq` and below `end`; nullopt when none is. This one
  // walks at() (at most kMaxDeletedWalk deleted sequences, then a permanent error); a reader that
  // can ask the server for it at once (JetStreamReader) does.
  virtual Result<std::optional<nats::StoredMessage>> firstFrom(uint64_t seq, uint64_t end);
  // The last message stored; nullopt when none is. This one walks at() back from the last
  // sequence (at most kMaxDeletedWalk deleted ones, then a permanent error); JetStreamReader asks
  // the server for the last message of each of the stream's subjects.
  virtual Result<std::optional<nats::StoredMessage>> last();
};

// A walk over deleted sequences by at() stops after this many reads (a permanent error).
inline constexpr uint64_t kMaxDeletedWalk = 10'000;

// The mark of the settled stream's last stored message (MessageReader::last);
// nullopt when it holds none. A message without the marks is a permanent error: the settled
// stream has one writer, the bridge.
Result<std::optional<SettledMark>> lastSettled(MessageReader& settled);

// The stream's last stored message (MessageReader::last); nullopt when it holds none.
inline Result<std::optional<nats::StoredMessage>> lastStored(MessageReader& stream) { return stream.last(); }

// The sequence from which every stored message carries `header` above `value`: the lowest
// sequence whose message, or the first stored one after it, does (last + 1 when none does).
// `header` must never fall along the stream: Outbox-Version on the main stream (versions rise with
// sequences in every epoch), Outbox-Settled-Seen on the settled one. A binary search: about
// log2(n) reads, each a firstFrom().
Result<uint64_t> firstSeqAbove(MessageReader& stream, const char* header, uint64_t value);

// The same for the time the server stored each message: the lowest sequence from which every
// stored message was stored at or after `nanos` (ns since the epoch; the server's clock). Stored
// times rise with sequences in one stream.
Result<uint64_t> firstSeqStoredFrom(MessageReader& stream, int64_t nanos);

// The steady-clock time of a message the server stored at `storedNanos` (its wall clock), given
// both clocks now; never after `now` (a server clock ahead of ours).
Clock::TimePoint steadyTimeOf(int64_t storedNanos, Clock::TimePoint now, int64_t nowWallNanos);

}  // namespace outbox

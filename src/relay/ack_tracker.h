#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

namespace outbox {

// Turns acks that may arrive in any order into the highest contiguous acknowledged version:
// published_through may only move to v once every version up to v is in the stream.
// Not thread-safe; the relay thread owns it.
class AckTracker {
 public:
  // Starts over: everything up to `version` (stored at `seq`) is known to be in the stream.
  void reset(uint64_t version, uint64_t seq);
  // Records that `version` is stored at `seq`. Versions at or below the contiguous mark are ignored.
  void ack(uint64_t version, uint64_t seq);
  uint64_t contiguousVersion() const { return version_; }
  uint64_t contiguousSeq() const { return seq_; }
  // Acked versions waiting for a gap below them to fill.
  size_t waiting() const { return ahead_.size(); }

 private:
  uint64_t version_ = 0;
  uint64_t seq_ = 0;
  std::map<uint64_t, uint64_t> ahead_;  // version -> seq, all > version_ + 1
};

}  // namespace outbox

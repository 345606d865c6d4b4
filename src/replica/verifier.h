#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "snapshot/document.h"

namespace outbox {

// A summary as the bridge served it: its header, and which read of the table it came from.
struct ServedSummary {
  SnapshotHeader header;
  std::string readAt;  // Outbox-Summary-Read-At: names the read ("" from an older bridge)
  std::chrono::milliseconds freshFor{0};  // Outbox-Summary-Fresh-For: until the bridge reads again
};

// The replica's state at one version: what a summary at that watermark must say.
struct VersionState {
  uint64_t version = 0;
  uint64_t sum = 0;
  uint64_t recordCount = 0;
};

// When to ask ?summary=true and what it says (docs/consumers.md section 4), as
// clients/typescript/src/verify.ts does. The bridge reads the table for a summary at most once
// per summary_interval and serves that read, at its own watermark, until the next; the checksum is
// a sum over records, so the state after each of the last `historySize` versions is kept (24 bytes
// each) and a summary is compared at its watermark, or at a later version when it held changes
// not yet published (invariant 6). When none matches, only a difference that stays over distinct
// reads of the table in a row means the replica is wrong. Checks come every `interval`, ±20%
// (pods started together spread out); interval 0: never. Single-threaded.
class Verifier {
 public:
  using Clock = std::chrono::steady_clock;
  struct Verdict {
    enum class Kind { kNone, kLater, kVerified, kMismatch } kind = Kind::kNone;
    uint64_t version = 0;         // kVerified: the version whose state the summary is
    VersionState state;           // kMismatch: the replica's at the summary's watermark
    SnapshotHeader summary;       // kMismatch
    int inARow = 0;               // kMismatch: distinct reads that differed, in a row
  };

  Verifier(std::chrono::milliseconds interval, size_t historySize, std::function<double()> random = {});

  bool enabled() const { return interval_.count() > 0; }
  bool due(Clock::time_point now) const { return enabled() && now >= nextAt_; }
  // A summary is being asked for: the next ask is an interval away unless what it says moves it.
  void asking(Clock::time_point now) { nextAt_ = now + jittered(); }
  // A new state to verify from: a bootstrap (itself checked: next check after a whole interval).
  void reset(const VersionState& state, Clock::time_point now);
  // The state after a version applied: a pending summary it matches is verified, one the replica
  // got far past (half the history) is judged.
  Verdict applied(const VersionState& state, Clock::time_point now);
  // A summary just read; `idle`: nothing is arriving.
  Verdict offer(const ServedSummary& summary, Clock::time_point now, bool idle);
  // Nothing arrives: a pending summary the replica has reached is judged now.
  Verdict idle(Clock::time_point now);
  std::optional<VersionState> at(uint64_t version) const;

 private:
  std::optional<uint64_t> match(const SnapshotHeader& summary) const;
  Verdict judge(const ServedSummary& summary, Clock::time_point now);
  Verdict verified(uint64_t version, Clock::time_point now);
  void soon(const ServedSummary& summary, Clock::time_point now);
  Clock::duration jittered();

  std::chrono::milliseconds interval_;
  size_t size_;
  std::function<double()> random_;
  std::deque<VersionState> history_;  // oldest first, versions one apart
  std::optional<ServedSummary> pending_;
  std::vector<std::string> mismatchedReads_;
  Clock::time_point nextAt_{};
};

}  // namespace outbox

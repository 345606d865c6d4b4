#pragma once

// The scan's open holes (docs/design.md, "Contract v2: finding late commits", "Holes that cannot
// be proven closed"): runs of outbox ids the scan read past that were not visible then, kept as
// ranges, and how many of their ids may still hold a row. The bookkeeping alone — opening ids,
// closing them, a row found, two entries folded into a span — with its invariants; what a hole's
// suspects are and when it is read, probed or folded is the Scanner's (scanner.h).

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "relay/scan_reads.h"

namespace outbox {

// The connections that may hold a hole's ids: those busy at the first reading after it was found,
// less each later reading's retired ones. Shared by the holes tagged at one reading while they
// narrow alike.
struct HoleSuspects {
  std::vector<uint64_t> ids;  // ascending
  // The tagging reading's server clock: after the hole's ids were taken.
  std::optional<ConnectionReading::ServerClock> taggedAt;
};

// Connection id -> QUERY_ID of the statement it ran, ascending by connection id.
using HoleStatements = std::vector<std::pair<uint64_t, uint64_t>>;

// The ids from its first (the key in OpenHoles) through `last`, found at one poll; or a span of
// holes folded together, whose ids with a version or quarantined are resolved one by one.
// `last` and `open` are OpenHoles': read them, never write them.
struct Hole {
  uint64_t last;
  Clock::TimePoint found;                       // the earliest of its ids' finding
  std::shared_ptr<const HoleSuspects> holders;  // null: no reading since found
  Clock::TimePoint probeAfter{};                // found held: not probed again before this
  bool span = false;
  uint64_t open = 0;  // its open ids (a span's, as counted when folded, less those resolved)
  // Quiet: each suspect's statement when a probe found it clear (by connection id, ascending).
  std::shared_ptr<const HoleStatements> quiet;
  Clock::TimePoint quietAfter{};  // a probe found it not clear: not probed for quiet before this
};

// Invariants (broken() checks them; the unit test open_holes_test after every operation):
//  1. entries are disjoint and ascending by first id, each first <= last;
//  2. a hole that is not a span has every id open: open == last - first + 1;
//  3. a span counts at least one open id and at most its size: what no probe has proven dead may
//     be held, and when it is cut its count is shared out by size, rounded up;
//  4. openIds() is the sum of every entry's open.
// An id is open when it lies in an entry that is not a span; a span's ids are open in number only.
class OpenHoles {
 public:
  using Entries = std::map<uint64_t, Hole>;  // first id -> hole

  void clear() {
    entries_.clear();
    openIds_ = 0;
  }
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  uint64_t openIds() const { return openIds_; }

  Entries::iterator begin() { return entries_.begin(); }
  Entries::iterator end() { return entries_.end(); }
  Entries::const_iterator begin() const { return entries_.begin(); }
  Entries::const_iterator end() const { return entries_.end(); }
  Entries::iterator find(uint64_t first) { return entries_.find(first); }
  // The entry holding `id`, or end().
  Entries::const_iterator holding(uint64_t id) const;
  // Whether an entry holds any of first..last.
  bool overlaps(uint64_t first, uint64_t last) const;

  // Opens the ids of `ids` not open already (as a span when `ids.span`), found at `found`.
  void open(IdRange ids, Clock::TimePoint found);
  // Closes the ids of `ids`: what is left of an entry cut keeps what it knew (its suspects, its
  // probe times, a span's open count shared out by size).
  void close(IdRange ids);
  // The row `id` has a version or is quarantined: closed, or one open id fewer in its span (at
  // least one stays, until a probe proves the span dead; the span is probed again at once).
  void resolve(uint64_t id);
  // Folds the entry after `into` into it, making `into` a span: its ids, the earlier finding, the
  // later probe times, their open counts summed. The caller joins their suspects and quiet
  // statements first. Returns the entry after the one folded in.
  Entries::iterator absorb(Entries::iterator into);

  // The first invariant broken, in words; "" when all hold.
  std::string broken() const;

 private:
  Entries entries_;
  uint64_t openIds_ = 0;
};

}  // namespace outbox

#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/logger.h>

#include "common/clock.h"
#include "common/status.h"
#include "relay/open_holes.h"
#include "relay/ports.h"

namespace outbox {

// Finds every committed outbox row without touching one (docs/design.md, "Contract v2"): new rows
// by primary key above the scan cursor, and rows that commit late, below it, through the open
// holes it keeps. A hole is a run of ids the scan read past that were not visible then (kept as a
// range: a million rolled-back ids cost one entry). Its suspects are the connections inside a
// statement (that may write the table, where the server shows it: ConnectionReading) at the first
// reading after it was found; each later reading drops those no longer so (or gone). Ids of a
// hole with no suspect left die only where a NOWAIT locking probe then finds no row and no lock
// (an open transaction's row is locked), and only while no replication applier on the server has
// work left (it may hold any id: store.applierWorkLeft()). Time alone never kills a hole.
//
// Holes whose suspects still run kFoldAfter after they were found (a long statement elsewhere,
// without the server showing who writes the table) are folded, with their neighbours of the same
// kind, into one span (IdRange::span): the published rows between them come in, and the span
// stands for its ids without a version. So the holes cost a bounded number of entries, and one
// statement reads them all each poll, however many they are (docs/design.md, "Holes that cannot
// be proven closed").
//
// A sealed span whose suspects each run one statement, still executing it, at two readings, and
// that a locking probe then finds clear (no row without a version visible, nothing locked) is
// quiet: none of its ids holds a row, and only those statements may still write one, which
// commits after they end. It is not read again while every reading, one each poll, shows each of
// them in the same statement, executing (MariaDB; docs/design.md, "Quiet spans"): a long
// statement elsewhere costs its spans nothing.
//
// A pin is a range of holes recorded in outbox_scan_holes, so that a scan which starts again reads
// them and the rows above the floor, not every row since the oldest hole: a hole open kPinAfter is
// pinned by the next mark (ScanMark::pin), and the floor moves past it; a pin is taken out
// (ScanMark::unpin) once it has no open id left, or once its holes are folded into a span pinned
// from another first id. "Pinned" means that, and only that, everywhere here.
//
// Each poll: (1) read new rows, (2) read which connections are inside a statement, (3) read every
// hole, in that order: a change visible in (1) follows, in its entity's order, changes that
// committed before it, which (3) then sees. Late and new rows of one poll are returned together,
// in id order.
//
// Used by one thread at a time: the relay's (readBatch, on its prefetch or read-ahead thread),
// with a store of its own.
class Scanner {
 public:
  // The busy connections are read at most this often, while holes are open.
  static constexpr std::chrono::milliseconds kBusyReadSpacing{50};
  // A hole a locking probe found held is probed again no sooner than this.
  static constexpr std::chrono::milliseconds kHeldReprobe{1000};
  // Two lock ages, each rounded down to the millisecond, are compared: this covers the rounding.
  static constexpr std::chrono::milliseconds kLockAgeRounding{2};
  // How often the scan checks that the table's AUTO_INCREMENT is still above its cursor, on polls
  // that read no new row (a trickle's polls each read one: no statement of this for them).
  static constexpr std::chrono::seconds kAutoIncrementCheck{10};
  // A hole open this long is recorded in outbox_scan_holes (ScanMark::pin) and the floor moves on
  // past it: a scan that starts again reads the recorded holes and the rows above the floor, not
  // every row since the oldest hole (a transaction held open for days).
  static constexpr std::chrono::seconds kPinAfter{5};
  // Holes open longer than this are named in the log, once a kStuckAfter.
  static constexpr std::chrono::seconds kStuckAfter{60};
  // A hole whose suspects still run this long after it was found (a reading after the one that
  // tagged it) is folded into a span with the holes beside it that are alike: a statement of
  // hundreds of one-id ranges costs the server about as much as a span of tens of thousands of
  // rows (docs/design.md).
  static constexpr std::chrono::milliseconds kFoldAfter{50};
  // Holes are folded together when at most this many ids lie between them (a span's read costs
  // its rows, published ones included).
  static constexpr uint64_t kFoldGap = 16;
  // Past this many entries, holes with suspects are folded whatever their age, the nearest first,
  // until half as many are left: but never across more than kCrowdedFoldGap ids (a held row far
  // below and the holes of today stay apart: a span across them would read every row between, each
  // poll and at a restart).
  static constexpr size_t kMostHoles = 512;
  static constexpr uint64_t kCrowdedFoldGap = 256;
  // A span a locking probe found held is probed again after this share of its age (and at least
  // kHeldReprobe): its late rows are read every poll all the same; only its death waits.
  static constexpr int kSpanReprobeShare = 8;
  // Where statements are numbered, a span takes in holes found this long after its first one, no
  // later: sealed, it may become quiet (below) while the holes after it make a span of their own.
  // Sealed spans that are not quiet kPinAfter after their first hole (a held row, suspects never
  // steady) are folded together again, as are any when crowded.
  static constexpr std::chrono::milliseconds kSealAfter{500};

  struct Batch {
    // Late and new rows, in id order, without version or quarantine (as far as the read showed:
    // quarantineUnreadAbove).
    std::vector<OutboxRow> rows;
    size_t newRead = 0;           // rows the new-row read returned (as many as asked: more may wait)
    ScanMark mark;                // the cursor and floor once `rows` are versioned
    // The new rows, those above this id, were read without the quarantine's join
    // (NewRows::quarantineUnread): one of them may be quarantined after all. (Late rows never are:
    // holes are read with it.)
    std::optional<uint64_t> quarantineUnreadAbove;
  };

  // Lines about the scan go to `log` (the source's logger; the default one when null).
  Scanner(OutboxStore& store, const Clock& clock, std::shared_ptr<spdlog::logger> log = nullptr);

  // Starts over from what the database says: the open holes of (scan_floor, scan_cursor] and those
  // recorded in outbox_scan_holes are rebuilt (visible ones come back as late rows on the next
  // poll), in O(open holes + rows above the floor). A source never scanned starts
  // at store.initialFloor(). Both this and next() fail, permanently, while the table's
  // AUTO_INCREMENT is at or below the cursor (truncated, recreated, restored): new rows would
  // take ids the scan has passed.
  Status reset(const SourceState& state);
  // One poll. Rows stay open holes (or unread) until committed().
  Result<Batch> next(int limit);
  // The batch stops before the row with id `stopAt` (a poison row): it and every row after it
  // stay open holes, visible ones, found again by the next poll's probe.
  void cutAt(Batch& batch, uint64_t stopAt);
  // Whether the row with id `id` is quarantined, read alone (one statement): a poison row that a
  // read without the quarantine returned (Batch::quarantineUnreadAbove) is looked up before it
  // halts its source or is quarantined again.
  Result<bool> quarantined(uint64_t id);
  // The batch's rows are versioned and its mark recorded.
  void committed(const Batch& batch);
  // The database may differ from what this scanner knows (an assign failed): reset() before
  // the next poll.
  void invalidate() { valid_ = false; }
  bool valid() const { return valid_; }

  // Whether the next poll may run before the batch just read is versioned (the relay's read-ahead,
  // docs/design.md, "The relay loop"): only with no hole open. A span's read returns its ids
  // without a version, which would be that batch's rows again, and the next poll folds the holes
  // of the one before into spans (found by review: a read-ahead beside a late commit read a batch
  // twice and its assign ended the session).
  bool mayReadAhead() const { return valid_ && holes_.empty(); }
  // The ids of the open holes (of a span, those it had when folded, less its rows versioned since).
  uint64_t openHoles() const { return holes_.openIds(); }
  // The entries that are quiet spans (not read while their statements run).
  size_t quietRanges() const;
  // The entries the holes take: exact ranges and spans (memory; the terms of the holes' read).
  size_t holeRanges() const { return holes_.size(); }
  // Statements that read the holes for late rows: one a poll with holes open.
  uint64_t holeReads() const { return holeReads_; }
  // Age of the oldest open hole (zero when none), as of the last poll.
  std::chrono::milliseconds oldestHoleAge() const { return oldestHoleAge_; }
  // The mark as last recorded in the database.
  const ScanMark& recorded() const { return recorded_; }

 private:
  using Suspects = HoleSuspects;
  using Statements = HoleStatements;
  // Empty when `reading` shows each of `quiet`'s connections in the same statement, executing;
  // else why not.
  static std::string notQuiet(const Statements& quiet, const ConnectionReading& reading);
  // The suspects' statements, when `reading` shows each executing the one the reading before it
  // showed (lastStatements_); null when one is not.
  std::shared_ptr<const Statements> steady(const Suspects& suspects, const ConnectionReading& reading) const;
  // Spans sealed, with suspects, not quiet, whose suspects are steady: probed for quiet after (3).
  struct QuietCandidate {
    uint64_t first;
    uint64_t last;
    std::shared_ptr<const Statements> statements;
  };
  Status probeQuiet(const std::vector<QuietCandidate>& candidates, Clock::TimePoint now);
  // What a reading leaves for (3) to check: holes with no suspect left, due a probe for death, and
  // spans due a probe for quiet.
  struct HoleChecks {
    std::vector<IdRange> mayBeDead;
    std::vector<QuietCandidate> quietCandidates;
  };
  // The poll's steps (next()): (1) the new rows, each run of ids skipped below one opening a hole;
  // (2) the reading, which narrows the holes' suspects, folds them and says which to probe; (3)
  // the holes' late rows (all but the quiet spans, when a reading was taken), then the probes —
  // returning the id it read through when it found a batch's worth.
  Batch takeNewRows(std::vector<ScannedRow>& rows, Clock::TimePoint now);
  HoleChecks takeReading(const ConnectionReading& reading, Clock::TimePoint now);
  Result<std::optional<uint64_t>> readHoles(Batch& batch, const HoleChecks& checks, bool readingTaken, int limit,
                                            Clock::TimePoint now);
  // `suspects` less those `reading` retires.
  static Suspects narrow(const Suspects& suspects, const ConnectionReading& reading);
  // Who may hold the ids of two holes folded together: either's suspects, against the later
  // tagging's clock (none when they differ: the next reading's, after both, is taken instead).
  static std::shared_ptr<const Suspects> joined(const std::shared_ptr<const Suspects>& a,
                                                const std::shared_ptr<const Suspects>& b);
  // Folds runs of holes whose suspects still run after kFoldAfter (any with suspects, past
  // kMostHoles entries) into spans.
  void fold(Clock::TimePoint now);
  // Whether ids first..last lie inside one pin: recorded (pins_), or one `mark` adds.
  bool coveredByPin(uint64_t first, uint64_t last, const ScanMark& mark) const;
  // The floor once `assigned` (in id order) is versioned: below the lowest open id neither
  // assigned nor pinned.
  uint64_t floorWithout(const std::vector<OutboxRow>& assigned, const ScanMark& mark) const;
  // The batch's mark: the cursor, the holes to pin (open kPinAfter, not pinned yet), the recorded
  // ranges with no open id left to unpin, and the floor. Also names long-open holes in the log.
  void markFor(Batch& batch, Clock::TimePoint now);
  Status checkAutoIncrement();

  OutboxStore& store_;
  const Clock& clock_;
  std::shared_ptr<spdlog::logger> log_;
  bool valid_ = false;
  uint64_t epoch_ = 0;  // the epoch the scan started in
  uint64_t cursor_ = 0;
  OpenHoles holes_;  // at or below the cursor
  uint64_t holeReads_ = 0;
  std::chrono::milliseconds oldestHoleAge_{0};
  Clock::TimePoint lastStuckLog_;
  // The pins as last recorded (first -> last): each covers open holes or ids resolved since; one
  // with no open id left is unpinned by the next mark.
  std::map<uint64_t, uint64_t> pins_;
  ScanMark recorded_;
  Clock::TimePoint lastBusyRead_;
  Statements lastStatements_;  // the last reading's busy connections executing a statement
  bool numbered_ = false;      // the last reading numbered statements: spans are sealed
  std::optional<std::string> lastApplied_;  // the last reading's ConnectionReading::applied
  Clock::TimePoint lastAutoIncrementCheck_;
};

}  // namespace outbox

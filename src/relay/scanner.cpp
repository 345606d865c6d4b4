#include "relay/scanner.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace outbox {

Scanner::Scanner(OutboxStore& store, const Clock& clock, std::shared_ptr<spdlog::logger> log)
    : store_(store), clock_(clock), log_(log ? std::move(log) : spdlog::default_logger()) {}

Status Scanner::reset(const SourceState& state) {
  valid_ = false;
  holes_.clear();
  lastStatements_.clear();  // a restarted server numbers its connections and statements anew
  pins_.clear();
  epoch_ = state.epoch;
  if (!state.scanCursor) {
    auto floor = store_.initialFloor();
    if (!floor.isOk()) return floor.status();
    cursor_ = *floor;
    recorded_ = ScanMark{};  // nothing recorded yet: the first poll records where it stands
  } else {
    cursor_ = *state.scanCursor;
    const uint64_t floor = std::min(state.scanFloor.value_or(0), cursor_);
    auto ranges = store_.unresolved(floor, cursor_);
    if (!ranges.isOk()) return ranges.status();
    auto recordedPins = store_.pinnedHoles();
    if (!recordedPins.isOk()) return recordedPins.status();
    const auto now = clock_.now();
    for (const IdRange& r : *ranges) holes_.open(r, now);
    // Recorded holes may hold ids resolved since: the next polls find those out (a visible row
    // with a version closes, a dead id dies) and the range is unpinned once none is left.
    // Read as spans: of their ids, those with a version or quarantined are resolved. Each was open
    // kPinAfter at least when recorded: not a new hole (its span is probed as one that old, and
    // the oldest hole's age says so). Its suspects are the connections busy at the first reading,
    // as for any hole found since: who was busy before the restart is not known, and none would
    // be unsafe (a statement that took its ids before may still run).
    for (const IdRange& r : *recordedPins) {
      if (r.first > cursor_) continue;
      pins_[r.first] = std::min(r.last, cursor_);
      holes_.open(IdRange{r.first, std::min(r.last, cursor_), true}, now - kPinAfter);
    }
    recorded_ = ScanMark{cursor_, floor};
    // What this start read: the versions of the ids between the floor and the cursor, and the
    // recorded ranges — never the rows below the floor (a row held for days far below costs its
    // recorded range).
    log_->debug("scan: started again at cursor {}, floor {}: {} ids above the floor, {} recorded ranges; {} open hole "
                "ids in {} entries",
                cursor_, floor, cursor_ - floor, recordedPins->size(), holes_.openIds(), holes_.size());
    OUTBOX_RETURN_IF_ERROR(checkAutoIncrement());
  }
  valid_ = true;
  return Status::ok();
}

Result<Scanner::Batch> Scanner::next(int limit) {
  const auto now = clock_.now();
  // A quiet span is left out of (3) only on the word of this poll's reading: one every poll then.
  const bool readBusy = !holes_.empty() && (now - lastBusyRead_ >= kBusyReadSpacing || quietRanges() > 0);
  // (1) new rows, then (2) the connections inside a statement.
  const uint64_t readAbove = cursor_;
  auto read = store_.readNew(cursor_, limit, readBusy);
  if (!read.isOk()) return read.status();
  if (read->epoch && *read->epoch != epoch_) {
    valid_ = false;
    return Status::transient(fmt::format("the source moved to epoch {} (an epoch bump): scanning again from its scan "
                                         "floor",
                                         *read->epoch));
  }
  if (readBusy) lastBusyRead_ = now;
  // A poll that found new rows shows ids above the cursor: only one that found none (a quiet
  // table, or one whose new rows took ids the scan has passed) asks the AUTO_INCREMENT.
  if (read->rows.empty() && now - lastAutoIncrementCheck_ >= kAutoIncrementCheck) {
    OUTBOX_RETURN_IF_ERROR(checkAutoIncrement());
  }
  Batch batch = takeNewRows(read->rows, now);
  const HoleChecks checks = read->busy ? takeReading(*read->busy, now) : HoleChecks{};
  std::optional<uint64_t> readThrough;  // the holes were read only through this id
  if (!holes_.empty()) {
    auto late = readHoles(batch, checks, read->busy.has_value(), limit, now);
    if (!late.isOk()) return late.status();
    readThrough = *late;
  }
  std::sort(batch.rows.begin(), batch.rows.end(), [](const OutboxRow& a, const OutboxRow& b) { return a.id < b.id; });
  markFor(batch, now);
  batch.mark.leanRead = read->lean;
  if (read->quarantineUnread) batch.quarantineUnreadAbove = readAbove;
  if (readThrough) cutAt(batch, *readThrough + 1);  // rows above it wait for the late rows below them
  // Late rows come on top of up to `limit` new ones: keep a batch to `limit` rows (memory, the
  // statement's size); the rest stay visible holes, taken in id order by the next polls.
  if (batch.rows.size() > static_cast<size_t>(limit)) {
    cutAt(batch, batch.rows[static_cast<size_t>(limit)].id);
    batch.newRead = static_cast<size_t>(limit);  // a full batch: poll again at once
  }
  return batch;
}

Result<bool> Scanner::quarantined(uint64_t id) {
  auto rows = store_.readRanges({IdRange{id, id}}, 1);
  if (!rows.isOk()) return rows.status();
  return !rows->empty() && rows->front().quarantined;
}

Scanner::Batch Scanner::takeNewRows(std::vector<ScannedRow>& rows, Clock::TimePoint now) {
  Batch batch;
  batch.newRead = rows.size();
  for (auto& r : rows) {
    if (r.row.id > cursor_ + 1) holes_.open(IdRange{cursor_ + 1, r.row.id - 1}, now);  // ids skipped: one hole
    cursor_ = r.row.id;
    if (!r.versioned && !r.quarantined) batch.rows.push_back(std::move(r.row));
  }
  return batch;
}

Scanner::HoleChecks Scanner::takeReading(const ConnectionReading& reading, Clock::TimePoint now) {
  // The reading narrows each hole's suspects to the connections inside a statement now (that may
  // write the table, where the server shows it): one seen between statements, not writing the
  // table, or gone, after the hole was found has finished what could have taken its ids; so has
  // one whose writer's locks are all younger than the time since the tagging reading, by the
  // server's clock (ConnectionReading). A hole with no suspect left may have died.
  HoleChecks checks;
  // A replication applier commits rows with any id, and shows in no reading's `busy`: while one
  // runs, or if one ran since the last reading (what was applied moved), no span is quiet.
  const bool applying = reading.applier || reading.applied != lastApplied_;
  lastApplied_ = reading.applied;
  // Holes found at one reading, or folded together, share one set of suspects: each set is
  // narrowed once, and the holes that shared it share what is left (keyed by the set's address).
  std::map<const Suspects*, std::shared_ptr<const Suspects>> narrowedOnce;
  auto everyone = std::make_shared<const Suspects>(Suspects{reading.busy, reading.clock});
  for (auto& [first, hole] : holes_) {
    if (!hole.holders) {
      hole.holders = everyone;  // found before this reading: its suspects are the busy ones
    } else if (!hole.holders->ids.empty()) {
      auto& narrowed = narrowedOnce[hole.holders.get()];
      if (!narrowed) narrowed = std::make_shared<const Suspects>(narrow(*hole.holders, reading));
      hole.holders = narrowed;
    }
    // One of its statements ended, or may be ending (past its execution): read it again.
    if (hole.quiet) {
      if (std::string why = applying ? "a replication applier ran" : notQuiet(*hole.quiet, reading); !why.empty()) {
        log_->debug("scan: span {}..{} read again: {}", first, hole.last, why);
        hole.quiet = nullptr;
      }
    }
    // A hole found held (its transaction's row is locked) is probed again at most every
    // kHeldReprobe, a span after a share of its age: when a row commits, (3) sees it; only a
    // rollback needs the probe.
    if (hole.holders->ids.empty() && now >= hole.probeAfter) {
      checks.mayBeDead.push_back(IdRange{first, hole.last, hole.span});
      using Duration = Clock::TimePoint::duration;
      const Duration wait = hole.span ? std::max<Duration>(kHeldReprobe, (now - hole.found) / kSpanReprobeShare)
                                      : Duration(kHeldReprobe);
      hole.probeAfter = now + wait;  // what the probe leaves open is held
    }
  }
  fold(now);
  for (auto& [first, hole] : holes_) {
    if (!applying && hole.span && !hole.quiet && !hole.holders->ids.empty() && now - hole.found >= kSealAfter &&
        now >= hole.quietAfter) {
      if (auto statements = steady(*hole.holders, reading)) {
        checks.quietCandidates.push_back(QuietCandidate{first, hole.last, std::move(statements)});
      }
    }
  }
  numbered_ = reading.numbered;
  lastStatements_.clear();
  for (size_t i = 0; i < reading.statements.size() && i < reading.busy.size(); ++i) {
    if (reading.statements[i].executing) lastStatements_.emplace_back(reading.busy[i], reading.statements[i].query);
  }
  return checks;
}

Result<std::optional<uint64_t>> Scanner::readHoles(Batch& batch, const HoleChecks& checks, bool readingTaken,
                                                   int limit, Clock::TimePoint now) {
  // Every hole in one fresh consistent read: a visible row committed late. Read in id order and
  // only until a batch's worth is found: the rest waits for the next poll.
  std::optional<uint64_t> readThrough;
  std::vector<IdRange> ranges;
  ranges.reserve(holes_.size());
  for (const auto& [first, hole] : holes_) {
    // Quiet: this poll's reading said so (none taken: read it all the same).
    if (!hole.quiet || !readingTaken) ranges.push_back(IdRange{first, hole.last, hole.span});
  }
  auto visible =
      ranges.empty() ? Result<std::vector<ScannedRow>>(std::vector<ScannedRow>{}) : store_.readRanges(ranges, limit);
  if (!visible.isOk()) return visible.status();
  if (!ranges.empty()) ++holeReads_;
  for (auto& r : *visible) {
    if (r.versioned || r.quarantined) {
      holes_.resolve(r.row.id);  // an operator quarantined it, or a scan before us versioned it
    } else {
      batch.rows.push_back(std::move(r.row));
    }
  }
  // As many as asked: more late rows may wait above the last one read, and take their versions
  // before any row above them (next() cuts the batch there). Poll again at once.
  if (visible->size() == static_cast<size_t>(limit)) {
    readThrough = visible->back().row.id;
    batch.newRead = static_cast<size_t>(limit);
  }
  // A replication applier with work left may hold any hole, suspects or not (its rows carry ids
  // another server handed out): no hole dies until it has applied what it has. Asked after (1):
  // what an idle applier committed before it is visible to the probe.
  bool applierIdle = true;
  if (!checks.mayBeDead.empty()) {
    auto applying = store_.applierWorkLeft();
    if (!applying.isOk()) return applying.status();
    applierIdle = !*applying;
  }
  if (!checks.mayBeDead.empty() && applierIdle) {
    auto dead = store_.unheld(checks.mayBeDead);
    if (!dead.isOk()) return dead.status();
    uint64_t ids = 0;
    for (const IdRange& r : *dead) {
      holes_.close(r);
      ids += r.size();
    }
    if (!dead->empty()) {
      log_->debug("scan: {} ids of open holes resolved as never committed ({}..{}); {} still open", ids,
                  dead->front().first, dead->back().last, openHoles());
    }
  }
  OUTBOX_RETURN_IF_ERROR(probeQuiet(checks.quietCandidates, now));
  return readThrough;
}

void Scanner::cutAt(Batch& batch, uint64_t stopAt) {
  auto first = std::find_if(batch.rows.begin(), batch.rows.end(), [&](const OutboxRow& r) { return r.id >= stopAt; });
  const auto now = clock_.now();
  for (auto it = first; it != batch.rows.end(); ++it) holes_.open(IdRange{it->id, it->id}, now);
  batch.rows.erase(first, batch.rows.end());
  batch.mark.floor = floorWithout(batch.rows, batch.mark);
}

void Scanner::committed(const Batch& batch) {
  for (const auto& r : batch.rows) holes_.resolve(r.id);
  for (uint64_t first : batch.mark.unpin) pins_.erase(first);
  for (const IdRange& r : batch.mark.pin) {
    uint64_t& last = pins_[r.first];
    last = std::max(last, r.last);
  }
  recorded_ = ScanMark{batch.mark.cursor, batch.mark.floor};
}

void Scanner::markFor(Batch& batch, Clock::TimePoint now) {
  ScanMark& mark = batch.mark;
  mark = ScanMark{cursor_, 0};
  // One pass over the holes: which to pin, the oldest, and what has been open too long.
  Clock::TimePoint oldest = now;
  uint64_t stuckIds = 0;
  const Hole* stuck = nullptr;
  uint64_t stuckFirst = 0;
  for (const auto& [first, hole] : holes_) {
    oldest = std::min(oldest, hole.found);
    if (now - hole.found >= kPinAfter && !coveredByPin(first, hole.last, mark)) {
      mark.pin.push_back(IdRange{first, hole.last});
    }
    if (now - hole.found >= kStuckAfter) {
      stuckIds += hole.open;  // a span: its open ids, not the published rows it covers
      if (stuck == nullptr || hole.found < stuck->found) {
        stuck = &hole;
        stuckFirst = first;
      }
    }
  }
  oldestHoleAge_ = std::chrono::duration_cast<std::chrono::milliseconds>(now - oldest);
  // A recorded range with no open id left (its rows versioned, quarantined or never used), or
  // inside a span recorded from another first id (its holes were folded into it).
  for (const auto& [first, last] : pins_) {
    const bool open = holes_.overlaps(first, last);
    auto in = holes_.holding(first);
    const bool folded = in != holes_.end() && in->second.span && in->first != first && in->second.last >= last &&
                        coveredByPin(in->first, in->second.last, mark);
    if (!open || folded) mark.unpin.push_back(first);
  }
  mark.floor = floorWithout(batch.rows, mark);
  if (stuck != nullptr && now - lastStuckLog_ >= kStuckAfter) {
    lastStuckLog_ = now;
    const auto age = std::chrono::duration_cast<std::chrono::seconds>(now - stuck->found);
    // Who may hold them: the transactions open since before the oldest was found.
    auto holders = store_.openTransactionsOlderThan(age);
    std::string heldBy = !holders.isOk() ? "(who holds them could not be read: " + holders.status().message() + ")"
                         : holders->empty() ? "no transaction that old is open: a statement that began before they "
                                              "were found still runs"
                                            : "open since before: " + *holders;
    log_->warn("scan: {} ids have been open holes for over {} s, the oldest ({}..{}) for {} s; {}. Rows committed "
                 "after them are published meanwhile; theirs will be when they commit",
                 stuckIds, kStuckAfter.count(), stuckFirst, stuck->last, age.count(), heldBy);
  }
}

bool Scanner::coveredByPin(uint64_t first, uint64_t last, const ScanMark& mark) const {
  auto it = pins_.upper_bound(first);
  if (it != pins_.begin() && std::prev(it)->second >= last) return true;
  // mark.pin is ascending and disjoint: only the last range starting at or below `first` can cover it.
  auto pin = std::upper_bound(mark.pin.begin(), mark.pin.end(), first,
                              [](uint64_t id, const IdRange& r) { return id < r.first; });
  return pin != mark.pin.begin() && std::prev(pin)->last >= last;
}

uint64_t Scanner::floorWithout(const std::vector<OutboxRow>& assigned, const ScanMark& mark) const {
  // The floor is below the lowest open id the batch does not version and no recorded range
  // covers. Rows are in id order.
  size_t i = 0;
  for (const auto& [first, hole] : holes_) {
    if (coveredByPin(first, hole.last, mark)) continue;
    uint64_t id = first;
    while (i < assigned.size() && assigned[i].id < id) ++i;
    while (id <= hole.last && i < assigned.size() && assigned[i].id == id) {
      ++id;
      ++i;
    }
    if (id <= hole.last) return id - 1;
  }
  return cursor_;
}

Status Scanner::checkAutoIncrement() {
  auto next = store_.nextAutoId();
  if (!next.isOk()) return next.status();
  lastAutoIncrementCheck_ = clock_.now();
  if (!*next || **next > cursor_) return Status::ok();
  return Status::permanent(fmt::format(
      "the outbox table's AUTO_INCREMENT ({}) is not above the scan cursor ({}): new rows would take ids the scan "
      "has passed and never be published (was the table truncated, recreated or restored?). Rows inserted since "
      "with ids up to {} need inserting again; then ALTER TABLE <outbox table> AUTO_INCREMENT = {} and the source "
      "resumes by itself",
      **next, cursor_, cursor_, cursor_ + 1));
}


}  // namespace outbox

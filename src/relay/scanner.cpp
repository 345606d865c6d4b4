#include "relay/scanner.h"

#include <algorithm>
#include <iterator>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace outbox {

Scanner::Scanner(OutboxStore& store, const Clock& clock) : store_(store), clock_(clock) {}

Status Scanner::reset(const SourceState& state) {
  valid_ = false;
  holes_.clear();
  epoch_ = state.epoch;
  if (!state.scanCursor) {
    auto floor = store_.initialFloor();
    if (!floor.isOk()) return floor.status();
    cursor_ = *floor;
    recorded_ = ScanMark{};  // nothing recorded yet: the first poll records where it stands
  } else {
    cursor_ = *state.scanCursor;
    const uint64_t floor = std::min(state.scanFloor.value_or(0), cursor_);
    auto ids = store_.unresolved(floor, cursor_);
    if (!ids.isOk()) return ids.status();
    const auto now = clock_.now();
    for (uint64_t id : *ids) holes_.emplace(id, Hole{now, nullptr});
    recorded_ = ScanMark{cursor_, floor};
  }
  valid_ = true;
  return Status::ok();
}

Result<Scanner::Batch> Scanner::next(int limit) {
  const auto now = clock_.now();
  const bool readBusy = !holes_.empty() && now - lastBusyRead_ >= kBusyReadSpacing;
  // (1) new rows, then (2) the connections inside a statement.
  auto read = store_.readNew(cursor_, limit, readBusy);
  if (!read.isOk()) return read.status();
  if (read->epoch && *read->epoch != epoch_) {
    valid_ = false;
    return Status::transient(fmt::format("the source moved to epoch {} (an epoch bump): scanning again from its scan "
                                         "floor",
                                         *read->epoch));
  }
  if (readBusy) lastBusyRead_ = now;
  Batch batch;
  batch.newRead = read->rows.size();
  for (auto& r : read->rows) {
    for (uint64_t id = cursor_ + 1; id < r.row.id; ++id) holes_.emplace(id, Hole{now, nullptr});
    cursor_ = r.row.id;
    if (!r.versioned && !r.quarantined) batch.rows.push_back(std::move(r.row));
  }

  // (2) The reading narrows each hole's suspects to the connections inside a statement now: one
  // seen between statements (or gone) after the hole was found has finished the statement that
  // could have taken its id. A hole with no suspect left may have died.
  std::vector<uint64_t> mayBeDead;
  if (read->busy) {
    const std::vector<uint64_t>& busy = read->busy->busy;  // ascending
    std::map<const std::vector<uint64_t>*, std::shared_ptr<const std::vector<uint64_t>>> narrowed;
    auto everyone = std::make_shared<const std::vector<uint64_t>>(busy);
    for (auto& [id, hole] : holes_) {
      if (!hole.holders) {
        hole.holders = everyone;  // found before this reading: its suspects are the busy ones
      } else if (!hole.holders->empty()) {
        auto& next = narrowed[hole.holders.get()];
        if (!next) {
          auto still = std::make_shared<std::vector<uint64_t>>();
          std::set_intersection(hole.holders->begin(), hole.holders->end(), busy.begin(), busy.end(),
                                std::back_inserter(*still));
          next = std::move(still);
        }
        hole.holders = next;
      }
      if (hole.holders->empty()) mayBeDead.push_back(id);
    }
  }

  // (3) the holes, by id, in a fresh consistent read: a visible one committed late. Read in id
  // order and only until a batch's worth is found: the rest waits for the next poll.
  if (!holes_.empty()) {
    std::vector<uint64_t> ids;
    ids.reserve(holes_.size());
    for (const auto& [id, hole] : holes_) ids.push_back(id);
    std::set<uint64_t> seen;
    size_t late = 0, probed = 0;
    for (size_t i = 0; i < ids.size() && late < static_cast<size_t>(limit); i += kProbeChunk) {
      std::vector<uint64_t> chunk(ids.begin() + static_cast<long>(i),
                                  ids.begin() + static_cast<long>(std::min(ids.size(), i + kProbeChunk)));
      auto visible = store_.readIds(chunk);
      if (!visible.isOk()) return visible.status();
      probed = i + chunk.size();
      for (auto& r : *visible) {
        seen.insert(r.row.id);
        if (r.versioned || r.quarantined) {
          holes_.erase(r.row.id);  // resolved (an operator quarantined it, or a scan before us)
        } else {
          batch.rows.push_back(std::move(r.row));
          ++late;
        }
      }
    }
    if (probed < ids.size()) batch.newRead = static_cast<size_t>(limit);  // more late rows may wait
    // A hole found held (its transaction's row is locked) is probed again at most every kHeldReprobe:
    // when it commits, (3) sees it; only a rollback needs the probe.
    std::erase_if(mayBeDead, [&](uint64_t id) {
      if (seen.count(id) > 0) return true;
      auto it = holes_.find(id);
      return it == holes_.end() || now < it->second.probeAfter;
    });
    if (!mayBeDead.empty()) {
      auto dead = store_.unheld(mayBeDead);
      if (!dead.isOk()) return dead.status();
      for (uint64_t id : *dead) holes_.erase(id);
      for (uint64_t id : mayBeDead) {
        if (auto it = holes_.find(id); it != holes_.end()) it->second.probeAfter = now + kHeldReprobe;
      }
      if (!dead->empty()) {
        spdlog::debug("scan: {} open holes resolved as never committed (ids {}..{}); {} still open", dead->size(),
                      dead->front(), dead->back(), holes_.size());
      }
    }
  }
  std::sort(batch.rows.begin(), batch.rows.end(), [](const OutboxRow& a, const OutboxRow& b) { return a.id < b.id; });
  batch.mark = ScanMark{cursor_, floorWithout(batch.rows)};
  // Late rows come on top of up to `limit` new ones: keep a batch to `limit` rows (memory, the
  // statement's size); the rest stay visible holes, taken in id order by the next polls.
  if (batch.rows.size() > static_cast<size_t>(limit)) {
    cutAt(batch, batch.rows[static_cast<size_t>(limit)].id);
    batch.newRead = static_cast<size_t>(limit);  // a full batch: poll again at once
  }
  return batch;
}

void Scanner::cutAt(Batch& batch, uint64_t stopAt) {
  auto first = std::find_if(batch.rows.begin(), batch.rows.end(), [&](const OutboxRow& r) { return r.id >= stopAt; });
  const auto now = clock_.now();
  for (auto it = first; it != batch.rows.end(); ++it) holes_.emplace(it->id, Hole{now, nullptr});
  batch.rows.erase(first, batch.rows.end());
  batch.mark.floor = floorWithout(batch.rows);
}

void Scanner::committed(const Batch& batch) {
  for (const auto& r : batch.rows) holes_.erase(r.id);
  recorded_ = batch.mark;
}

uint64_t Scanner::floorWithout(const std::vector<OutboxRow>& assigned) const {
  // Rows are in id order: walk the holes from the lowest, skipping those the batch versions.
  size_t i = 0;
  for (const auto& [id, hole] : holes_) {
    while (i < assigned.size() && assigned[i].id < id) ++i;
    if (i < assigned.size() && assigned[i].id == id) continue;
    return id - 1;
  }
  return cursor_;
}

std::chrono::milliseconds Scanner::oldestHoleAge() const {
  if (holes_.empty()) return std::chrono::milliseconds(0);
  auto oldest = holes_.begin()->second.found;
  for (const auto& [id, hole] : holes_) oldest = std::min(oldest, hole.found);
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_.now() - oldest);
}

}  // namespace outbox

#include "relay/scanner.h"

#include <algorithm>
#include <set>

namespace outbox {

Scanner::Scanner(OutboxStore& store, const Clock& clock) : store_(store), clock_(clock) {}

Status Scanner::reset(const SourceState& state) {
  valid_ = false;
  holes_.clear();
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
  const bool readTrx = !holes_.empty() && now - lastTrxRead_ >= kTrxReadSpacing;
  // (1) new rows, and (2) INNODB_TRX in the same snapshot.
  auto read = store_.readNew(cursor_, limit, readTrx);
  if (!read.isOk()) return read.status();
  if (readTrx) lastTrxRead_ = now;
  Batch batch;
  batch.newRead = read->rows.size();
  for (auto& r : read->rows) {
    for (uint64_t id = cursor_ + 1; id < r.row.id; ++id) holes_.emplace(id, Hole{now, nullptr});
    cursor_ = r.row.id;
    if (!r.versioned && !r.quarantined) batch.rows.push_back(std::move(r.row));
  }

  // A fresh reading tags every hole found before it with the transactions that may hold it, and
  // names the holes none of whose holders is inside a statement: they may have died.
  std::vector<uint64_t> mayBeDead;
  if (read->trx && read->trx->fresh && !holes_.empty()) {
    const std::set<uint64_t> busy(read->trx->inStatement.begin(), read->trx->inStatement.end());
    std::shared_ptr<const std::vector<uint64_t>> everyone;
    for (auto& [id, hole] : holes_) {
      if (!hole.holders) {
        if (!everyone) {
          auto all = std::make_shared<std::vector<uint64_t>>(read->trx->inStatement);
          all->insert(all->end(), read->trx->idle.begin(), read->trx->idle.end());
          everyone = std::move(all);
        }
        hole.holders = everyone;
      }
      if (std::none_of(hole.holders->begin(), hole.holders->end(), [&](uint64_t t) { return busy.count(t) > 0; })) {
        mayBeDead.push_back(id);
      }
    }
  }

  // (3) the holes, by id, in a fresh consistent read: a visible one committed late.
  if (!holes_.empty()) {
    std::vector<uint64_t> ids;
    ids.reserve(holes_.size());
    for (const auto& [id, hole] : holes_) ids.push_back(id);
    auto visible = store_.readIds(ids);
    if (!visible.isOk()) return visible.status();
    std::set<uint64_t> seen;
    for (auto& r : *visible) {
      seen.insert(r.row.id);
      if (r.versioned || r.quarantined) {
        holes_.erase(r.row.id);  // resolved (an operator quarantined it, or a scan before us)
      } else {
        batch.rows.push_back(std::move(r.row));
      }
    }
    std::erase_if(mayBeDead, [&](uint64_t id) { return seen.count(id) > 0; });
    if (!mayBeDead.empty()) {
      auto dead = store_.unheld(mayBeDead);
      if (!dead.isOk()) return dead.status();
      for (uint64_t id : *dead) holes_.erase(id);
    }
  }
  std::sort(batch.rows.begin(), batch.rows.end(), [](const OutboxRow& a, const OutboxRow& b) { return a.id < b.id; });
  batch.mark = ScanMark{cursor_, floorWithout(batch.rows)};
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

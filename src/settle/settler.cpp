#include "settle/settler.h"

#include <algorithm>

namespace outbox {

Settler::Settler(Options options) : options_(options) {
  // check-config refuses these; a settler made otherwise still keeps its promises.
  options_.maxKeys = std::max<size_t>(options_.maxKeys, 1);
  options_.settleMax = std::max(options_.settleMax, options_.settle);
}

void Settler::restart(uint64_t through) {
  pending_.clear();
  byFrom_.clear();
  byDue_.clear();
  ready_.clear();
  settledAbove_.clear();
  settledAboveMax_ = 0;
  inFlight_.clear();
  seen_ = through;
}

void Settler::alreadySettled(const SettleKey& key, uint64_t version) {
  if (version <= seen_) return;  // nothing after restart's `through` to leave out
  uint64_t& above = settledAbove_[key];
  above = std::max(above, version);
  settledAboveMax_ = std::max(settledAboveMax_, version);
}

Clock::TimePoint Settler::dueOf(const Pending& p) const {
  return std::min(p.last + options_.settle, p.first + options_.settleMax);
}

void Settler::changed(const SettleKey& key, uint64_t version, MainMessage message,
                      Clock::TimePoint at) {
  if (version <= seen_) return;
  if (ready_.empty()) readyAt_ = at;
  // Keys quiet since before `at` settle before this change is taken: a change that comes after a
  // key's due time starts its next message even when due() was not asked in between (a replay,
  // a busy settle thread).
  while (!byDue_.empty() && byDue_.begin()->first <= at) {
    ready_.push_back(take(byFrom_.at(byDue_.begin()->second), /*early=*/false));
  }
  seen_ = version;
  if (!settledAbove_.empty()) {
    auto settled = settledAbove_.find(key);
    const bool standsFor = settled != settledAbove_.end() && version <= settled->second;
    // Past the highest version the settled tail holds, nothing more can be left out.
    if (seen_ >= settledAboveMax_) settledAbove_.clear();
    if (standsFor) {
      counters_.alreadySettled++;
      return;
    }
  }
  // Kept for up to settle_max: no room left over from building it (a block built by appends has
  // up to twice its size).
  message.headers.shrink_to_fit();
  auto [it, added] = pending_.try_emplace(key);
  Pending& p = it->second;
  if (!added) {
    byDue_.erase({p.due, p.from});
    p.latest = version;
    p.count++;
    p.last = std::max(p.last, at);
    p.message = std::move(message);
    p.due = dueOf(p);
    byDue_.emplace(p.due, p.from);
    return;
  }
  p.from = p.latest = version;
  p.count = 1;
  p.first = p.last = at;
  p.message = std::move(message);
  p.due = dueOf(p);
  byFrom_.emplace(p.from, &*it);
  byDue_.emplace(p.due, p.from);
  // Bounded memory: the oldest pending key (the lowest first version) goes now, whatever its due
  // time. It is the key holding through() lowest, so through() moves on with it.
  while (pending_.size() > options_.maxKeys) {
    ready_.push_back(take(byFrom_.begin()->second, /*early=*/true));
    counters_.settledEarly++;
  }
}

Settled Settler::take(Map::value_type* entry, bool early) {
  Pending& p = entry->second;
  byDue_.erase({p.due, p.from});
  byFrom_.erase(p.from);
  Settled s;
  s.key = entry->first;
  s.version = p.latest;
  s.from = p.from;
  s.count = p.count;
  s.seen = seen_;
  s.early = early;
  s.lastChange = p.last;
  s.message = std::move(p.message);
  pending_.erase(pending_.find(s.key));
  // After the key is out: this message stands for its changes, and every message before it on
  // the settled stream is stored before it is (the publishes are fenced on one another).
  s.through = through();
  inFlight_[s.version] = s.lastChange;
  counters_.settled++;
  counters_.squashed += s.count - 1;
  return s;
}

std::vector<Settled> Settler::due(Clock::TimePoint now) {
  std::vector<Settled> out = std::move(ready_);
  ready_.clear();
  while (!byDue_.empty() && byDue_.begin()->first <= now) {
    out.push_back(take(byFrom_.at(byDue_.begin()->second), /*early=*/false));
  }
  return out;
}

std::optional<Clock::TimePoint> Settler::nextDue() const {
  if (!ready_.empty()) return readyAt_;  // already due: no later than the change that took them out
  if (byDue_.empty()) return std::nullopt;
  return byDue_.begin()->first;
}

std::optional<std::chrono::nanoseconds> Settler::published(uint64_t version, Clock::TimePoint now) {
  auto it = inFlight_.find(version);
  if (it == inFlight_.end()) return std::nullopt;
  auto delay = now - it->second;
  inFlight_.erase(it);
  return std::chrono::duration_cast<std::chrono::nanoseconds>(delay);
}

uint64_t Settler::through() const { return byFrom_.empty() ? seen_ : byFrom_.begin()->first - 1; }

}  // namespace outbox

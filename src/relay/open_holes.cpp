#include "relay/open_holes.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

namespace outbox {

OpenHoles::Entries::const_iterator OpenHoles::holding(uint64_t id) const {
  auto it = entries_.upper_bound(id);
  if (it == entries_.begin() || std::prev(it)->second.last < id) return entries_.end();
  return std::prev(it);
}

bool OpenHoles::overlaps(uint64_t first, uint64_t last) const {
  auto it = entries_.upper_bound(last);
  return it != entries_.begin() && std::prev(it)->second.last >= first;
}

void OpenHoles::open(IdRange ids, Clock::TimePoint found) {
  auto add = [&](uint64_t first, uint64_t last) {
    entries_.emplace(first, Hole{last, found, nullptr, {}, ids.span, last - first + 1});
    openIds_ += last - first + 1;
  };
  // Only ids not open already (a late row cut from a batch is still inside its hole).
  auto it = entries_.upper_bound(ids.first);
  if (it != entries_.begin()) {
    auto before = std::prev(it);
    if (before->second.last >= ids.first) {
      if (before->second.last >= ids.last) return;
      ids.first = before->second.last + 1;
    }
  }
  while (it != entries_.end() && it->first <= ids.last) {
    if (it->first > ids.first) add(ids.first, it->first - 1);
    ids.first = it->second.last + 1;
    if (ids.first > ids.last) return;
    ++it;
  }
  add(ids.first, ids.last);
}

void OpenHoles::close(IdRange ids) {
  auto it = entries_.upper_bound(ids.first);
  if (it != entries_.begin()) --it;
  while (it != entries_.end() && it->first <= ids.last) {
    const uint64_t first = it->first;
    const Hole hole = it->second;
    if (hole.last < ids.first) {
      ++it;
      continue;
    }
    it = entries_.erase(it);
    // What is left of it keeps what it knew; a span's open ids are shared out by size.
    const uint64_t size = hole.last - first + 1;
    auto keep = [&](uint64_t from, uint64_t to) {
      Hole piece = hole;
      piece.last = to;
      const uint64_t n = to - from + 1;
      const double share =
          std::ceil(static_cast<double>(hole.open) * static_cast<double>(n) / static_cast<double>(size));
      // A span's piece counts at least one: what the probes have not proven dead may be held.
      piece.open = !hole.span ? n : std::clamp<uint64_t>(static_cast<uint64_t>(share), 1, n);
      openIds_ += piece.open;
      return entries_.emplace(from, piece).first;
    };
    openIds_ -= hole.open;
    if (first < ids.first) keep(first, ids.first - 1);
    if (hole.last > ids.last) {
      keep(ids.last + 1, hole.last);
      return;
    }
  }
}

void OpenHoles::resolve(uint64_t id) {
  auto it = entries_.upper_bound(id);
  if (it == entries_.begin() || std::prev(it)->second.last < id) return;
  Hole& hole = std::prev(it)->second;
  if (!hole.span) {
    close(IdRange{id, id});
    return;
  }
  // A span counts at least one open id until its probe proves it dead (its count is shared out
  // by size when it is cut, so it may be below what it holds).
  if (hole.open > 1) {
    --hole.open;
    --openIds_;
  }
  // Its probe may have met this row, committed and not yet versioned: it may be dead now.
  hole.probeAfter = {};
}

OpenHoles::Entries::iterator OpenHoles::absorb(Entries::iterator into) {
  auto next = std::next(into);
  Hole& span = into->second;
  const Hole& hole = next->second;
  span.last = hole.last;
  span.found = std::min(span.found, hole.found);
  span.probeAfter = std::max(span.probeAfter, hole.probeAfter);
  span.quietAfter = std::max(span.quietAfter, hole.quietAfter);
  span.open += hole.open;
  span.span = true;
  return entries_.erase(next);
}

std::string OpenHoles::broken() const {
  uint64_t sum = 0;
  const Entries::value_type* before = nullptr;
  for (const auto& entry : entries_) {
    const auto& [first, hole] = entry;
    if (hole.last < first) return fmt::format("{}..{} ends before it begins", first, hole.last);
    if (before != nullptr && first <= before->second.last) {
      return fmt::format("{}..{} overlaps {}..{}", first, hole.last, before->first, before->second.last);
    }
    const uint64_t size = hole.last - first + 1;
    if (!hole.span && hole.open != size) {
      return fmt::format("hole {}..{} counts {} open ids of {}", first, hole.last, hole.open, size);
    }
    if (hole.span && (hole.open < 1 || hole.open > size)) {
      return fmt::format("span {}..{} counts {} open ids: not within 1..{}", first, hole.last, hole.open, size);
    }
    sum += hole.open;
    before = &entry;
  }
  if (sum != openIds_) return fmt::format("{} open ids counted, {} in the entries", openIds_, sum);
  return "";
}

}  // namespace outbox

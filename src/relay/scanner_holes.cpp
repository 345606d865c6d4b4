// The Scanner's open holes: which fold into spans, their suspects, the probes for quiet spans.
// The bookkeeping (opening, closing, resolving ids, its invariants) is OpenHoles'
// (open_holes.cpp); the poll that uses them is in scanner.cpp.
#include <algorithm>
#include <iterator>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "relay/scanner.h"

namespace outbox {

Scanner::Suspects Scanner::narrow(const Suspects& suspects, const ConnectionReading& reading) {
  // Server time since the tagging reading, by one user lock's age read twice, each rounded down.
  std::optional<std::chrono::milliseconds> sinceTagged;
  Suspects still{{}, suspects.taggedAt};
  if (suspects.taggedAt && reading.clock && reading.clock->connection == suspects.taggedAt->connection &&
      reading.clock->age >= suspects.taggedAt->age) {
    sinceTagged = reading.clock->age - suspects.taggedAt->age;
  } else if (reading.clock) {
    // No clock at the tagging, or another one now (a reconnect; the same id after a server
    // restart reads younger): this reading's clock read, after the ids were taken too, is the
    // reference from now on.
    still.taggedAt = reading.clock;
  }
  size_t i = 0;
  for (uint64_t id : suspects.ids) {
    while (i < reading.busy.size() && reading.busy[i] < id) ++i;
    if (i == reading.busy.size() || reading.busy[i] != id) continue;  // between statements, or not writing
    // Its oldest writer's lock, taken at (this reading's clock read) - writingFor - 1 ms or later,
    // after the tagging reading's clock read (before tagging + 1 ms, itself after the ids were
    // taken) when writingFor + 2 ms < sinceTagged: it began writing after them.
    const auto writing = i < reading.writingFor.size() ? reading.writingFor[i] : ConnectionReading::kUnknown;
    if (sinceTagged && writing != ConnectionReading::kUnknown && writing + kLockAgeRounding < *sinceTagged) continue;
    still.ids.push_back(id);
  }
  return still;
}

std::shared_ptr<const Scanner::Suspects> Scanner::joined(const std::shared_ptr<const Suspects>& a,
                                                         const std::shared_ptr<const Suspects>& b) {
  if (a == b) return a;
  Suspects both;
  std::set_union(a->ids.begin(), a->ids.end(), b->ids.begin(), b->ids.end(), std::back_inserter(both.ids));
  // A connection is retired by a reading after the tagging of every hole it may hold, and by a
  // lock younger than the time since the later tagging: that one's clock, when both read the same.
  if (a->taggedAt && b->taggedAt && a->taggedAt->connection == b->taggedAt->connection) {
    both.taggedAt = a->taggedAt->age >= b->taggedAt->age ? a->taggedAt : b->taggedAt;
  }
  if (both.ids == a->ids && both.taggedAt == a->taggedAt) return a;
  if (both.ids == b->ids && both.taggedAt == b->taggedAt) return b;
  return std::make_shared<const Suspects>(std::move(both));
}

std::string Scanner::notQuiet(const Statements& quiet, const ConnectionReading& reading) {
  if (!reading.numbered || reading.statements.size() != reading.busy.size()) return "statements not numbered";
  for (const auto& [connection, query] : quiet) {
    auto at = std::lower_bound(reading.busy.begin(), reading.busy.end(), connection);
    if (at == reading.busy.end() || *at != connection) {
      return fmt::format("connection {} between statements, or gone", connection);
    }
    const auto& now = reading.statements[static_cast<size_t>(at - reading.busy.begin())];
    if (now.query != query) return fmt::format("connection {} in another statement", connection);
    if (!now.executing) return fmt::format("connection {} past its statement's execution", connection);
  }
  return {};
}

std::shared_ptr<const Scanner::Statements> Scanner::steady(const Suspects& suspects,
                                                          const ConnectionReading& reading) const {
  Statements out;
  for (uint64_t connection : suspects.ids) {
    auto before =
        std::lower_bound(lastStatements_.begin(), lastStatements_.end(), std::make_pair(connection, uint64_t{0}));
    if (before == lastStatements_.end() || before->first != connection) return nullptr;
    out.push_back(*before);
  }
  if (out.empty() || !notQuiet(out, reading).empty()) return nullptr;
  return std::make_shared<const Statements>(std::move(out));
}

Status Scanner::probeQuiet(const std::vector<QuietCandidate>& candidates, Clock::TimePoint now) {
  for (const QuietCandidate& c : candidates) {
    // After (3): the probe also sees the late rows (3) read, not versioned yet (not clear).
    auto it = holes_.find(c.first);
    if (it == holes_.end() || it->second.last != c.last || !it->second.span) continue;
    auto clear = store_.spanClear(IdRange{c.first, c.last, true});
    if (!clear.isOk()) return clear.status();
    Hole& hole = it->second;
    if (*clear) {
      hole.quiet = c.statements;
      log_->debug("scan: span {}..{} quiet while {} statement(s) run", c.first, c.last, c.statements->size());
    } else {
      using Duration = Clock::TimePoint::duration;
      hole.quietAfter = now + std::max<Duration>(kHeldReprobe, (now - hole.found) / kSpanReprobeShare);
    }
  }
  return Status::ok();
}

size_t Scanner::quietRanges() const {
  return static_cast<size_t>(
      std::count_if(holes_.begin(), holes_.end(), [](const auto& e) { return e.second.quiet != nullptr; }));
}

void Scanner::fold(Clock::TimePoint now) {
  // Only holes some reading tagged whose suspects still run: a hole with none left is being
  // probed on its own, and a span keeps its holes' suspects (either's, joined()) until a later
  // reading retires them. The published rows between them join the span, resolved by their
  // versions; its late rows are read as before.
  // Never the holes this poll found: the rows between them are this poll's new rows, not
  // versioned yet, which a span's read would return again.
  const bool crowded = holes_.size() > kMostHoles;
  auto foldable = [&](const Hole& h) {
    return h.holders && !h.holders->ids.empty() && h.found < now &&
           (h.span || crowded || now - h.found >= kFoldAfter);
  };
  // Only holes a few rows apart (one-id holes beside each row): a span's read costs its rows, so
  // two holes with many rows between them (the ends of two bulk INSERTs) stay two ranges. Crowded,
  // the nearest pairs are folded too, until half the bound is left, none more than kCrowdedFoldGap
  // ids apart: a row held for days far below stays its own range, however many holes are open.
  uint64_t crowdedGap = 0;
  if (crowded) {
    std::vector<uint64_t> gaps;
    for (auto it = holes_.begin(), next = std::next(it); next != holes_.end(); it = next++) {
      if (foldable(it->second) && foldable(next->second)) gaps.push_back(next->first - it->second.last - 1);
    }
    if (!gaps.empty()) {
      const size_t k = std::min(holes_.size() - kMostHoles / 2, gaps.size()) - 1;
      std::nth_element(gaps.begin(), gaps.begin() + static_cast<long>(k), gaps.end());
      crowdedGap = std::min(gaps[k], kCrowdedFoldGap);
    }
  }
  // A span sealed (kSealAfter) takes no hole found after it, so that it may become quiet while the
  // holes after it make a span of their own; two quiet ones are folded when each of their
  // connections runs the same statement in both (they are read again together); two that are not
  // quiet kPinAfter after their first hole are (they will not be soon); crowded, any but quiet.
  auto sealed = [&](const Hole& h) { return numbered_ && h.span && now - h.found >= kSealAfter; };
  auto stale = [&](const Hole& h) { return sealed(h) && now - h.found >= kPinAfter; };
  auto alike = [&](const Hole& a, const Hole& b) {
    if (a.quiet || b.quiet) {
      if (!a.quiet || !b.quiet) return false;
      for (const auto& statement : *b.quiet) {
        auto same = std::lower_bound(a.quiet->begin(), a.quiet->end(), std::make_pair(statement.first, uint64_t{0}));
        if (same != a.quiet->end() && same->first == statement.first && same->second != statement.second) return false;
      }
      return true;
    }
    return crowded || (!sealed(a) && !sealed(b)) || (stale(a) && stale(b));
  };
  auto near = [&](const Hole& before, uint64_t first) {
    const uint64_t gap = first - before.last - 1;
    return gap <= kFoldGap || gap <= crowdedGap;
  };
  auto fits = [&](const Hole& into, OpenHoles::Entries::iterator next) {
    return next != holes_.end() && foldable(next->second) && near(into, next->first) && alike(into, next->second);
  };
  for (auto it = holes_.begin(); it != holes_.end();) {
    auto next = std::next(it);
    if (!foldable(it->second) || !fits(it->second, next)) {
      it = next;
      continue;
    }
    Hole& into = it->second;
    // Whether the next one fits is asked of `into` as it was (a span or not) with what it took.
    const bool wasSpan = into.span;
    auto asItWas = [&] {
      Hole h = into;
      h.span = wasSpan;
      return h;
    };
    while (fits(asItWas(), next)) {
      const Hole& hole = next->second;
      into.holders = joined(into.holders, hole.holders);
      if (into.quiet && hole.quiet && into.quiet != hole.quiet) {
        Statements both;
        std::set_union(into.quiet->begin(), into.quiet->end(), hole.quiet->begin(), hole.quiet->end(),
                       std::back_inserter(both), [](const auto& a, const auto& b) { return a.first < b.first; });
        into.quiet = std::make_shared<const Statements>(std::move(both));
      }
      next = holes_.absorb(it);  // its ids, finding, probe times and open count
    }
    it = next;
  }
}

}  // namespace outbox

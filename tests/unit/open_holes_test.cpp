#define BOOST_TEST_MODULE open_holes
#include <boost/test/unit_test.hpp>

// OpenHoles, the scan's hole bookkeeping (src/relay/open_holes.h): its invariants after every
// operation, and which ids are open, against a plain set of ids.

#include <random>
#include <set>

#include "relay/open_holes.h"

using namespace outbox;

namespace {

const Clock::TimePoint kT0{};

// The ids open in entries that are not spans.
std::set<uint64_t> exactIds(const OpenHoles& holes) {
  std::set<uint64_t> ids;
  for (const auto& [first, hole] : holes) {
    if (hole.span) continue;
    for (uint64_t id = first; id <= hole.last; ++id) ids.insert(id);
  }
  return ids;
}

void requireWhole(const OpenHoles& holes) {
  const std::string broken = holes.broken();
  BOOST_REQUIRE_MESSAGE(broken.empty(), broken);
}

}  // namespace

BOOST_AUTO_TEST_CASE(open_counts_only_ids_not_open_already) {
  OpenHoles holes;
  holes.open(IdRange{10, 19}, kT0);
  holes.open(IdRange{15, 30}, kT0 + std::chrono::seconds(1));  // 20..30 are new
  requireWhole(holes);
  BOOST_TEST(holes.openIds() == 21u);
  BOOST_TEST(holes.size() == 2u);
  BOOST_TEST((holes.holding(19)->first == 10u));
  BOOST_TEST((holes.holding(20)->second.found == kT0 + std::chrono::seconds(1)));  // when it was found
  BOOST_TEST((holes.holding(31) == holes.end()));
  holes.open(IdRange{5, 40}, kT0);  // around both: 5..9 and 31..40
  requireWhole(holes);
  BOOST_TEST(holes.openIds() == 36u);
  BOOST_TEST(holes.overlaps(1, 5));
  BOOST_TEST(!holes.overlaps(41, 50));
}

BOOST_AUTO_TEST_CASE(close_cuts_a_hole_and_its_pieces_keep_what_it_knew) {
  OpenHoles holes;
  holes.open(IdRange{1, 10}, kT0);
  holes.find(1)->second.probeAfter = kT0 + std::chrono::seconds(7);
  holes.close(IdRange{4, 6});
  requireWhole(holes);
  BOOST_TEST(holes.openIds() == 7u);
  BOOST_TEST((holes.holding(7)->second.probeAfter == kT0 + std::chrono::seconds(7)));
  BOOST_TEST((holes.holding(5) == holes.end()));
}

BOOST_AUTO_TEST_CASE(a_span_shares_its_count_by_size_and_never_counts_below_one) {
  OpenHoles holes;
  holes.open(IdRange{1, 100, true}, kT0);
  for (uint64_t id = 1; id <= 90; ++id) holes.resolve(id);  // 10 left
  requireWhole(holes);
  BOOST_TEST(holes.openIds() == 10u);
  holes.close(IdRange{41, 60});  // 80 ids left in two pieces: ceil(10 * 40 / 100) = 4 each
  requireWhole(holes);
  BOOST_TEST(holes.openIds() == 8u);
  for (uint64_t id = 1; id <= 40; ++id) holes.resolve(id);
  requireWhole(holes);
  BOOST_TEST(holes.holding(1)->second.open == 1u);  // until a probe proves it dead
  holes.find(1)->second.probeAfter = kT0 + std::chrono::hours(1);
  holes.resolve(2);
  BOOST_TEST((holes.holding(1)->second.probeAfter == Clock::TimePoint{}));  // probed again at once
}

BOOST_AUTO_TEST_CASE(absorb_folds_the_next_entry_into_a_span) {
  OpenHoles holes;
  holes.open(IdRange{1, 2}, kT0 + std::chrono::seconds(2));
  holes.open(IdRange{10, 12}, kT0 + std::chrono::seconds(1));
  holes.find(10)->second.probeAfter = kT0 + std::chrono::seconds(9);
  auto after = holes.absorb(holes.find(1));
  BOOST_TEST((after == holes.end()));
  requireWhole(holes);
  BOOST_REQUIRE(holes.size() == 1u);
  const Hole& span = holes.begin()->second;
  BOOST_TEST(span.span);
  BOOST_TEST(span.last == 12u);
  BOOST_TEST(span.open == 5u);  // the ids between were published: not counted
  BOOST_TEST((span.found == kT0 + std::chrono::seconds(1)));
  BOOST_TEST((span.probeAfter == kT0 + std::chrono::seconds(9)));
}

// Without spans an entry's ids are all open: the ids match a set the same operations keep.
BOOST_AUTO_TEST_CASE(ten_thousand_random_operations_open_the_ids_a_plain_set_does) {
  std::mt19937_64 random(20261204);
  auto pick = [&](uint64_t most) { return std::uniform_int_distribution<uint64_t>(1, most)(random); };
  OpenHoles holes;
  std::set<uint64_t> model;
  for (int step = 0; step < 10'000; ++step) {
    const uint64_t first = pick(2'000), last = first + pick(50) - 1;
    switch (pick(4)) {
      case 1:
      case 2:
        holes.open(IdRange{first, last}, kT0);
        for (uint64_t id = first; id <= last; ++id) model.insert(id);
        break;
      case 3:
        holes.close(IdRange{first, last});
        model.erase(model.lower_bound(first), model.upper_bound(last));
        break;
      default:
        holes.resolve(first);
        model.erase(first);
    }
    requireWhole(holes);
    BOOST_REQUIRE(holes.openIds() == model.size());
  }
  BOOST_TEST((exactIds(holes) == model));
}

// With spans folded in and cut: every invariant after every operation.
BOOST_AUTO_TEST_CASE(ten_thousand_random_operations_with_spans_keep_every_invariant) {
  std::mt19937_64 random(4122026);
  auto pick = [&](uint64_t most) { return std::uniform_int_distribution<uint64_t>(1, most)(random); };
  OpenHoles holes;
  size_t folds = 0;
  for (int step = 0; step < 10'000; ++step) {
    const uint64_t first = pick(2'000), last = first + pick(50) - 1;
    switch (pick(5)) {
      case 1:
        holes.open(IdRange{first, last, pick(4) == 1}, kT0);
        break;
      case 2:
        holes.close(IdRange{first, last});
        break;
      case 3:
        holes.resolve(first);
        break;
      default: {
        auto held = holes.holding(first);
        if (held == holes.end()) break;
        auto it = holes.find(held->first);
        if (std::next(it) == holes.end()) break;
        holes.absorb(it);
        ++folds;
      }
    }
    requireWhole(holes);
  }
  BOOST_TEST(folds > 100u);
}

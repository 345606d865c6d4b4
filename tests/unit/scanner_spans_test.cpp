#define BOOST_TEST_MODULE scanner_spans
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "scanner_table_store.h"

// Holes a long statement elsewhere may still hold, where the server does not show who writes the
// table (issue 33: no metadata_lock_info, every MySQL): folded into spans, so that what they cost
// stays bounded while no late row is missed (docs/design.md, "Holes that cannot be proven closed").

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

constexpr uint64_t kSleeper = 99;   // a SELECT SLEEP(600): inside a statement throughout
constexpr uint64_t kProducer = 8;   // autocommit INSERTs, ids 3 apart (auto_increment_increment = 3)

// `rows` committed rows with ids 3 apart after `last`; returns the new last id.
uint64_t produce(TableStore& store, uint64_t last, int rows) {
  for (int i = 0; i < rows; ++i) store.insert(last += 3, kProducer, true);
  return last;
}

}  // namespace

// Before, each poll read the holes 1,000 ranges to a statement, and kept one entry per hole: at
// 2,000 rows/s beside a SELECT SLEEP(600), p99 went past a second and RSS from 15 to 37 MiB within
// a minute. Now every poll reads them in one statement, and their entries stay few however many
// ids are open; a row held open inside the old ones is found when it commits, before the new
// rows of that poll; once the long statement ends, they die.
BOOST_AUTO_TEST_CASE(one_id_holes_beside_a_long_statement_cost_one_statement_and_few_entries) {
  Fixture f;
  f.store.busy = {kSleeper};
  f.store.insert(2, 7, false);  // an open transaction's row, between statements, in an old hole
  uint64_t last = 1;
  f.store.insert(last, kProducer, true);
  std::vector<uint64_t> published;
  size_t mostEntries = 0;
  for (int poll = 0; poll < 400; ++poll) {  // 20 s of polls, 20 rows each
    last = produce(f.store, last, 20);
    const int reads = f.store.rangeReads;
    auto ids = f.poll(500);
    published.insert(published.end(), ids.begin(), ids.end());
    if (poll > 0) BOOST_TEST(f.store.rangeReads - reads == 1);  // one statement, whatever their number
    mostEntries = std::max(mostEntries, f.scanner.holeRanges());
  }
  const uint64_t rows = (last - 1) / 3 + 1;
  BOOST_TEST(f.scanner.openHoles() == 2 * (rows - 1));  // every gap open: 16,000 ids
  BOOST_TEST(mostEntries <= 150u);                       // the young ones, and a span
  BOOST_TEST(f.scanner.recorded().floor + 600 >= last);  // the span is recorded, not each hole
  BOOST_TEST(f.store.pinnedTable.size() <= 2u);

  // The held row commits: the next poll has it, first, with the new rows after it.
  f.store.commit(7);
  last = produce(f.store, last, 5);
  auto ids = f.poll(500);
  BOOST_TEST_REQUIRE(ids.size() == 6u);
  BOOST_TEST(ids.front() == 2u);
  BOOST_TEST(std::is_sorted(ids.begin(), ids.end()));
  published.insert(published.end(), ids.begin(), ids.end());

  // The long statement ends: nothing may hold the spans' ids any more, and they die.
  f.store.busy.clear();
  for (int poll = 0; poll < 100 && f.scanner.holeRanges() > 0; ++poll) {
    f.clock.advance(1s);
    BOOST_TEST(f.poll().empty());
    // While an entry is left, ids are counted open (a source on the idle check polls for them).
    BOOST_TEST((f.scanner.holeRanges() == 0) == (f.scanner.openHoles() == 0));
  }
  BOOST_TEST(f.scanner.holeRanges() == 0u);
  BOOST_TEST(f.scanner.openHoles() == 0u);
  BOOST_TEST(f.store.pinnedTable.empty());

  // Every committed row once, in id order but the late one.
  std::vector<uint64_t> expected;
  for (uint64_t id = 1; id <= last; id += 3) expected.push_back(id);
  expected.push_back(2);
  std::sort(expected.begin(), expected.end());
  std::sort(published.begin(), published.end());
  BOOST_TEST(published == expected, boost::test_tools::per_element());
}

// A span that a row still held keeps open only around that row once nothing else may hold it; the
// rest dies, and the held row is published when it commits.
BOOST_AUTO_TEST_CASE(a_row_held_inside_a_span_keeps_only_itself_open_when_the_statement_ends) {
  Fixture f;
  f.store.busy = {kSleeper};
  uint64_t last = 1;
  f.store.insert(last, kProducer, true);
  for (int poll = 0; poll < 40; ++poll) {
    last = produce(f.store, last, 20);
    f.poll(500);
  }
  f.store.insert(302, 7, false);  // its id was taken long ago; the row is there, uncommitted
  BOOST_TEST(f.scanner.holeRanges() <= 150u);
  f.store.busy.clear();
  for (int poll = 0; poll < 100 && f.scanner.openHoles() > 1; ++poll) {
    f.clock.advance(1s);
    BOOST_TEST(f.poll().empty());
  }
  BOOST_TEST(f.scanner.openHoles() == 1u);
  f.store.commit(7);
  BOOST_TEST((f.poll() == Ids{302}));
  for (int poll = 0; poll < 100 && f.scanner.holeRanges() > 0; ++poll) {
    f.clock.advance(1s);
    f.poll();
  }
  BOOST_TEST(f.scanner.holeRanges() == 0u);
}

// A restart reads a recorded span as a span: its published rows are not read back one by one, and
// a row without a version in it is still found.
BOOST_AUTO_TEST_CASE(a_restart_reads_a_recorded_span_as_one) {
  Fixture f;
  f.store.busy = {kSleeper};
  uint64_t last = 1;
  f.store.insert(last, kProducer, true);
  for (int poll = 0; poll < 200; ++poll) {
    last = produce(f.store, last, 20);
    f.poll(500);
  }
  f.store.insert(5, 7, true);  // committed late, after the last poll
  SourceState state;
  state.scanCursor = f.scanner.recorded().cursor;
  state.scanFloor = f.scanner.recorded().floor;
  Scanner restarted(f.store, f.clock);
  BOOST_REQUIRE(restarted.reset(state).isOk());
  BOOST_TEST(restarted.holeRanges() <= 150u);
  f.clock.advance(Scanner::kBusyReadSpacing);
  auto batch = restarted.next(500);
  BOOST_REQUIRE(batch.isOk());
  BOOST_TEST_REQUIRE(batch->rows.size() == 1u);  // the late row, not the 4,000 published ones
  BOOST_TEST(batch->rows.front().id == 5u);
}

// Past kMostHoles entries the nearest holes are folded, never across more than kCrowdedFoldGap
// ids: a row held for days far below stays its own range beside thousands of holes of today, so
// neither a poll nor a restart reads the 50,000 published rows between them (review of issue 33:
// "crowded folding ignores distance").
BOOST_AUTO_TEST_CASE(crowded_holes_fold_the_nearest_first_and_never_across_a_far_gap) {
  Fixture f;
  f.store.busy = {kSleeper};
  f.store.insert(1, kProducer, true);
  f.store.insert(2, 7, false);  // held, between statements, its transaction open for days
  for (uint64_t id = 3; id <= 50'002; ++id) f.store.insert(id, kProducer, true);
  while (!f.poll(1000).empty()) {
  }
  // 1,200 one-id holes, 40 ids apart (more than kFoldGap: not folded unless crowded).
  uint64_t last = 50'002;
  for (int hole = 0; hole < 1200; ++hole) {
    for (int i = 0; i < 39; ++i) f.store.insert(++last, kProducer, true);
    ++last;  // never used
  }
  while (!f.poll(1000).empty()) {
  }
  for (int poll = 0; poll < 5; ++poll) f.poll(1000);
  BOOST_TEST(f.scanner.holeRanges() <= Scanner::kMostHoles);       // crowded, then folded
  BOOST_TEST(f.store.spanRowsRead < 50'000u);                      // not the rows below
  BOOST_TEST(f.scanner.openHoles() == 1200u);  // every hole still open (1,199 and the held row)

  SourceState state;
  state.scanCursor = f.scanner.recorded().cursor;
  state.scanFloor = f.scanner.recorded().floor;
  Scanner restarted(f.store, f.clock);
  BOOST_REQUIRE(restarted.reset(state).isOk());
  f.clock.advance(Scanner::kBusyReadSpacing);
  BOOST_REQUIRE(restarted.next(1000).isOk());
  BOOST_TEST(f.store.spanRowsRead < 50'000u);  // a restart reads the recorded ranges, not the rows between
  BOOST_TEST(f.store.unresolvedSpan < 50'000u);
}

// A recorded hole comes back from a restart as one at least kPinAfter old (review of issue 33:
// "reset gives restored holes fresh suspects"): the oldest hole's age does not start again from
// zero, and it is not pinned again.
BOOST_AUTO_TEST_CASE(a_recorded_hole_is_not_new_after_a_restart) {
  Fixture f;
  f.store.insert(1, kProducer, true);
  f.store.insert(2, 7, false);  // held
  f.store.insert(3, kProducer, true);
  f.poll();
  for (int poll = 0; poll < 7; ++poll) {
    f.clock.advance(1s);
    f.poll();
  }
  BOOST_TEST_REQUIRE(f.store.pinnedTable.size() == 1u);
  SourceState state;
  state.scanCursor = f.scanner.recorded().cursor;
  state.scanFloor = f.scanner.recorded().floor;
  Scanner restarted(f.store, f.clock);
  BOOST_REQUIRE(restarted.reset(state).isOk());
  f.clock.advance(Scanner::kBusyReadSpacing);
  auto batch = restarted.next(100);
  BOOST_REQUIRE(batch.isOk());
  BOOST_TEST(batch->mark.pin.empty());
  BOOST_TEST(restarted.oldestHoleAge() >= std::chrono::duration_cast<std::chrono::milliseconds>(Scanner::kPinAfter));
  BOOST_TEST(restarted.openHoles() == 1u);
}

#define BOOST_TEST_MODULE scanner_quiet
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "scanner_table_store.h"

// Quiet spans (docs/design.md, "Quiet spans"): where the server does not show who writes the table
// but MariaDB numbers each statement (QUERY_ID), a span whose suspects each run one statement,
// still executing, and that a locking probe finds clear is not read again until one of those
// statements ends. A SELECT SLEEP(600) beside one-id holes then costs the spans' reads nothing,
// where before each poll read every row published since it began.

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

constexpr uint64_t kSleeper = 99;  // a SELECT SLEEP(600): one statement throughout
constexpr uint64_t kProducer = 8;  // autocommit INSERTs, ids 3 apart (auto_increment_increment = 3)

uint64_t produce(TableStore& store, uint64_t last, int rows) {
  for (int i = 0; i < rows; ++i) store.insert(last += 3, kProducer, true);
  return last;
}

struct Quiet : Fixture {
  Quiet() {
    store.statementsShown = true;
    store.busy = {kSleeper};
    store.queryOf[kSleeper] = 40;
  }
  // One poll; returns its rows' ids, and in `spanRows` the span rows its hole read went through.
  std::vector<uint64_t> pollCounting(uint64_t& spanRows, int limit = 500) {
    store.spanRowsRead = 0;
    auto ids = poll(limit);
    spanRows = store.spanRowsRead;
    return ids;
  }
};

}  // namespace

// 20 s at 400 rows/s beside a SELECT SLEEP(600), an open transaction's row held in the oldest
// span: the spans behind the young ones go quiet and are not read, so what a poll reads stays the
// young span's rows (before: every row since the statement began, 8,000 by the end). The span
// with the held row stays read (it is not clear). A replication applier's thread, or one that ran
// between two readings, turns quiet off. When the statement ends, the spans are read and die;
// every row is published once.
BOOST_AUTO_TEST_CASE(a_long_statement_keeps_its_spans_quiet_and_unread_until_it_ends) {
  Quiet f;
  f.store.insert(2, 7, false);  // between statements, its transaction open
  uint64_t last = 1;
  f.store.insert(last, kProducer, true);
  std::vector<uint64_t> published;
  uint64_t mostLate = 0;
  size_t mostEntries = 0;
  for (int poll = 0; poll < 400; ++poll) {
    last = produce(f.store, last, 20);
    const int readings = f.store.readings;
    uint64_t spanRows = 0;
    auto ids = f.pollCounting(spanRows);
    published.insert(published.end(), ids.begin(), ids.end());
    if (poll >= 100) mostLate = std::max(mostLate, spanRows);
    mostEntries = std::max(mostEntries, f.scanner.holeRanges());
    if (f.scanner.quietRanges() > 0) BOOST_TEST(f.store.readings == readings + 1);  // a reading every poll
  }
  BOOST_TEST(f.scanner.quietRanges() >= 1u);
  // The held row's span (about kSealAfter's rows), the young one and one sealed, not yet quiet.
  BOOST_TEST(mostLate <= 700u);
  BOOST_TEST(mostEntries <= 150u);
  const uint64_t rows = (last - 1) / 3 + 1;
  BOOST_TEST(f.scanner.openHoles() == 2 * (rows - 1));  // every gap still open: none is proven dead

  // An applier thread shows: every span is read again.
  f.store.applierThread = true;
  last = produce(f.store, last, 20);
  uint64_t spanRows = 0;
  auto ids = f.pollCounting(spanRows);
  published.insert(published.end(), ids.begin(), ids.end());
  BOOST_TEST(spanRows >= 7000u);
  BOOST_TEST(f.scanner.quietRanges() == 0u);
  f.store.applierThread = false;
  // Quiet again; then an applier starts, commits and stops between two readings: its position
  // moved, and every span is read again.
  for (int poll = 0; poll < 30; ++poll) {
    last = produce(f.store, last, 20);
    ids = f.pollCounting(spanRows);
    published.insert(published.end(), ids.begin(), ids.end());
  }
  BOOST_TEST(f.scanner.quietRanges() >= 1u);
  f.store.applied = "0-2-17";
  last = produce(f.store, last, 20);
  ids = f.pollCounting(spanRows);
  published.insert(published.end(), ids.begin(), ids.end());
  BOOST_TEST(spanRows >= 7000u);
  BOOST_TEST(f.scanner.quietRanges() == 0u);

  // The held row commits; the long statement ends (between statements): all read, all die.
  f.store.commit(7);
  f.store.busy.clear();
  ids = f.pollCounting(spanRows);
  BOOST_TEST((ids == Ids{2}));
  published.insert(published.end(), ids.begin(), ids.end());
  for (int poll = 0; poll < 100 && f.scanner.holeRanges() > 0; ++poll) {
    f.clock.advance(1s);
    BOOST_TEST(f.poll().empty());
  }
  BOOST_TEST(f.scanner.holeRanges() == 0u);
  std::vector<uint64_t> expected{2};
  for (uint64_t id = 1; id <= last; id += 3) expected.push_back(id);
  std::sort(expected.begin(), expected.end());
  std::sort(published.begin(), published.end());
  BOOST_TEST(published == expected, boost::test_tools::per_element());
}

namespace {

constexpr uint64_t kWriter = 50;  // a long INSERT that took id 302 early and writes its row late

// Polls until some span is quiet (kWriter's id 302 inside one) and returns the last id.
uint64_t quietAroundTheWriter(Quiet& f) {
  f.store.busy = {kSleeper, kWriter};
  f.store.queryOf[kWriter] = 70;
  uint64_t last = 1;
  f.store.insert(last, kProducer, true);
  for (int poll = 0; poll < 60; ++poll) {
    last = produce(f.store, last, 20);
    f.poll(500);
  }
  BOOST_TEST_REQUIRE(f.scanner.quietRanges() >= 1u);
  return last;
}

}  // namespace

// The writer's row comes in while its statement runs (invisible) and commits when it ends: a row
// of the same entity written after that commit is never versioned before it — whether the reading
// finds the writer between statements, in its next statement, or still showing the statement it
// just committed, past its execution (MariaDB's `query end`, `closing tables`, ...).
BOOST_AUTO_TEST_CASE(a_row_committed_into_a_quiet_span_comes_before_what_follows_it) {
  enum class Seen { between, nextStatement, pastExecution };
  for (Seen seen : {Seen::between, Seen::nextStatement, Seen::pastExecution}) {
    BOOST_TEST_CONTEXT("the writer seen " << static_cast<int>(seen)) {
      Quiet f;
      uint64_t last = quietAroundTheWriter(f);
      f.store.insert(302, kWriter, false);  // its reserved id: the row, uncommitted, in a quiet span
      last = produce(f.store, last, 20);
      f.poll(500);
      f.store.commit(kWriter);
      switch (seen) {
        case Seen::between: f.store.busy.erase(kWriter); break;
        case Seen::nextStatement: f.store.nextStatement(kWriter); break;
        case Seen::pastExecution: f.store.ending.insert(kWriter); break;
      }
      const uint64_t after = last + 3;  // the same entity's next change, written after the commit
      last = produce(f.store, last, 1);
      auto ids = f.poll(500);
      BOOST_TEST_REQUIRE(ids.size() == 2u);
      BOOST_TEST(ids[0] == 302u);
      BOOST_TEST(ids[1] == after);
    }
  }
}

// A statement still executing keeps its spans quiet through polls with new rows; they are read
// again the poll after it ends (here: the writer between statements), and go quiet again once
// only the sleeper may hold them.
BOOST_AUTO_TEST_CASE(a_quiet_span_is_read_again_only_when_its_statement_ends) {
  Quiet f;
  uint64_t last = quietAroundTheWriter(f);
  uint64_t spanRows = 0;
  uint64_t mostWhileQuiet = 0;
  for (int poll = 0; poll < 5; ++poll) {
    last = produce(f.store, last, 20);
    f.pollCounting(spanRows);
    mostWhileQuiet = std::max(mostWhileQuiet, spanRows);
  }
  BOOST_TEST(mostWhileQuiet <= 500u);  // the young spans only
  f.store.busy.erase(kWriter);
  last = produce(f.store, last, 20);
  f.pollCounting(spanRows);
  BOOST_TEST(spanRows >= 1000u);  // every span, the quiet ones too
  for (int poll = 0; poll < 40; ++poll) {
    last = produce(f.store, last, 20);
    f.pollCounting(spanRows);
  }
  BOOST_TEST(f.scanner.quietRanges() >= 1u);
  BOOST_TEST(spanRows <= 700u);
}

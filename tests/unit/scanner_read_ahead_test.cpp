#define BOOST_TEST_MODULE scanner_read_ahead
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <vector>

#include "scanner_table_store.h"

// The relay's read-ahead (docs/design.md, "The relay loop"): batch N is read and committed() in
// the scanner, and N+1 read before N's versions are in the table. That is sound only when the
// next poll cannot return N's rows: with no hole open (Scanner::mayReadAhead). Each case below
// read N's rows again in N+1 when the relay read ahead regardless (found by review, 2026-12-04:
// the versions' unique outbox_id then refused N+1's assign and ended the session).

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

constexpr uint64_t kSleeper = 99, kProducer = 8;

uint64_t produce(TableStore& store, uint64_t last, int rows) {
  for (int i = 0; i < rows; ++i) store.insert(last += 3, kProducer, true);
  return last;
}

std::vector<uint64_t> ids(const Scanner::Batch& b) {
  std::vector<uint64_t> out;
  for (const auto& r : b.rows) out.push_back(r.id);
  return out;
}

// N read and taken, not versioned; then, if the scanner allows it, N+1: the rows read twice.
size_t readTwice(Fixture& f, int limit, std::chrono::milliseconds between, bool& readAhead) {
  f.clock.advance(Scanner::kBusyReadSpacing);
  auto n = f.scanner.next(limit);
  BOOST_REQUIRE(n.isOk());
  f.scanner.committed(*n);
  readAhead = f.scanner.mayReadAhead();
  f.clock.advance(between);
  auto n1 = f.scanner.next(limit);
  BOOST_REQUIRE(n1.isOk());
  auto a = ids(*n), b = ids(*n1);
  size_t again = 0;
  for (uint64_t id : a) again += std::find(b.begin(), b.end(), id) != b.end();
  return again;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_backlog_without_holes_may_be_read_ahead_and_no_row_is_read_twice) {
  Fixture f;
  uint64_t last = 0;
  for (int i = 0; i < 40; ++i) f.store.insert(++last, kProducer, true);
  bool readAhead = false;
  BOOST_TEST(readTwice(f, 10, 0ms, readAhead) == 0u);
  BOOST_TEST(readAhead);
}

// A late row committed into an old span (every pinned hole is a span after a restart).
BOOST_AUTO_TEST_CASE(a_late_row_in_a_span_is_not_read_ahead) {
  Fixture f;
  f.store.busy = {kSleeper};
  f.store.insert(2, 7, false);
  uint64_t last = 1;
  f.store.insert(last, kProducer, true);
  for (int poll = 0; poll < 100; ++poll) {
    last = produce(f.store, last, 20);
    f.poll(500);
  }
  f.store.commit(7);
  produce(f.store, last, 30);
  bool readAhead = true;
  BOOST_TEST(readTwice(f, 10, 0ms, readAhead) > 0u);  // what a read-ahead would have done
  BOOST_TEST(!readAhead);
}

// A slow poll N: N+1 folds N's fresh holes into a span over N's rows.
BOOST_AUTO_TEST_CASE(fresh_holes_are_not_read_ahead) {
  Fixture f;
  f.store.busy = {kSleeper};
  uint64_t last = 1;
  f.store.insert(last, kProducer, true);
  for (int poll = 0; poll < 10; ++poll) {
    last = produce(f.store, last, 20);
    f.poll(500);
  }
  produce(f.store, last, 40);
  bool readAhead = true;
  BOOST_TEST(readTwice(f, 20, Scanner::kFoldAfter, readAhead) > 0u);
  BOOST_TEST(!readAhead);
}

// Crowded holes (more entries than the scanner keeps): N's one-id holes folded a millisecond later.
BOOST_AUTO_TEST_CASE(crowded_holes_are_not_read_ahead) {
  Fixture f;
  f.store.busy = {kSleeper};
  uint64_t last = 1;
  f.store.insert(last, kProducer, true);
  f.poll(10);
  produce(f.store, last, 1300);
  bool readAhead = true;
  BOOST_TEST(readTwice(f, 600, 1ms, readAhead) > 0u);
  BOOST_TEST(!readAhead);
}

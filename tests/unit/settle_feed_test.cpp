#define BOOST_TEST_MODULE settle_feed
#include <boost/test/unit_test.hpp>

#include <functional>
#include <thread>

#include "manual_clock.h"
#include "settle/settle_feed.h"

// Issue 36: the relay's feed to its settle thread (docs/design.md, "Where it runs"): bounded,
// never making the relay wait, and saying when a relay session begins and ends.

using namespace outbox;
using namespace std::chrono_literals;

namespace {

std::vector<SettleFeed::Row> rows(uint64_t from, uint64_t through) {
  std::vector<SettleFeed::Row> out;
  for (uint64_t v = from; v <= through; ++v) {
    SettleFeed::Row r;
    r.row.version = v;
    r.epoch = 1;
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<uint64_t> versions(const SettleFeed::Taken& taken) {
  std::vector<uint64_t> out;
  for (const auto& r : taken.rows) out.push_back(r.row.version);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(rows_handed_in_a_session_are_taken_in_order_and_none_outside_one) {
  SettleFeed feed(100);
  feed.hand(rows(1, 5));  // no session: dropped
  feed.begin();
  SettleFeed::Taken first = feed.take(0ms);
  BOOST_TEST(first.session == 1u);
  BOOST_TEST(first.rows.empty());
  feed.hand(rows(6, 8));
  feed.hand(rows(9, 10));
  const std::vector<uint64_t> expected{6, 7, 8, 9, 10};
  BOOST_TEST(versions(feed.take(0ms)) == expected);
  feed.end();
  feed.hand(rows(11, 12));
  SettleFeed::Taken ended = feed.take(0ms);
  BOOST_TEST(ended.session == 0u);
  BOOST_TEST(ended.rows.empty());
  feed.begin();
  BOOST_TEST(feed.take(0ms).session == 2u);
}

BOOST_AUTO_TEST_CASE(past_the_bound_what_waits_is_dropped_and_counted) {
  SettleFeed feed(10);
  feed.begin();
  (void)feed.take(0ms);
  feed.hand(rows(1, 6));
  feed.hand(rows(7, 12));  // 12 would wait: the 6 waiting go
  SettleFeed::Taken taken = feed.take(0ms);
  const std::vector<uint64_t> expected{7, 8, 9, 10, 11, 12};
  BOOST_TEST(versions(taken) == expected);
  BOOST_TEST(taken.dropped == 6u);
  BOOST_TEST(feed.take(0ms).dropped == 0u);
}

BOOST_AUTO_TEST_CASE(a_take_waits_for_rows_a_session_change_or_a_wake) {
  SettleFeed feed(10);
  auto waited = [&](const std::function<void()>& act) {
    std::thread t([&] {
      std::this_thread::sleep_for(50ms);
      act();
    });
    const auto start = std::chrono::steady_clock::now();
    (void)feed.take(5s);
    t.join();
    return std::chrono::steady_clock::now() - start;
  };
  BOOST_TEST((waited([&] { feed.begin(); }) < 2s));
  BOOST_TEST((waited([&] { feed.hand(rows(1, 1)); }) < 2s));
  BOOST_TEST((waited([&] { feed.wake(); }) < 2s));
  BOOST_TEST((waited([&] { feed.end(); }) < 2s));
  const auto start = std::chrono::steady_clock::now();
  (void)feed.take(100ms);  // nothing changes: the timeout
  BOOST_TEST((std::chrono::steady_clock::now() - start >= 100ms));
}

// The settle thread takes what the relay handed before it publishes what is due (settle_thread.cpp,
// session()): without waiting, and leaving a stop's wake for the take that waits.
BOOST_AUTO_TEST_CASE(what_was_handed_is_taken_without_waiting_and_a_wake_is_kept) {
  SettleFeed feed(10);
  feed.begin();
  BOOST_TEST(feed.takeHanded().session == 1u);
  feed.hand(rows(1, 3));
  feed.wake();
  const auto start = std::chrono::steady_clock::now();
  SettleFeed::Taken handed = feed.takeHanded();
  const std::vector<uint64_t> expected{1, 2, 3};
  BOOST_TEST(versions(handed) == expected);
  BOOST_TEST(feed.takeHanded().rows.empty());
  (void)feed.take(5s);  // the wake is still there: no wait
  BOOST_TEST((std::chrono::steady_clock::now() - start < 2s));
  feed.end();
  BOOST_TEST(feed.takeHanded().session == 0u);
}

// The feed stamps what it is handed and its takes on one clock under one lock: a take's time is
// after every row in it and before every row it left behind (the settle thread asks what is due
// at that time: a change handed before a key's due time is in the settler first).
BOOST_AUTO_TEST_CASE(rows_are_stamped_when_handed_and_a_take_knows_when_it_was) {
  test::ManualClock clock;
  SettleFeed feed(10, &clock);
  feed.begin();
  (void)feed.takeHanded();
  const auto start = clock.now();
  feed.hand(rows(1, 2));
  clock.advance(10ms);
  SettleFeed::Taken first = feed.takeHanded();
  BOOST_TEST((first.at == start + 10ms));
  BOOST_REQUIRE(first.rows.size() == 2u);
  for (const auto& r : first.rows) BOOST_TEST((r.ackedAt == start));
  clock.advance(10ms);
  feed.hand(rows(3, 3));
  SettleFeed::Taken second = feed.take(0ms);
  BOOST_REQUIRE(second.rows.size() == 1u);
  BOOST_TEST((second.rows[0].ackedAt > first.at));
}

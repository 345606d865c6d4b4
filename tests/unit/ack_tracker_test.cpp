#define BOOST_TEST_MODULE ack_tracker
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "relay/ack_tracker.h"

using outbox::AckTracker;

BOOST_AUTO_TEST_CASE(in_order_acks_advance_one_by_one) {
  AckTracker t;
  t.reset(10, 100);
  t.ack(11, 101);
  BOOST_TEST(t.contiguousVersion() == 11u);
  BOOST_TEST(t.contiguousSeq() == 101u);
}

BOOST_AUTO_TEST_CASE(a_gap_holds_the_mark_until_it_fills) {
  AckTracker t;
  t.reset(0, 0);
  t.ack(2, 2);
  t.ack(3, 3);
  BOOST_TEST(t.contiguousVersion() == 0u);
  BOOST_TEST(t.waiting() == 2u);
  t.ack(1, 1);
  BOOST_TEST(t.contiguousVersion() == 3u);
  BOOST_TEST(t.contiguousSeq() == 3u);
  BOOST_TEST(t.waiting() == 0u);
}

BOOST_AUTO_TEST_CASE(old_and_repeated_acks_are_ignored) {
  AckTracker t;
  t.reset(5, 50);
  t.ack(3, 30);
  t.ack(5, 50);
  BOOST_TEST(t.contiguousVersion() == 5u);
  t.ack(6, 51);
  t.ack(6, 51);
  BOOST_TEST(t.contiguousVersion() == 6u);
  BOOST_TEST(t.waiting() == 0u);
}

BOOST_AUTO_TEST_CASE(any_order_ends_at_the_last_version) {
  std::vector<uint64_t> versions(1000);
  for (size_t i = 0; i < versions.size(); ++i) versions[i] = i + 1;
  std::mt19937 rng(42);
  std::shuffle(versions.begin(), versions.end(), rng);
  AckTracker t;
  t.reset(0, 0);
  uint64_t lastSeen = 0;
  for (uint64_t v : versions) {
    t.ack(v, v + 1000);
    BOOST_TEST(t.contiguousVersion() >= lastSeen);  // never moves back
    lastSeen = t.contiguousVersion();
  }
  BOOST_TEST(t.contiguousVersion() == 1000u);
  BOOST_TEST(t.contiguousSeq() == 2000u);
}

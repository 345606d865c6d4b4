#define BOOST_TEST_MODULE admission
#include <boost/test/unit_test.hpp>

#include <vector>

#include "http/admission.h"

using namespace outbox;
using Clock = std::chrono::steady_clock;
using Phase = ConnectionPhase;

namespace {

constexpr size_t kMax = 4;
constexpr size_t kReserve = 2;
const Clock::time_point t0{};

// `n` connections in `phase`, the first the oldest.
std::vector<OpenConnection> connections(size_t n, Phase phase, bool reserved = false, int firstSecond = 0) {
  std::vector<OpenConnection> out;
  for (size_t i = 0; i < n; ++i) out.push_back({phase, t0 + std::chrono::seconds(firstSecond + int(i)), reserved});
  return out;
}

std::vector<OpenConnection> operator+(std::vector<OpenConnection> a, const std::vector<OpenConnection>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

// Issue 38: answered connections in their closing drain filled the listener and every new one
// (the health probe's too) was closed unanswered.
BOOST_AUTO_TEST_CASE(connections_answered_and_closing_take_no_place) {
  auto open = connections(kMax - 1, Phase::kClosing) + connections(kMax - 1, Phase::kServing);
  Admission a = admit(open, kMax, kReserve);
  BOOST_TEST(a.admitted);
  BOOST_TEST(!a.reserved);
  BOOST_TEST(!a.evict.has_value());
  BOOST_TEST(!a.closeClosing.has_value());
}

BOOST_AUTO_TEST_CASE(as_many_closing_as_the_limit_closes_the_oldest_of_them_at_once) {
  auto open = connections(1, Phase::kServing) + connections(kMax, Phase::kClosing, false, 10) +
              connections(1, Phase::kClosing, false, 5);
  Admission a = admit(open, kMax, kReserve);
  BOOST_TEST(a.admitted);
  BOOST_REQUIRE(a.closeClosing.has_value());
  BOOST_TEST(*a.closeClosing == open.size() - 1);  // closing since second 5
}

BOOST_AUTO_TEST_CASE(at_the_limit_the_connection_that_waited_longest_makes_room) {
  auto open = connections(2, Phase::kServing) + connections(1, Phase::kWaiting, false, 20) +
              connections(1, Phase::kWaiting, false, 10);
  Admission a = admit(open, kMax, kReserve);
  BOOST_TEST(a.admitted);
  BOOST_TEST(!a.reserved);
  BOOST_REQUIRE(a.evict.has_value());
  BOOST_TEST(*a.evict == 3u);
}

BOOST_AUTO_TEST_CASE(when_every_place_is_being_served_a_reserved_place_then_none) {
  auto open = connections(kMax, Phase::kServing);
  Admission a = admit(open, kMax, kReserve);
  BOOST_TEST(a.admitted);
  BOOST_TEST(a.reserved);
  BOOST_TEST(!a.evict.has_value());

  open = open + connections(kReserve, Phase::kServing, true);
  a = admit(open, kMax, kReserve);
  BOOST_TEST(!a.admitted);
}

BOOST_AUTO_TEST_CASE(a_reserved_place_left_waiting_goes_to_the_next_connection) {
  auto open = connections(kMax, Phase::kServing) + connections(kReserve, Phase::kWaiting, true, 30);
  Admission a = admit(open, kMax, kReserve);
  BOOST_TEST(a.admitted);
  BOOST_TEST(a.reserved);
  BOOST_REQUIRE(a.evict.has_value());
  BOOST_TEST(*a.evict == kMax);  // the reserved one waiting since second 30
}

#define BOOST_TEST_MODULE backoff
#include <boost/test/unit_test.hpp>

#include <chrono>

#include "common/backoff.h"

BOOST_AUTO_TEST_CASE(backoff_grows_to_its_cap_and_resets) {
  using namespace std::chrono;
  outbox::Backoff b(milliseconds(100), milliseconds(1000), 7);
  auto first = b.next();
  BOOST_TEST(first.count() >= 50);
  BOOST_TEST(first.count() <= 100);
  milliseconds last{0};
  for (int i = 0; i < 20; ++i) last = b.next();
  BOOST_TEST(last.count() >= 500);
  BOOST_TEST(last.count() <= 1000);
  b.reset();
  BOOST_TEST(b.next().count() <= 100);
}

#define BOOST_TEST_MODULE deadline
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <thread>

#include "common/deadline.h"
#include "common/stop_token.h"
#include "common/wakeup.h"

using namespace std::chrono;
using outbox::deadlineAfter;

// Issue 32: `replica --duration 9223372036` returned at once: wait_for added 292 years of
// nanoseconds to now and wrapped into the past.
BOOST_AUTO_TEST_CASE(a_deadline_saturates_instead_of_wrapping) {
  const auto now = steady_clock::now();
  BOOST_TEST((deadlineAfter(now, milliseconds::max()) == steady_clock::time_point::max()));
  BOOST_TEST((deadlineAfter(now, milliseconds(9'223'372'036'000)) == steady_clock::time_point::max()));
  BOOST_TEST((deadlineAfter(now, milliseconds(1500)) == now + milliseconds(1500)));
  BOOST_TEST((deadlineAfter(now, milliseconds(-5)) == now));
  BOOST_TEST((deadlineAfter(steady_clock::time_point::max() - seconds(1), seconds(2)) == steady_clock::time_point::max()));
}

BOOST_AUTO_TEST_CASE(a_wait_of_centuries_waits) {
  for (milliseconds d : {milliseconds::max(), milliseconds(9'223'372'036'000)}) {
    outbox::StopSignal stop;
    std::thread stopper([&] {
      std::this_thread::sleep_for(milliseconds(300));
      stop.request();
    });
    const auto started = steady_clock::now();
    BOOST_TEST(stop.waitFor(d));  // ended by the stop, not at once
    BOOST_TEST((steady_clock::now() - started >= milliseconds(250)));
    stopper.join();

    outbox::Wakeup wake;
    std::thread ringer([&] {
      std::this_thread::sleep_for(milliseconds(300));
      wake.stop();
    });
    const auto waited = steady_clock::now();
    wake.waitPast(wake.rings(), d);
    BOOST_TEST((steady_clock::now() - waited >= milliseconds(250)));
    ringer.join();
  }
}

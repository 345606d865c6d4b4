#define BOOST_TEST_MODULE restart_after_bugs
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "common/log.h"

// runRestartedAfterBugs, the body of the doorbell's and the idle check's threads: an exception
// from their work (a bug) is caught, the sources are told to poll, and the work starts again after
// the pause, unless a stop comes first, which ends the wait at once.

using namespace outbox;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_CASE(work_that_throws_falls_back_then_starts_again) {
  StopSignal stop;
  int runs = 0, fallBacks = 0;
  runRestartedAfterBugs(
      stop, "test",
      [&] {
        if (++runs < 3) throw std::logic_error("the result has no column 'x'");
      },
      [&] { ++fallBacks; }, 10ms);
  BOOST_TEST(runs == 3);       // two that threw, then one that returned
  BOOST_TEST(fallBacks == 2);  // after each that threw, before its pause
}

BOOST_AUTO_TEST_CASE(a_stop_ends_the_pause_at_once) {
  StopSignal stop;
  int runs = 0, fallBacks = 0;
  std::thread thread([&] {
    runRestartedAfterBugs(
        stop, "test",
        [&] {
          ++runs;
          throw 42;  // not even a std::exception
        },
        [&] { ++fallBacks; }, 1h);
  });
  std::this_thread::sleep_for(50ms);
  const auto asked = std::chrono::steady_clock::now();
  stop.request();
  thread.join();
  BOOST_TEST((std::chrono::steady_clock::now() - asked < 5s));
  BOOST_TEST(runs == 1);
  BOOST_TEST(fallBacks == 1);
}

BOOST_AUTO_TEST_CASE(the_message_of_the_exception_being_handled) {
  try {
    throw std::runtime_error("what it says");
  } catch (...) {
    BOOST_TEST(currentExceptionMessage() == "what it says");
  }
  try {
    throw 7;
  } catch (...) {
    BOOST_TEST(currentExceptionMessage() == "an exception that is not a std::exception");
  }
}

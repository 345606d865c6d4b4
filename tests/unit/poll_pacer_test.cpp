#define BOOST_TEST_MODULE poll_pacer
#include <boost/test/unit_test.hpp>

#include <chrono>

#include "relay/poll_pacer.h"

using namespace outbox;
using namespace std::chrono_literals;

namespace {
const Clock::TimePoint t0 = Clock::TimePoint{} + 1h;
}  // namespace

BOOST_AUTO_TEST_CASE(a_session_polls_at_once) {
  PollPacer p(250ms);
  p.begin(t0);
  BOOST_TEST(p.due(t0));
  BOOST_TEST((p.next() == t0));
}

BOOST_AUTO_TEST_CASE(a_full_batch_polls_again_at_once) {
  PollPacer p(250ms);
  p.begin(t0);
  p.started(t0);
  p.batchArrived(t0 + 40ms, /*pollAgain=*/true, /*rowsCame=*/true);
  BOOST_TEST((p.next() == t0 + 40ms));
}

BOOST_AUTO_TEST_CASE(while_rows_come_the_wait_is_the_shortest_counted_from_the_polls_start) {
  PollPacer p(250ms);
  p.begin(t0);
  p.started(t0 + 10ms);
  p.batchArrived(t0 + 30ms, false, /*rowsCame=*/true);
  BOOST_TEST((p.next() == t0 + 10ms + PollPacer::kFlowingPoll));
  BOOST_TEST(p.due(t0 + 30ms));  // the batch took longer than the wait
}

BOOST_AUTO_TEST_CASE(the_wait_grows_with_the_time_since_rows_came_up_to_the_longest) {
  PollPacer p(250ms);
  p.begin(t0);
  p.started(t0);
  p.batchArrived(t0, false, true);
  // An eighth of the time since rows last came, at least kFlowingPoll, at most `longest`.
  p.started(t0 + 8ms);
  p.batchArrived(t0 + 8ms, false, false);
  BOOST_TEST((p.next() == t0 + 8ms + PollPacer::kFlowingPoll));
  p.started(t0 + 800ms);
  p.batchArrived(t0 + 800ms, false, false);
  BOOST_TEST((p.next() == t0 + 800ms + 100ms));
  p.started(t0 + 10s);
  p.batchArrived(t0 + 10s, false, false);
  BOOST_TEST((p.next() == t0 + 10s + 250ms));
  // Rows again: back to the shortest wait.
  p.started(t0 + 11s);
  p.batchArrived(t0 + 11s, false, true);
  BOOST_TEST((p.next() == t0 + 11s + PollPacer::kFlowingPoll));
}

BOOST_AUTO_TEST_CASE(a_session_counts_as_rows_having_just_come) {
  PollPacer p(250ms);
  p.begin(t0);
  p.started(t0 + 80ms);
  p.batchArrived(t0 + 80ms, false, false);
  BOOST_TEST((p.next() == t0 + 80ms + 10ms));
}

BOOST_AUTO_TEST_CASE(poll_at_moves_the_next_poll) {
  PollPacer p(250ms);
  p.begin(t0);
  p.started(t0 + 1s);
  p.batchArrived(t0 + 1s, false, false);
  BOOST_TEST(!p.due(t0 + 1s));
  p.pollAt(t0 + 1s);
  BOOST_TEST(p.due(t0 + 1s));
}

// Found in the Relay split (issue 19): a full batch did not count as rows having come, so the
// first poll that read nothing after a long drain waited as if the source had been idle since the
// last short batch with rows — up to poll_interval (250 ms here) for a row committed just then.
// Full batches read rows: that poll now comes again within milliseconds.
BOOST_AUTO_TEST_CASE(the_poll_after_a_drain_follows_the_flow) {
  PollPacer p(250ms);
  p.begin(t0);
  for (auto at = t0; at < t0 + 4s; at += 10ms) {
    p.started(at);
    p.batchArrived(at, /*pollAgain=*/true, true);
  }
  p.started(t0 + 4s);
  p.batchArrived(t0 + 4s, false, false);
  BOOST_TEST((p.next() == t0 + 4s + PollPacer::kFlowingPoll));
}

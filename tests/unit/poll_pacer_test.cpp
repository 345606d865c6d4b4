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
  // Half the time since rows last came, at least kFlowingPoll, at most `longest`.
  p.started(t0 + 3ms);
  p.batchArrived(t0 + 3ms, false, false);
  BOOST_TEST((p.next() == t0 + 3ms + PollPacer::kFlowingPoll));
  p.started(t0 + 200ms);
  p.batchArrived(t0 + 200ms, false, false);
  BOOST_TEST((p.next() == t0 + 200ms + 100ms));
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
  BOOST_TEST((p.next() == t0 + 80ms + 40ms));
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

// Issue 20: polls that follow the flow are priced. A trickle's rows come with pauses between them;
// the polls in a pause grow by half each time, so a pause of 100 ms costs about ten polls (an
// eighth of the pause cost 23) and a row after it waits at most a third of it.
BOOST_AUTO_TEST_CASE(a_pause_between_rows_costs_about_ten_polls_per_100ms) {
  PollPacer p(250ms);
  p.begin(t0);
  p.started(t0);
  p.batchArrived(t0, false, true);
  int polls = 0;
  auto at = t0;
  while (at < t0 + 100ms) {
    at = p.next();
    p.started(at);
    p.batchArrived(at, false, false);
    ++polls;
  }
  BOOST_TEST(polls <= 11);
  BOOST_TEST((at - t0 <= 100ms + 100ms / 2));  // the poll after a row at 100 ms is at most half the pause late
  // A pause of two seconds, then quiet: polls reach poll_interval within a second.
  int more = 0;
  while (at < t0 + 2s) {
    at = p.next();
    p.started(at);
    p.batchArrived(at, false, false);
    ++more;
  }
  BOOST_TEST(polls + more <= 25);
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
  BOOST_TEST((p.next() == t0 + 4s + 5ms));  // half the 10 ms since the last full batch
}

// Issue 20 (docs/design.md, "Waking up"): what else watches the source decides how often it
// polls on its own.
namespace {
constexpr PollPacer::Watch kDoorbell{.doorbell = true, .idleCheck = true};
constexpr PollPacer::Watch kIdleCheckOnly{.doorbell = false, .idleCheck = true};
constexpr PollPacer::Watch kDoorbellOnly{.doorbell = true, .idleCheck = false};
constexpr auto kQuiet = std::chrono::milliseconds(PollPacer::kQuietPoll);
// A pacer the doorbell and the idle check watch, its first poll at t0 having read nothing.
PollPacer quietWatched() {
  PollPacer p(250ms);
  p.begin(t0);
  p.started(t0);
  p.batchArrived(t0, false, 0, false, kDoorbell);
  return p;
}
}  // namespace

BOOST_AUTO_TEST_CASE(with_the_doorbell_a_quiet_source_without_holes_polls_once_a_quiet_poll) {
  PollPacer p(250ms);
  p.begin(t0);
  p.started(t0);
  p.batchArrived(t0 + 1ms, false, /*rowsCame=*/true, /*holesOpen=*/false, kDoorbell);
  // Rows that come ring: no poll of its own follows the flow.
  BOOST_TEST((p.next() == t0 + kQuiet));
  BOOST_TEST((p.cause() == PollPacer::Cause::kIdle));
  p.rung(t0 + 3s);
  BOOST_TEST(p.due(t0 + 3s));
  BOOST_TEST((p.cause() == PollPacer::Cause::kRing));
}

BOOST_AUTO_TEST_CASE(with_the_doorbell_open_holes_keep_their_probes) {
  PollPacer p(250ms);
  p.begin(t0);
  p.started(t0);
  p.batchArrived(t0, false, true, /*holesOpen=*/true, kDoorbell);
  BOOST_TEST((p.next() == t0 + PollPacer::kFlowingPoll));
  p.started(t0 + 8s);
  p.batchArrived(t0 + 8s, false, false, true, kDoorbell);
  BOOST_TEST((p.next() == t0 + 8s + 250ms));  // down to poll_interval, never the quiet poll
}

BOOST_AUTO_TEST_CASE(a_ring_whose_poll_read_nothing_is_retried_a_few_times_doubling) {
  PollPacer p = quietWatched();
  auto at = t0 + 10s;
  p.rung(at);
  p.started(at, /*rung=*/true);
  // The binlog can be written a moment before the commit is visible: 2, 4, 8, 16, 32 ms.
  for (int i = 0; i < PollPacer::kRingRetries; ++i) {
    p.batchArrived(at, false, /*rowsCame=*/false, false, kDoorbell);
    BOOST_TEST((p.next() == at + PollPacer::kFlowingPoll * (1 << i)), "retry " << i);
    at = p.next();
    p.started(at);
  }
  BOOST_TEST(!p.ringsGivenUp());
  p.batchArrived(at, false, false, false, kDoorbell);
  BOOST_TEST((p.next() == at + kQuiet));
  // Given up on: the idle check looks for the ring's row every round (Wakeup::ringsUnanswered).
  BOOST_TEST(p.ringsGivenUp());
  // A retry that finds the row stops the retries.
  p.rung(at + 1s);
  p.started(at + 1s, true);
  p.batchArrived(at + 1s, false, /*rowsCame=*/true, false, kDoorbell);
  BOOST_TEST((p.next() == at + 1s + kQuiet));
  BOOST_TEST(!p.ringsGivenUp());
}

// A doorbell whose idle check does not work (not run yet, or failing): the source polls at the
// pace the check would look at it (Wakeup::kWatchedCheck), not every poll_interval, and never
// less often (issue 33: with poll_interval = 1h it waited an hour).
BOOST_AUTO_TEST_CASE(with_the_doorbell_and_no_working_idle_check_a_quiet_source_polls_at_the_checks_pace) {
  PollPacer p(250ms);
  p.begin(t0);
  p.started(t0);
  p.batchArrived(t0, false, true, false, kDoorbellOnly);
  BOOST_TEST((p.next() == t0 + std::chrono::milliseconds(Wakeup::kWatchedCheck)));
  BOOST_TEST((p.cause() == PollPacer::Cause::kIdle));
  for (auto interval : {std::chrono::milliseconds(10s), std::chrono::milliseconds(std::chrono::hours(1))}) {
    PollPacer slow(interval);  // poll_interval longer than that: still the check's pace
    slow.begin(t0);
    slow.started(t0);
    slow.batchArrived(t0, false, true, false, kDoorbellOnly);
    BOOST_TEST((slow.next() == t0 + std::chrono::milliseconds(Wakeup::kWatchedCheck)), interval.count() << " ms");
    // Quiet for a day: still a poll every kWatchedCheck.
    slow.started(t0 + 24h);
    slow.batchArrived(t0 + 24h, false, false, false, kDoorbellOnly);
    BOOST_TEST((slow.next() == t0 + 24h + std::chrono::milliseconds(Wakeup::kWatchedCheck)), interval.count() << " ms");
  }
}

BOOST_AUTO_TEST_CASE(with_the_idle_check_only_polls_follow_the_flow_down_to_its_pace_then_stop) {
  PollPacer p(250ms);
  p.begin(t0);
  p.started(t0);
  p.batchArrived(t0, false, /*rowsCame=*/true, false, kIdleCheckOnly);
  BOOST_TEST((p.next() == t0 + PollPacer::kFlowingPoll));
  p.started(t0 + 200ms);
  p.batchArrived(t0 + 200ms, false, false, false, kIdleCheckOnly);
  BOOST_TEST((p.next() == t0 + 200ms + 100ms));
  // Once the flow's wait reaches poll_interval, the idle check (every poll_interval) takes over.
  p.started(t0 + 3s);
  p.batchArrived(t0 + 3s, false, false, false, kIdleCheckOnly);
  BOOST_TEST((p.next() == t0 + 3s + kQuiet));
  BOOST_TEST((p.cause() == PollPacer::Cause::kIdle));
}

// Review of issue 20: two commits rang before one poll that found only the first (the second not
// visible yet): the retries go on until as many rows as rings were read.
BOOST_AUTO_TEST_CASE(retries_go_on_while_fewer_rows_than_rings_were_read) {
  PollPacer p = quietWatched();
  const auto at = t0 + 10s;
  p.started(at, /*rings=*/2);
  p.batchArrived(at, false, /*rowsRead=*/1, false, kDoorbell);
  BOOST_TEST((p.next() == at + PollPacer::kFlowingPoll));
  p.started(at + 2ms);
  p.batchArrived(at + 2ms, false, 1, false, kDoorbell);
  BOOST_TEST((p.next() == at + 2ms + kQuiet));
}

// Second review of issue 20: a three-row commit and a one-row commit rang before one poll that
// found only the first (the second not visible yet): three rows pay for two rings, but a poll
// that answered several rings and read rows is followed by one more; one that then reads
// nothing ends the retries.
BOOST_AUTO_TEST_CASE(a_poll_that_answered_several_rings_is_checked_once_more) {
  PollPacer p = quietWatched();
  const auto at = t0 + 10s;
  p.started(at, /*rings=*/2);
  p.batchArrived(at, false, /*rowsRead=*/3, false, kDoorbell);
  BOOST_TEST((p.next() == at + PollPacer::kFlowingPoll));
  p.started(at + 2ms);
  p.batchArrived(at + 2ms, false, 0, false, kDoorbell);
  BOOST_TEST((p.next() == at + 2ms + kQuiet));
  // One ring, its row read: no second look.
  p.started(at + 5s, 1);
  p.batchArrived(at + 5s, false, 1, false, kDoorbell);
  BOOST_TEST((p.next() == at + 5s + kQuiet));
}

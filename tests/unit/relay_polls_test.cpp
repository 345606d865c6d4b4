// When the relay polls, on its clock stepped by the test: after the flow, backed off when idle,
// and, watched by the doorbell and the idle check (docs/design.md, "Waking up"), when rung.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <mutex>
#include <vector>

#include "relay/poll_pacer.h"
#include "relay_harness.h"

using namespace outbox;
using outbox::test::Harness;
using namespace std::chrono_literals;

// Issue 9: polls follow the flow. While rows come the relay polls again within milliseconds, so a
// row committed while rows flow waits milliseconds, not poll_interval (400 ms here; the old
// fixed cadence made rows wait up to that) — at most half the pause before it, the price of
// polls that follow the flow (issue 20). On the relay's clock, stepped 1 ms at a time.
BOOST_AUTO_TEST_CASE(polls_follow_the_flow) {
  Harness h;
  h.source.pollInterval = 400ms;
  h.startStepped();
  h.store.add(1);
  BOOST_REQUIRE(h.timeUntil([&] { return h.inStream() == 1; }, 1ms, 1s));
  std::vector<long> waits;
  for (uint64_t n = 2; n <= 11; ++n) {
    BOOST_REQUIRE(h.clock.run(30ms, 1ms));  // rows come every 30 ms
    h.store.add(1);
    auto waited = h.timeUntil([&] { return h.inStream() == n; }, 1ms, 1s);
    BOOST_REQUIRE(waited.has_value());
    waits.push_back(static_cast<long>(waited->count()));
  }
  // 30 ms since rows last came: the next poll is due within 30 / 2 ms (PollPacer::kFlowDivisor).
  long longest = *std::max_element(waits.begin(), waits.end());
  BOOST_TEST(longest <= 16, "a row waited " << longest << " ms while rows flowed (poll_interval 400 ms)");
  BOOST_TEST(h.streamIsDense(11));
}

// ... and when rows stop coming, polls back off to poll_interval (100 ms here), so an idle source
// costs a few queries a second.
BOOST_AUTO_TEST_CASE(idle_polls_back_off_to_poll_interval) {
  Harness h;
  h.source.pollInterval = 100ms;
  h.startStepped();
  BOOST_REQUIRE(h.clock.run(1s, 1ms));
  const int firstSecond = h.store.polls;
  BOOST_REQUIRE(h.clock.run(5s, 1ms));  // backed off by now
  const int before = h.store.polls;
  BOOST_REQUIRE(h.clock.run(1s, 1ms));
  const int idlePolls = h.store.polls - before;
  BOOST_TEST(idlePolls == 10, idlePolls << " polls in 1 s while idle");
  // The decay: from 2 ms apart towards 100 ms over the first second.
  BOOST_TEST(firstSecond > 15, firstSecond << " polls in the first second");
  BOOST_TEST(firstSecond < 60, firstSecond << " polls in the first second");
}

// Issue 20 (docs/design.md, "Waking up"): a quiet source that the doorbell and the idle check watch polls
// only when rung (or once a PollPacer::kQuietPoll) — and a ring wakes it at once, with no time
// passing on its clock.
BOOST_AUTO_TEST_CASE(a_watched_quiet_source_sleeps_until_rung_and_a_ring_wakes_it_at_once) {
  Harness h;
  h.watched();
  h.source.pollInterval = 100ms;
  h.startStepped();
  BOOST_REQUIRE(h.clock.run(1s, 1ms));
  const int quiet = h.store.polls;
  h.store.add(1);
  BOOST_REQUIRE(h.clock.run(5s, 5ms));
  BOOST_TEST(h.store.polls == quiet, h.store.polls - quiet << " polls while quiet and watched");
  BOOST_TEST(h.store.snapshot().publishedThrough == 0u);
  // Answered with no time passing on the relay's clock (nothing steps it now).
  const auto rungAt = h.clock.now();
  h.watcher.ring(Wakeup::By::kBinlog);
  BOOST_REQUIRE(h.waitFor([&] { return h.inStream() == 1; }));
  BOOST_TEST((h.clock.now() == rungAt));
  BOOST_TEST(h.metrics.wokeBy(WokeBy::kBinlog).load() == 1u);
  BOOST_TEST(h.watcher.readThrough.load() == 1u);  // what the idle check compares with
  BOOST_TEST(h.streamIsDense(1));
}

// A ring of a commit that wrote rows is polled for a few times more (the commit may not be visible
// yet), then left to the idle check (Wakeup::ringsUnanswered) until a poll reads rows; a ring that
// only says "look" (an epoch bump) costs one poll and leaves nothing unanswered.
BOOST_AUTO_TEST_CASE(a_ring_whose_row_does_not_show_is_left_to_the_idle_check_until_rows_come) {
  Harness h;
  h.watched();
  h.source.pollInterval = 100ms;
  h.startStepped();
  BOOST_REQUIRE(h.clock.run(1s, 1ms));
  // A ring is answered in real time (no clock step needed): wait for its poll, then step the clock.
  int before = h.store.polls;
  h.watcher.ring(Wakeup::By::kBinlogNoRows);
  BOOST_REQUIRE(h.waitFor([&] { return h.store.polls == before + 1; }));
  BOOST_REQUIRE(h.clock.run(1s, 1ms));
  BOOST_TEST(h.store.polls == before + 1);
  BOOST_TEST(!h.watcher.ringsUnanswered.load());
  before = h.store.polls;
  h.watcher.ring(Wakeup::By::kBinlog);  // its row never shows
  BOOST_REQUIRE(h.waitFor([&] { return h.store.polls == before + 1; }));
  BOOST_REQUIRE(h.clock.run(1s, 1ms));
  BOOST_TEST(h.store.polls == before + 1 + PollPacer::kRingRetries);
  BOOST_TEST(h.watcher.ringsUnanswered.load());
  h.store.add(1);
  h.watcher.ring(Wakeup::By::kIdleCheck);  // the idle check saw its id
  BOOST_REQUIRE(h.waitFor([&] { return h.inStream() == 1; }));
  BOOST_REQUIRE(h.clock.run(100ms, 1ms));
  BOOST_TEST(!h.watcher.ringsUnanswered.load());
}

// ... and it keeps its lease: the wait for a ring ends for the lease's heartbeat (10 s here).
BOOST_AUTO_TEST_CASE(a_watched_quiet_leader_renews_its_lease_while_it_sleeps) {
  Harness h;
  h.watched();
  h.leadByLease();
  h.startStepped();
  for (int i = 0; i < 10; ++i) {
    BOOST_REQUIRE(h.clock.run(10s, 100ms));
    std::lock_guard lock(h.leases->mu);
    BOOST_TEST((h.leases->holder == "me" && h.leases->expires > h.clock.now() + 15s), "after " << (i + 1) * 10 << " s");
  }
  BOOST_TEST(h.metrics.leader.load());
}

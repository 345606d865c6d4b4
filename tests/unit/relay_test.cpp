#define BOOST_TEST_MODULE relay
// The relay's batch loop (docs/design.md, "The relay loop"): rows read, assigned, published and
// marked, acks lost, shuffled or late, the read-ahead, the settle feed, and the cost of a trickle.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "relay_harness.h"
#include "settle/settle_feed.h"

using namespace outbox;
using outbox::test::Harness;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_CASE(shuffled_acks_still_mark_only_contiguous_versions) {
  Harness h;
  h.store.add(257);
  h.start();
  BOOST_REQUIRE(h.waitFor([&] { return h.store.snapshot().publishedThrough == 257; }));
  BOOST_TEST(h.streamIsDense(257));
  BOOST_TEST(h.store.snapshot().publishedStreamSeq == 257u);
  BOOST_TEST(h.metrics.publishedRows.load() == 257u);
}

// Issue 36: a source that settles gets every row the stream acknowledged, once, oldest first,
// only once it is below the contiguous ack mark (not when merely sent), with its epoch; the
// feed's session ends with the relay's.
BOOST_AUTO_TEST_CASE(the_settle_feed_gets_each_acknowledged_row_once_in_version_order) {
  SettleFeed feed(1000);
  Harness h;
  h.settleFeed = &feed;
  h.store.add(257);
  h.publisher.holdAcks = true;
  h.start(5s);
  // Sent, stored, not acknowledged: nothing for the settled stream yet.
  BOOST_REQUIRE(h.waitFor([&] { return h.inStream() >= 30; }));
  BOOST_TEST(feed.take(100ms).rows.empty());
  h.publisher.holdAcks = false;
  std::vector<SettleFeed::Row> got;
  uint64_t session = 0;
  std::string problem;
  for (int i = 0; i < 500 && got.size() < 257; ++i) {
    SettleFeed::Taken taken = feed.take(10ms);
    if (taken.session != 0) session = taken.session;
    const uint64_t holds = h.publisher.holdsThrough();
    for (auto& r : taken.rows) {
      if (r.row.version > holds && problem.empty()) problem = fmt::format("version {} handed before stored", r.row.version);
      got.push_back(std::move(r));
    }
    BOOST_TEST(taken.dropped == 0u);
  }
  BOOST_TEST(problem == "");
  BOOST_TEST(session == 1u);
  BOOST_REQUIRE_EQUAL(got.size(), 257u);
  for (size_t i = 0; i < got.size(); ++i) {
    BOOST_TEST_REQUIRE(got[i].row.version == i + 1);
    BOOST_TEST(got[i].row.entityKey == std::to_string(i + 1));
    BOOST_TEST(got[i].row.payload.value_or("") == fmt::format("{{\"n\":{}}}", i + 1));
    BOOST_TEST(got[i].epoch == 1u);
  }
  h.stop.request();
  h.thread.join();
  BOOST_TEST(feed.take(0ms).session == 0u);
}

BOOST_AUTO_TEST_CASE(lost_acks_are_reconciled_from_the_stream_without_duplicates) {
  Harness h;
  h.store.add(40);
  h.publisher.dropNextAcks = 5;
  h.start();
  BOOST_REQUIRE(h.waitFor([&] { return h.store.snapshot().publishedThrough == 40; }));
  BOOST_TEST(h.streamIsDense(40));
  BOOST_TEST(h.metrics.errorsPublish.load() >= 1u);
}

BOOST_AUTO_TEST_CASE(a_transient_database_failure_is_retried) {
  Harness h;
  h.store.add(25);
  h.store.failNextAssigns = 2;
  h.start();
  BOOST_REQUIRE(h.waitFor([&] { return h.store.snapshot().publishedThrough == 25; }));
  BOOST_TEST(h.streamIsDense(25));
  BOOST_TEST(h.metrics.errorsDatabase.load() >= 2u);
}

// The next batch is read while the one before is assigned (docs/design.md, "The relay loop"):
// versions still follow id order, each row gets one, and a batch read ahead of a failed assign is
// dropped, not assigned.
BOOST_AUTO_TEST_CASE(a_batch_read_ahead_keeps_id_order_and_is_dropped_when_the_assign_before_it_fails) {
  for (int failing : {0, 1, 3, 4}) {
    Harness h;
    h.readAhead = true;
    h.store.add(95);
    h.store.failAssignNumber = failing;
    h.start();
    BOOST_REQUIRE(h.waitFor([&] { return h.store.snapshot().publishedThrough == 95; }));
    BOOST_TEST(h.streamIsDense(95));
    std::lock_guard lock(h.store.mu);
    BOOST_TEST(h.store.violations.empty(), (h.store.violations.empty() ? "" : h.store.violations.front()));
    for (const auto& r : h.store.rows) BOOST_TEST(r.version == r.id, "row " << r.id << " has version " << r.version);
    BOOST_TEST(h.metrics.errorsDatabase.load() == (failing > 0 ? 1u : 0u));
  }
}

// Issue 8, finding 1: the ack deadline counted from the last ack of any message, so one lost
// ack froze published_through for as long as other acks kept coming.
BOOST_AUTO_TEST_CASE(one_lost_ack_does_not_freeze_the_marks_while_traffic_flows) {
  Harness h;
  h.publisher.loseAckOf = {5};
  h.store.add(10);
  h.start();
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (int i = 0; i < 400; ++i) {  // ~2 s of steady traffic
      h.store.add(1);
      std::this_thread::sleep_for(5ms);
    }
    done = true;
  });
  // The deadline is 300 ms per publish: the marks pass version 5 while rows still flow.
  bool passedWhileFlowing = false;
  h.waitFor([&] {
    if (done) return true;
    passedWhileFlowing = h.store.snapshot().publishedThrough > 5;
    return passedWhileFlowing;
  });
  BOOST_TEST(passedWhileFlowing, "published_through stayed at 4 while acks of later versions kept coming");
  producer.join();
  uint64_t total = h.store.rows.size();
  BOOST_REQUIRE(h.waitFor([&] { return h.store.snapshot().publishedThrough == total; }));
  BOOST_TEST(h.streamIsDense(total));
  BOOST_TEST(h.metrics.errorsPublish.load() >= 1u);
}

// Review of issue 8: a failed publish is never acked, so settle() waited the whole ack_timeout
// (5 s by default) for it before the next session could reconcile: every fence error stalled the
// source that long. It now stops waiting once every publish in flight is answered.
BOOST_AUTO_TEST_CASE(a_fence_error_does_not_stall_the_source_for_the_ack_timeout) {
  Harness h;
  h.store.add(40);
  h.publisher.fenceNextPublishes = 3;
  h.startStepped(/*ackTimeout=*/5s);
  auto took = h.timeUntil([&] { return h.store.snapshot().publishedThrough == 40; }, 10ms, 10s);
  BOOST_REQUIRE(took.has_value());
  BOOST_TEST(took->count() < 1000, took->count() << " ms of the relay's time");
  BOOST_TEST(h.streamIsDense(40));
  BOOST_TEST(h.metrics.errorsFenced.load() >= 1u);
}

// Issue 33 (cost per row): at a trickle each batch's assign carries the acks of the one before to
// published_through, so a row costs one write commit, not two. Acks no batch carries are marked on
// their own once they have waited Relay::Options::markInterval (500 ms), and a stop marks at once.
BOOST_AUTO_TEST_CASE(a_trickle_marks_its_acks_on_the_next_assign_and_the_last_on_its_own) {
  Harness h;
  h.source.pollInterval = 400ms;
  h.startStepped();
  for (uint64_t n = 1; n <= 10; ++n) {
    if (n > 1) BOOST_REQUIRE(h.clock.run(100ms, 1ms));  // ten rows a second
    h.store.add(1);
    BOOST_REQUIRE(h.timeUntil([&] { return h.inStream() == n; }, 1ms, 1s));
    // Each assign carried the acks before it: published_through lags by one row at most.
    BOOST_TEST(h.store.snapshot().publishedThrough + 1 >= n);
  }
  BOOST_TEST(h.store.marks == 0, h.store.marks << " marks of their own while rows came every 100 ms");
  BOOST_TEST(h.store.carried >= 9);
  // The flow stops: the last row's ack is marked on its own markInterval after it (acked within
  // a millisecond or two of its publish, on this clock).
  auto took = h.timeUntil([&] { return h.store.snapshot().publishedThrough == 10; }, 1ms, 2s);
  BOOST_REQUIRE(took.has_value());
  BOOST_TEST(took->count() >= 490, took->count() << " ms");
  BOOST_TEST(took->count() <= 505, took->count() << " ms");
  BOOST_TEST(h.store.marks == 1);
  BOOST_TEST(h.store.snapshot().publishedStreamSeq == 10u);
  // A stop does not wait for markInterval.
  h.store.add(1);
  BOOST_REQUIRE(h.timeUntil([&] { return h.inStream() == 11; }, 1ms, 1s));
  h.stop.request();
  h.thread.join();
  BOOST_TEST(h.store.snapshot().publishedThrough == 11u);
  BOOST_TEST(h.store.violations.empty());
  BOOST_TEST(h.streamIsDense(11));
}

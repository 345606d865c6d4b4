#define BOOST_TEST_MODULE ack_window
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "relay/ack_window.h"

using namespace outbox;
using namespace std::chrono_literals;

namespace {

// Hands the window the acks a test queued; nothing else of a publisher is used.
class QueuedAcks final : public Publisher {
 public:
  std::vector<VersionAck> queue;

  void ok(uint64_t version, uint64_t seq) { queue.push_back({version, seq, true, false, ""}); }
  void failed(uint64_t version, bool fenced = false, std::string error = "refused") {
    queue.push_back({version, 0, false, fenced, std::move(error)});
  }

  Status prepare() override { return Status::ok(); }
  Result<StreamTip> tip() override { return StreamTip{}; }
  Status publish(const OutboxRow&, uint64_t, uint64_t, bool) override { return Status::ok(); }
  void takeAcks(std::vector<VersionAck>& out) override {
    out.insert(out.end(), queue.begin(), queue.end());
    queue.clear();
  }
  void waitForAcks(std::chrono::milliseconds) override {}
  void abandon() override { queue.clear(); }
  std::optional<std::string> poisonReason(OutboxRow&) override { return std::nullopt; }
};

const Clock::TimePoint t0{};

OutboxRow row(uint64_t version, int64_t createdAtMicros = 0) {
  OutboxRow r;
  r.id = version + 100;
  r.version = version;
  r.createdAtMicros = createdAtMicros;
  return r;
}

// Sends versions from..through at `at`.
void send(AckWindow& w, uint64_t from, uint64_t through, Clock::TimePoint at = t0) {
  for (uint64_t v = from; v <= through; ++v) w.sent(row(v, static_cast<int64_t>(v) * 10), at);
}

std::vector<uint64_t> versions(const AckWindow::Taken& taken) {
  std::vector<uint64_t> out;
  for (const auto& s : taken.published) out.push_back(s.version);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_new_window_is_closed_and_empty) {
  AckWindow w;
  BOOST_TEST(!w.isOpen());
  BOOST_TEST(w.inFlight() == 0u);
  BOOST_TEST(w.nextVersion() == 1u);
  BOOST_TEST(w.allAnswered());
  BOOST_TEST(!w.overdue(t0 + 1h, 1ms));
}

BOOST_AUTO_TEST_CASE(open_starts_after_what_the_stream_holds) {
  AckWindow w;
  w.open(10, 100);
  BOOST_TEST(w.isOpen());
  BOOST_TEST(w.contiguousVersion() == 10u);
  BOOST_TEST(w.contiguousSeq() == 100u);
  BOOST_TEST(w.nextVersion() == 11u);
  BOOST_TEST(w.inFlight() == 0u);
}

BOOST_AUTO_TEST_CASE(sent_versions_are_in_flight_until_acked_in_order) {
  AckWindow w;
  QueuedAcks p;
  w.open(0, 0);
  send(w, 1, 3);
  BOOST_TEST(w.inFlight() == 3u);
  BOOST_TEST(w.nextVersion() == 4u);
  BOOST_TEST(!w.allAnswered());
  p.ok(1, 1);
  p.ok(2, 2);
  auto taken = w.take(p);
  BOOST_TEST(!taken.failure);
  BOOST_TEST(versions(taken) == (std::vector<uint64_t>{1, 2}), boost::test_tools::per_element());
  BOOST_TEST(taken.published[0].createdAtMicros == 10);
  BOOST_TEST(w.contiguousVersion() == 2u);
  BOOST_TEST(w.contiguousSeq() == 2u);
  BOOST_TEST(w.inFlight() == 1u);
  p.ok(3, 3);
  taken = w.take(p);
  BOOST_TEST(versions(taken) == (std::vector<uint64_t>{3}), boost::test_tools::per_element());
  BOOST_TEST(w.inFlight() == 0u);
  BOOST_TEST(w.allAnswered());
}

BOOST_AUTO_TEST_CASE(an_ack_above_a_gap_publishes_nothing_until_the_gap_fills) {
  AckWindow w;
  QueuedAcks p;
  w.open(0, 0);
  send(w, 1, 3);
  p.ok(2, 2);
  p.ok(3, 3);
  auto taken = w.take(p);
  BOOST_TEST(taken.published.empty());
  BOOST_TEST(w.contiguousVersion() == 0u);
  BOOST_TEST(w.inFlight() == 3u);
  BOOST_TEST(!w.allAnswered());  // version 1 is unanswered
  p.ok(1, 1);
  taken = w.take(p);
  BOOST_TEST(versions(taken) == (std::vector<uint64_t>{1, 2, 3}), boost::test_tools::per_element());
  BOOST_TEST(w.contiguousSeq() == 3u);
}

BOOST_AUTO_TEST_CASE(acks_of_versions_not_sent_or_already_acked_are_ignored) {
  AckWindow w;
  QueuedAcks p;
  w.open(5, 50);
  send(w, 6, 7);
  p.ok(4, 40);     // below the window: an earlier session's
  p.ok(5, 99);     // the mark itself, again
  p.ok(8, 80);     // never sent by this window
  p.failed(9);     // never sent: not a failure of this window
  auto taken = w.take(p);
  BOOST_TEST(!taken.failure);
  BOOST_TEST(taken.published.empty());
  BOOST_TEST(w.contiguousVersion() == 5u);
  BOOST_TEST(w.contiguousSeq() == 50u);
  p.ok(6, 51);
  p.ok(6, 51);  // a second ack of the same version
  taken = w.take(p);
  BOOST_TEST(versions(taken) == (std::vector<uint64_t>{6}), boost::test_tools::per_element());
  p.ok(6, 77);  // and one after it was retired
  taken = w.take(p);
  BOOST_TEST(taken.published.empty());
  BOOST_TEST(w.contiguousSeq() == 51u);
}

BOOST_AUTO_TEST_CASE(a_failure_is_reported_once_per_take_and_stops_the_mark_below_it) {
  AckWindow w;
  QueuedAcks p;
  w.open(0, 0);
  send(w, 1, 4);
  p.ok(1, 1);
  p.failed(2, /*fenced=*/true, "wrong last sequence");
  p.failed(3);
  p.ok(4, 4);
  auto taken = w.take(p);
  BOOST_REQUIRE(taken.failure);
  BOOST_TEST(taken.failure->version == 2u);  // the first one
  BOOST_TEST(taken.failure->fenced);
  BOOST_TEST(taken.failure->error == "wrong last sequence");
  BOOST_TEST(versions(taken) == (std::vector<uint64_t>{1}), boost::test_tools::per_element());
  BOOST_TEST(w.contiguousVersion() == 1u);
  // 2 and 3 failed, 4 acked above the gap: every publish is answered.
  BOOST_TEST(w.inFlight() == 3u);
  BOOST_TEST(w.allAnswered());
  // The next take reports only what it takes.
  taken = w.take(p);
  BOOST_TEST(!taken.failure);
}

BOOST_AUTO_TEST_CASE(all_answered_waits_for_every_publish_in_flight) {
  AckWindow w;
  QueuedAcks p;
  w.open(0, 0);
  send(w, 1, 3);
  p.failed(1);
  (void)w.take(p);
  BOOST_TEST(!w.allAnswered());
  p.ok(2, 2);
  (void)w.take(p);
  BOOST_TEST(!w.allAnswered());
  p.ok(3, 3);
  (void)w.take(p);
  BOOST_TEST(w.allAnswered());
}

BOOST_AUTO_TEST_CASE(the_deadline_is_the_oldest_unacked_publishs) {
  AckWindow w;
  QueuedAcks p;
  w.open(0, 0);
  send(w, 1, 1, t0);
  send(w, 2, 3, t0 + 3s);
  BOOST_TEST(!w.overdue(t0 + 5s, 5s));  // exactly at the deadline: not yet
  auto late = w.overdue(t0 + 5s + 1ms, 5s);
  BOOST_REQUIRE(late);
  BOOST_TEST(late->version == 1u);
  // Acks of later versions do not excuse a lost one.
  p.ok(2, 2);
  p.ok(3, 3);
  (void)w.take(p);
  BOOST_REQUIRE(w.overdue(t0 + 5s + 1ms, 5s));
  BOOST_TEST(w.overdue(t0 + 5s + 1ms, 5s)->version == 1u);
  p.ok(1, 1);
  (void)w.take(p);
  BOOST_TEST(!w.overdue(t0 + 1h, 5s));
}

BOOST_AUTO_TEST_CASE(the_deadline_moves_to_the_next_oldest_once_acked) {
  AckWindow w;
  QueuedAcks p;
  w.open(0, 0);
  send(w, 1, 1, t0);
  send(w, 2, 2, t0 + 3s);
  p.ok(1, 1);
  (void)w.take(p);
  BOOST_TEST(!w.overdue(t0 + 8s, 5s));
  BOOST_REQUIRE(w.overdue(t0 + 8s + 1ms, 5s));
  BOOST_TEST(w.overdue(t0 + 8s + 1ms, 5s)->version == 2u);
}

BOOST_AUTO_TEST_CASE(close_forgets_what_is_in_flight_but_keeps_the_mark) {
  AckWindow w;
  QueuedAcks p;
  w.open(0, 0);
  send(w, 1, 3);
  p.ok(1, 7);
  p.failed(2);
  (void)w.take(p);
  w.close();
  BOOST_TEST(!w.isOpen());
  BOOST_TEST(w.inFlight() == 0u);
  BOOST_TEST(w.allAnswered());
  BOOST_TEST(!w.overdue(t0 + 1h, 1ms));
  BOOST_TEST(w.contiguousVersion() == 1u);  // what `relay stopped at` reports
  BOOST_TEST(w.contiguousSeq() == 7u);
  BOOST_TEST(w.nextVersion() == 4u);
}

BOOST_AUTO_TEST_CASE(open_again_ignores_an_earlier_sessions_queued_acks) {
  AckWindow w;
  QueuedAcks p;
  w.open(0, 0);
  send(w, 1, 5);
  w.close();
  // Reconcile found the stream holding through 2; versions 3.. go again in this session.
  w.open(2, 2);
  BOOST_TEST(w.nextVersion() == 3u);
  p.ok(1, 1);  // the earlier session's, queued late
  p.ok(2, 2);
  p.ok(4, 4);  // sent by the earlier session, not (yet) by this one
  auto taken = w.take(p);
  BOOST_TEST(taken.published.empty());
  BOOST_TEST(w.contiguousVersion() == 2u);
  BOOST_TEST(w.inFlight() == 0u);
  send(w, 3, 4);
  p.ok(3, 3);
  p.ok(4, 4);
  taken = w.take(p);
  BOOST_TEST(versions(taken) == (std::vector<uint64_t>{3, 4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(open_forgets_failures_and_the_acks_waiting_above_a_gap) {
  AckWindow w;
  QueuedAcks p;
  w.open(0, 0);
  send(w, 1, 3);
  p.failed(1);
  p.ok(3, 3);
  (void)w.take(p);
  w.open(0, 0);
  send(w, 1, 2);
  BOOST_TEST(!w.allAnswered());  // the old failure and ack of 3 count for nothing
  p.ok(1, 1);
  p.ok(2, 2);
  auto taken = w.take(p);
  BOOST_TEST(versions(taken) == (std::vector<uint64_t>{1, 2}), boost::test_tools::per_element());
  BOOST_TEST(w.allAnswered());
}

BOOST_AUTO_TEST_CASE(any_order_of_acks_publishes_every_version_once_in_order) {
  AckWindow w;
  QueuedAcks p;
  w.open(100, 1000);
  send(w, 101, 1100);
  std::vector<uint64_t> order(1000);
  for (size_t i = 0; i < order.size(); ++i) order[i] = 101 + i;
  std::mt19937 rng(42);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<uint64_t> published;
  uint64_t lastMark = 100;
  for (size_t i = 0; i < order.size(); i += 37) {
    for (size_t j = i; j < std::min(order.size(), i + 37); ++j) p.ok(order[j], order[j] + 900);
    auto taken = w.take(p);
    BOOST_TEST(!taken.failure);
    for (const auto& s : taken.published) published.push_back(s.version);
    BOOST_TEST(w.contiguousVersion() >= lastMark);  // never moves back
    lastMark = w.contiguousVersion();
    BOOST_TEST(w.inFlight() == 1100 - w.contiguousVersion());
  }
  BOOST_TEST(published.size() == 1000u);
  for (size_t i = 0; i < published.size(); ++i) BOOST_TEST(published[i] == 101 + i);
  BOOST_TEST(w.contiguousVersion() == 1100u);
  BOOST_TEST(w.contiguousSeq() == 2000u);
  BOOST_TEST(w.allAnswered());
}

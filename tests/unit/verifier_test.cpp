#define BOOST_TEST_MODULE verifier
#include <boost/test/unit_test.hpp>

#include "replica/verifier.h"

using namespace outbox;
using namespace std::chrono_literals;
using Kind = Verifier::Verdict::Kind;

namespace {

// The replica's state after version v: sums that differ at every version.
VersionState stateAt(uint64_t v) { return {v, v * 1'000'003, 100 + v}; }

ServedSummary summaryOf(const VersionState& s, const std::string& readAt, std::chrono::milliseconds freshFor = 0ms) {
  ServedSummary out;
  out.header.watermark = s.version;
  out.header.checksum = s.sum;
  out.header.recordCount = s.recordCount;
  out.readAt = readAt;
  out.freshFor = freshFor;
  return out;
}

const Verifier::Clock::time_point t0{};

// A verifier at version `from` with from+1..to applied; the jitter's middle.
Verifier through(uint64_t from, uint64_t to, size_t history = 500) {
  Verifier v(300s, history, [] { return 0.5; });
  v.reset(stateAt(from), t0);
  for (uint64_t i = from + 1; i <= to; ++i) v.applied(stateAt(i), t0);
  return v;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_summary_behind_the_replica_is_compared_at_its_own_watermark) {
  Verifier v = through(100, 400);
  auto verdict = v.offer(summaryOf(stateAt(250), "r1"), t0, false);
  BOOST_TEST((verdict.kind == Kind::kVerified));
  BOOST_TEST(verdict.version == 250u);
}

BOOST_AUTO_TEST_CASE(a_summary_holding_unpublished_changes_matches_a_later_version) {
  Verifier v = through(100, 400);
  ServedSummary s = summaryOf(stateAt(252), "r1");
  s.header.watermark = 250;
  auto verdict = v.offer(s, t0, true);
  BOOST_TEST((verdict.kind == Kind::kVerified));
  BOOST_TEST(verdict.version == 252u);
}

BOOST_AUTO_TEST_CASE(a_summary_ahead_is_compared_when_the_replica_reaches_it) {
  Verifier v = through(100, 200);
  BOOST_TEST((v.offer(summaryOf(stateAt(210), "r1"), t0, true).kind == Kind::kLater));
  for (uint64_t i = 201; i < 210; ++i) BOOST_TEST((v.applied(stateAt(i), t0).kind == Kind::kNone));
  auto verdict = v.applied(stateAt(210), t0);
  BOOST_TEST((verdict.kind == Kind::kVerified));
  BOOST_TEST(verdict.version == 210u);
}

BOOST_AUTO_TEST_CASE(a_summary_before_the_history_is_asked_again_once_the_bridge_reads_again) {
  Verifier v = through(100, 1000);  // the history holds 501..1000
  BOOST_TEST((v.offer(summaryOf(stateAt(400), "old", 20s), t0, true).kind == Kind::kLater));
  BOOST_TEST(!v.due(t0 + 20s));
  BOOST_TEST(v.due(t0 + 20s + 600ms));  // + 100 ms + the jitter's half second
}

BOOST_AUTO_TEST_CASE(a_difference_counts_once_per_read_of_the_table) {
  Verifier v = through(100, 200);
  auto wrong = [](const std::string& readAt) {
    ServedSummary s = summaryOf(stateAt(200), readAt);
    s.header.checksum = 42;
    return s;
  };
  auto first = v.offer(wrong("r1"), t0, true);
  BOOST_TEST((first.kind == Kind::kMismatch));
  BOOST_TEST(first.inARow == 1);
  BOOST_TEST(first.state.sum == stateAt(200).sum);
  for (int i = 0; i < 5; ++i) BOOST_TEST(v.offer(wrong("r1"), t0, true).inARow == 1);  // the cache's copy
  BOOST_TEST(v.offer(wrong("r2"), t0, true).inARow == 2);
  BOOST_TEST(v.offer(wrong("r3"), t0, true).inARow == 3);
  BOOST_TEST((v.offer(summaryOf(stateAt(200), "r4"), t0, true).kind == Kind::kVerified));
  BOOST_TEST(v.offer(wrong("r5"), t0, true).inARow == 1);
}

BOOST_AUTO_TEST_CASE(checks_come_every_interval_with_jitter_and_never_with_interval_zero) {
  for (double r : {0.0, 0.25, 0.5, 0.999}) {
    Verifier v(300s, 10, [r] { return r; });
    v.reset(stateAt(1), t0);
    auto at = std::chrono::duration_cast<Verifier::Clock::duration>(300s * (0.8 + 0.4 * r));
    BOOST_TEST(!v.due(t0 + at - 1ms));
    BOOST_TEST(v.due(t0 + at));
    BOOST_TEST((at >= 240s && at < 360s));
  }
  Verifier off(0ms, 10);
  off.reset(stateAt(1), t0);
  BOOST_TEST(!off.enabled());
  BOOST_TEST(!off.due(t0 + 1000h));
}

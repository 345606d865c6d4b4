// Epoch bumps: the leader finishes the operator's bump once its publishes are settled, keeps the
// versions the stream stored, fences a stale leader's pipeline, and halts on a finish refused.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "relay_harness.h"

using namespace outbox;
using outbox::test::Harness;
using namespace std::chrono_literals;

namespace {

// A bump happened (epoch 2 after version 20, the stream at sequence 10); this relay leads epoch
// 2. Set up before start().
void bumpedAfterTen(Harness& h, uint64_t rows, uint64_t versionsAfter) {
  h.store.add(static_cast<int>(rows));
  for (uint64_t v = 1; v <= 10; ++v) {  // epoch 1: versions 1..10 at 1..10
    h.store.rows[v - 1].version = v;
    h.publisher.stream.push_back({v, 1});
    h.publisher.dedup[v] = v;
  }
  h.store.state.epoch = 2;
  h.store.state.assignedThrough = h.store.state.publishedThrough = versionsAfter;
  h.store.state.publishedStreamSeq = 10;
  h.store.state.epochVersionsAfter = versionsAfter;
  h.store.state.epochStreamSeq = 10;
}

std::string missingFromEpoch(Harness& h, uint64_t epoch, uint64_t from, uint64_t through) {
  std::set<uint64_t> stored;
  for (auto& m : h.publisher.copy()) {
    if (m.epoch == epoch && !m.deleted) stored.insert(m.version);
  }
  std::string missing;
  for (uint64_t v = from; v <= through; ++v) {
    if (!stored.count(v)) missing += std::to_string(v) + " ";
  }
  return missing;
}

// The source halts on the finish of a bump with a reason holding each of `fragments`, and the
// bump stays unfinished.
void requireBumpHalted(Harness& h, std::initializer_list<const char*> fragments) {
  BOOST_REQUIRE(h.waitFor([&] { return !h.store.snapshot().haltedReason.empty(); }));
  const std::string reason = h.store.snapshot().haltedReason;
  for (const char* fragment : fragments) BOOST_TEST(reason.find(fragment) != std::string::npos, reason);
  BOOST_TEST(h.waitFor([&] { return h.metrics.halted.load(); }));
  BOOST_TEST(h.store.bumpsCompleted == 0);
}

// The operator bumps again: the leader finishes it, the halt is cleared, and 5 new rows go out
// (published through at least `through`).
void requireSecondBumpResumes(Harness& h, uint64_t through) {
  h.store.bump();
  h.store.add(5);
  BOOST_REQUIRE(h.waitFor([&] {
    auto state = h.store.snapshot();
    return h.store.bumpsCompleted == 1 && state.haltedReason.empty() && state.publishedThrough == state.assignedThrough &&
           state.publishedThrough >= through;
  }));
  BOOST_TEST(h.waitFor([&] { return !h.metrics.halted.load(); }));
}

}  // namespace

// Review of issue 8 (found by a reviewer, reproduced with these fakes): a stale leader resumed
// after an epoch bump flushes its pipeline (epoch-1 versions 11..15, fenced on sequences 10..14).
// With sequence fences only, its 14 and 15 got in between this relay's 21..23 and 26..; reconcile's
// arithmetic then marked 24 and 25 published, though the stream never stored them.
BOOST_AUTO_TEST_CASE(a_stale_leaders_pipeline_after_a_bump_cannot_interleave) {
  Harness h;
  bumpedAfterTen(h, 20, 20);
  bool injected = false;
  h.publisher.afterStore = [&] {
    if (injected || h.publisher.stream.size() != 13) return;
    injected = true;
    // The stale leader's pipeline: version v fenced on sequence v - 1, and on Msg-Id v - 1 when
    // the relay (the same program) fences on ids.
    auto& stream = h.publisher.stream;
    for (uint64_t v = 11; v <= 15; ++v) {
      bool seqFenceMet = stream.size() == v - 1;
      bool idFenceMet = !h.publisher.fencesOnIds || stream.back().version == v - 1;
      if (seqFenceMet && idFenceMet) h.publisher.storeForeign(v, 1);
    }
  };
  for (uint64_t id = 11; id <= 20; ++id) h.store.rows[id - 1].version = 0;  // cleared by the bump
  h.start();
  BOOST_REQUIRE(h.waitFor([&] { return h.store.snapshot().publishedThrough == 30; }));
  BOOST_TEST(injected);
  BOOST_TEST(missingFromEpoch(h, 2, 21, 30).empty(), "marked published, never stored: " << missingFromEpoch(h, 2, 21, 30));
  BOOST_TEST(h.store.snapshot().haltedReason.empty());
  for (const auto& m : h.publisher.copy()) BOOST_TEST(!(m.epoch == 1 && m.version > 10), "stale version " << m.version);
}

// Issue 19, finding 7: `epoch bump` read the stream's tip before its transaction; the leader's
// publishes in flight landed after that read, and the bump took their rows' versions away, so
// those rows went out again under the new epoch (one row in ~2,000, in both epochs). The bump now
// records the epoch and the leader finishes it once its publishes are settled. Here the operator
// bumps while 30 publishes are in flight and their acks held back: each of those rows stays in
// the stream once, in epoch 1, and the new epoch begins after them.
BOOST_AUTO_TEST_CASE(an_epoch_bump_keeps_the_versions_the_leader_had_in_flight) {
  Harness h;
  h.store.add(200);
  h.publisher.holdAcks = true;
  h.start(/*ackTimeout=*/2s);
  BOOST_REQUIRE(h.waitFor([&] { return h.publisher.copy().size() >= 30; }));
  h.store.bump();  // the operator, with 30 versions stored and none acknowledged
  h.publisher.holdAcks = false;
  BOOST_REQUIRE(h.waitFor([&] {
    auto state = h.store.snapshot();
    return state.epoch == 2 && !state.bumpFromEpoch && state.publishedThrough == state.assignedThrough &&
           state.assignedThrough >= 200 && h.store.snapshot().haltedReason.empty();
  }));
  BOOST_REQUIRE(h.waitFor([&] {
    std::lock_guard lock(h.store.mu);
    return std::all_of(h.store.rows.begin(), h.store.rows.end(), [](const OutboxRow& r) { return r.version != 0; }) &&
           h.store.state.publishedThrough == h.store.state.assignedThrough;
  }));
  const SourceState state = h.store.snapshot();
  BOOST_TEST(h.store.bumpsCompleted == 1);
  // Each row once in the stream, under the version it has; epoch 1 wholly before epoch 2.
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> byVersion;  // version -> (epoch, seq)
  uint64_t lastEpoch = 1, epoch1Top = 0;
  auto stream = h.publisher.copy();
  for (size_t i = 0; i < stream.size(); ++i) {
    BOOST_REQUIRE(stream[i].epoch >= lastEpoch);
    lastEpoch = stream[i].epoch;
    if (stream[i].epoch == 1) epoch1Top = stream[i].version;
    BOOST_REQUIRE_MESSAGE(byVersion.emplace(stream[i].version, std::make_pair(stream[i].epoch, i + 1)).second,
                          "version " << stream[i].version << " twice");
  }
  BOOST_TEST(epoch1Top >= 30u);  // what was in flight kept its versions
  BOOST_TEST(state.epochVersionsAfter == epoch1Top);
  BOOST_TEST(stream.size() == 200u, "200 rows, " << stream.size() << " messages: a row went out twice");
  std::lock_guard lock(h.store.mu);
  for (const auto& r : h.store.rows) BOOST_TEST(byVersion.count(r.version) == 1u, "row " << r.id);
  BOOST_TEST(h.store.violations.empty());
}

// Issue 19, item 7, follow-up: the leader the bump fenced (or this one's last session) stores its
// publishes of versions 21 and 22 after the finish read the stream's tip (which ended at 20), just
// before the new epoch's first publish. Reconcile only moved the epoch's start past them, and the
// scan published rows 21 and 22 again in epoch 2. Now they keep their versions; the rest of what
// the finish took (rows 23..25) and the new rows go out once, in epoch 2, after the bump's versions.
BOOST_AUTO_TEST_CASE(old_epoch_messages_stored_after_the_bumps_finish_keep_their_rows_versions) {
  Harness h;
  h.store.add(30);
  for (uint64_t v = 1; v <= 25; ++v) h.store.rows[v - 1].version = v;
  for (uint64_t v = 1; v <= 20; ++v) {
    h.publisher.stream.push_back({v, 1});
    h.publisher.dedup[v] = v;
  }
  h.store.state.assignedThrough = 25;
  h.store.state.publishedThrough = h.store.state.publishedStreamSeq = 20;
  h.store.state.scanCursor = h.store.state.scanFloor = 25;
  h.store.bump();
  bool injected = false;
  h.publisher.beforePublish = [&] {
    if (std::exchange(injected, true)) return;
    h.publisher.storeForeign(21, 1);
    h.publisher.storeForeign(22, 1);
  };
  h.start();
  BOOST_REQUIRE(h.waitFor([&] {
    std::lock_guard lock(h.store.mu);
    return h.store.state.epoch == 2 && !h.store.state.bumpFromEpoch &&
           std::all_of(h.store.rows.begin(), h.store.rows.end(), [](const OutboxRow& r) { return r.version != 0; }) &&
           h.store.state.publishedThrough == h.store.state.assignedThrough && h.store.state.publishedThrough > 25;
  }));
  BOOST_TEST(injected);
  BOOST_TEST(h.store.staleTailsAdopted == 1);
  BOOST_TEST(h.store.snapshot().haltedReason.empty());
  // The stream: epoch 1's 1..22, then epoch 2's 26..33 (after the bump's versions, 25), each once.
  std::vector<std::pair<uint64_t, uint64_t>> expected;  // (epoch, version)
  for (uint64_t v = 1; v <= 22; ++v) expected.emplace_back(1, v);
  for (uint64_t v = 26; v <= 33; ++v) expected.emplace_back(2, v);
  std::vector<std::pair<uint64_t, uint64_t>> stored;
  for (const auto& m : h.publisher.copy()) stored.emplace_back(m.epoch, m.version);
  BOOST_TEST((stored == expected));
  std::lock_guard lock(h.store.mu);
  // Each row under the version the stream holds it at: 21 and 22 kept theirs, 23..30 in id order.
  for (const auto& r : h.store.rows) BOOST_TEST(r.version == (r.id <= 22 ? r.id : r.id + 3), "row " << r.id);
  BOOST_TEST(h.store.bumpRemoved.size() == 3u);  // 23..25, never stored: kept until a later bump
  BOOST_TEST(h.store.violations.empty());
}

// A stream holding a message of the new epoch or a later one before the leader finishes the bump
// (another writer): the finish is refused for good. That refusal returned from reconcile without
// halting the source (no halted_reason, no outbox_halted). Now it halts, and a second bump, above
// the stream's epoch, lets the leader finish it.
BOOST_AUTO_TEST_CASE(a_bump_the_stream_overtook_halts_the_source_until_bumped_again) {
  Harness h;
  h.store.add(5);
  h.crashBetweenAckAndMark(5, 5);
  h.store.bump();                      // epoch 2, from 1
  h.publisher.storeForeign(6, 3);      // epoch 3, another writer's
  h.start();
  requireBumpHalted(h, {"holds epoch 3, not below the new epoch 2", "epoch bump"});
  BOOST_TEST(h.store.snapshot().bumpFromEpoch.value_or(0) == 1u);
  {
    std::lock_guard lock(h.store.mu);
    h.store.state.epoch = 3;  // the operator's bump goes above the stream's epoch: 4
  }
  requireSecondBumpResumes(h, 11);
  BOOST_TEST(h.store.snapshot().epoch == 4u);
}

// Review of the epoch bump's give-back: a finish that fails for good (here, as when migration 009
// or its grant is missing after an upgrade) halted nothing — "halted" in the log, no
// halted_reason, no outbox_halted, and `epoch bump --wait` said nothing was wrong. It halts with
// the reason now; once fixed, a second bump finishes.
BOOST_AUTO_TEST_CASE(a_finish_that_fails_for_good_halts_the_source_with_the_reason) {
  Harness h;
  h.store.add(5);
  h.crashBetweenAckAndMark(5, 5);
  h.store.bump();
  h.store.finishFails = "mysql error 1146: Table 'app.outbox_bump_removed' doesn't exist";
  h.start();
  requireBumpHalted(h, {"could not finish the epoch bump to epoch 2", "outbox_bump_removed"});
  {
    std::lock_guard lock(h.store.mu);
    h.store.finishFails.clear();  // migrated
  }
  requireSecondBumpResumes(h, 10);
  BOOST_TEST(h.store.snapshot().epoch == 3u);
}

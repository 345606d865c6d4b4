// `epoch bump` against a leader: bumps under a publishing leader, a stale leader's publishes
// landing after or around a bump, and a bump the stream overtook before its finish. Part of
// fault_recovery (recovery_test.cpp); the helpers are in recovery.h.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <thread>

#include <fmt/format.h>

#include "harness.h"
#include "recovery.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

// `epoch bump` while the leader is publishing a backlog and producers keep committing, 20 times:
// each bump fences the leader. Issue 19, finding 7: the bump read the stream's tip before its
// transaction, the leader's publishes in flight landed after that read, and the bump took their
// rows' versions away, so those rows went out again under the new epoch (one row in ~2,000, in
// both epochs). Now: every row is in the stream once, under the version it has; no message of an
// epoch follows one of a later epoch; each epoch's versions are dense from where it began; one
// bump is enough each time: the source never halts.
BOOST_AUTO_TEST_CASE(epoch_bumps_under_a_publishing_leader_publish_no_row_twice) {
  TestDatabase database("bumplive");
  SourceSpec source{uniqueName("bl", database), &database, {{"batch_size", "200"}}};
  std::string config = writeConfig({source});
  migrate(config);
  const std::string table = source.outboxTable();
  insertRows(database.sql(), table, 20000, 0);
  BridgeProcess bridge(config);
  bridge.start();
  std::atomic<bool> producing{true};
  std::thread producer([&] {
    auto conn = database.connect();
    for (int n = 20000; producing; n += 50) {
      insertRows(*conn, table, 50, n);
      std::this_thread::sleep_for(2ms);
    }
  });
  constexpr uint64_t kBumps = 20;
  uint64_t before = 0;
  for (uint64_t bumps = 0; bumps < kBumps; ++bumps) {
    // The leader publishing again, in the epoch the last bump began.
    BOOST_REQUIRE_MESSAGE(waitUntil([&] {
                            auto state = database.state(source.name);
                            return state.epoch == bumps + 1 && state.publishedThrough >= before + 300;
                          }, 30s),
                          bridge.log());
    before = database.state(source.name).publishedThrough;
    auto bump = runBridge({"epoch", "bump", "--config", config, "--source", source.name, "--reason",
                           fmt::format("live bump {}", bumps + 1)});
    BOOST_REQUIRE_MESSAGE(bump.exitCode == 0, bump.err);
    before = std::max(before, database.state(source.name).publishedThrough);
  }
  std::this_thread::sleep_for(300ms);
  producing = false;
  producer.join();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] {
                          return database.allPublished(source.name, table) ||
                                 !database.state(source.name).haltedReason.empty();
                        }, 60s),
                        bridge.log());
  auto state = database.state(source.name);
  BOOST_REQUIRE_MESSAGE(state.haltedReason.empty(), state.haltedReason);
  BOOST_TEST(state.epoch == kBumps + 1);
  requireEveryRowOnceAcrossEpochs(database, source, kBumps + 1);
  BOOST_TEST(bridge.stop() == 0);
}

// A stale leader's publishes (or the last session's, left in nats.c's buffer) landing after the
// leader that finished the bump read the stream's tip (issue 19, item 7, follow-up). The finish took
// their rows' versions away; reconcile saw the old-epoch messages and only moved the epoch's start
// past them, so the scan published those rows again in the new epoch: each in the stream twice.
// Set up step by step: a leader assigned versions 101..110 and froze before publishing them; the
// operator bumps; the next leader finishes the bump (paused, so it publishes nothing yet); then the
// frozen leader's publishes of 101..105 land, fenced exactly as it fences them; the new epoch's
// leader had already given two rows new versions (its publishes refused by those messages). Now:
// rows 101..105 keep their epoch-1 versions, the rest go out once in epoch 2, densely after the
// bump's versions.
BOOST_AUTO_TEST_CASE(old_epoch_messages_landing_after_the_bump_is_finished_keep_their_versions) {
  PublishedSource published("bumplate", "blt", 100);
  auto& [database, source, config, table, bridge] = published;
  auto& sql = database.sql();

  // The leader that froze: versions 101..110 assigned, none published.
  const std::vector<OutboxRow> frozen = assignedByAFrozenLeader(published, 10);

  // The operator bumps; the next leader finishes the bump (the stream ends at version 100) and,
  // the source paused, publishes nothing.
  setPaused(published, true);
  auto bump = runBridge({"epoch", "bump", "--config", config, "--source", source.name, "--reason", "late landing",
                         "--wait", "0"});
  BOOST_REQUIRE_MESSAGE(bump.exitCode == 0, bump.err);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return bumpFinished(published); }, 20s), bridge.log());
  BOOST_TEST(database.scalar(fmt::format("SELECT COUNT(*) FROM {}_versions WHERE version > 100", table)) == 0u);
  BOOST_TEST(database.scalar(fmt::format("SELECT versions_after FROM outbox_epoch_history WHERE source = '{}' AND "
                                         "epoch = 2",
                                         source.name)) == 110u);

  // An operator quarantines one of the rows the finish took a version from (it has none now).
  BOOST_REQUIRE(sql.exec(fmt::format("INSERT INTO outbox_quarantine (source, outbox_id, reason) VALUES ('{}', {}, "
                                     "'held back')",
                                     source.name, frozen[2].id))
                    .isOk());
  // The frozen leader resumes: its publishes of versions 101..105, epoch 1, each fenced on the
  // sequence and on the previous version's Msg-Id, land after the finish's read of the tip.
  landStale(published, {frozen.begin(), frozen.begin() + 5}, 100);
  BOOST_REQUIRE_EQUAL(readStream(source).size(), 105u);
  // Meanwhile the new epoch's leader had given the rows of 101 and 106 versions 111 and 112 (their
  // publishes were refused: the messages above took the sequence they were fenced on).
  BOOST_REQUIRE(sql.exec(fmt::format("DELETE FROM {}_versions WHERE version > 110", table)).isOk());
  BOOST_REQUIRE(sql.exec(fmt::format("INSERT INTO {}_versions (version, outbox_id) VALUES (111, {}), (112, {})", table,
                                     frozen[0].id, frozen[5].id))
                    .isOk());
  BOOST_REQUIRE(sql.exec(fmt::format("UPDATE outbox_source_state SET assigned_through = 112 WHERE source = '{}'",
                                     source.name))
                    .isOk());
  insertRows(sql, table, 20, 110);  // and producers go on

  setPaused(published, false);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return drained(published) && database.state(source.name).publishedThrough > 110; },
                                  30s),
                        bridge.log());
  auto state = database.state(source.name);
  BOOST_REQUIRE_MESSAGE(state.haltedReason.empty(), state.haltedReason);
  BOOST_TEST(state.epoch == 2u);
  requireEveryRowOnceAcrossEpochs(database, source, 2);
  // The rows the stale messages carried keep those versions; epoch 2 has the other 5 and the 20 new.
  for (size_t i = 0; i < 5; ++i) {
    BOOST_TEST(database.scalar(fmt::format("SELECT version FROM {}_versions WHERE outbox_id = {}", table,
                                           frozen[i].id)) == 101 + i);
  }
  BOOST_TEST(state.publishedThrough == 110u + 5 + 20);
  BOOST_TEST(readStream(source).size() == 130u);
  // The quarantined row was in the stream all along (version 103): its quarantine is lifted
  // (review finding: it stayed quarantined and versioned, and prune never took it).
  BOOST_TEST(database.scalar(fmt::format("SELECT COUNT(*) FROM outbox_quarantine WHERE source = '{}' AND outbox_id = {}",
                                         source.name, frozen[2].id)) == 0u);
  BOOST_TEST(bridge.stop() == 0);
}

// The same across two bumps: the first bump's epoch publishes nothing before the operator bumps
// again; the frozen leader's publishes of 101..103 land before the second bump's finish reads the
// tip, and those of 104..105 after it. The second finish gives 101..103 back, reconcile in epoch 3
// gives 104 and 105 back (the first finish's records were kept: epoch 2 never published), and the
// other rows go out once, in epoch 3.
BOOST_AUTO_TEST_CASE(old_epoch_messages_landing_around_a_second_bump_keep_their_versions) {
  PublishedSource published("bumptwice", "btw", 100);
  auto& [database, source, config, table, bridge] = published;
  const std::vector<OutboxRow> frozen = assignedByAFrozenLeader(published, 10);
  setPaused(published, true);
  auto first = runBridge({"epoch", "bump", "--config", config, "--source", source.name, "--reason", "first", "--wait",
                          "0"});
  BOOST_REQUIRE_MESSAGE(first.exitCode == 0, first.err);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return bumpFinished(published); }, 20s), bridge.log());
  landStale(published, {frozen.begin(), frozen.begin() + 3}, 100);
  auto second = runBridge({"epoch", "bump", "--config", config, "--source", source.name, "--reason", "second"});
  BOOST_REQUIRE_MESSAGE(second.exitCode == 0, second.err);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return bumpFinished(published); }, 20s), bridge.log());
  BOOST_REQUIRE_EQUAL(database.state(source.name).epoch, 3u);
  for (size_t i = 0; i < 3; ++i) {
    BOOST_TEST(database.scalar(fmt::format("SELECT COALESCE(MAX(version), 0) FROM {}_versions WHERE outbox_id = {}",
                                           table, frozen[i].id)) == 101 + i);
  }
  landStale(published, {frozen.begin() + 3, frozen.begin() + 5}, 103);
  setPaused(published, false);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return drained(published); }, 30s), bridge.log());
  auto state = database.state(source.name);
  BOOST_REQUIRE_MESSAGE(state.haltedReason.empty(), state.haltedReason);
  requireEveryRowOnceAcrossEpochs(database, source, 3);
  for (size_t i = 0; i < 5; ++i) {
    BOOST_TEST(database.scalar(fmt::format("SELECT version FROM {}_versions WHERE outbox_id = {}", table,
                                           frozen[i].id)) == 101 + i);
  }
  BOOST_TEST(readStream(source).size() == 110u);
  BOOST_TEST(bridge.stop() == 0);
}

// completeEpochBump refused, for good, a bump the stream had overtaken (a message of the new
// epoch or a later one, from another writer, stored between the bump and its finish), but
// reconcile returned that refusal without halting: no halted_reason for an operator to read. Now
// the source halts with the reason (outbox_halted 1), and a second bump resolves it.
BOOST_AUTO_TEST_CASE(a_bump_the_stream_overtook_before_its_finish_halts_the_source) {
  PublishedSource published("bumpover", "bov", 20);
  auto& [database, source, config, table, bridge] = published;
  auto& sql = database.sql();
  auto bump = runBridge({"epoch", "bump", "--config", config, "--source", source.name, "--reason", "first", "--wait",
                         "0"});
  BOOST_REQUIRE_MESSAGE(bump.exitCode == 0, bump.err);
  BOOST_REQUIRE_EQUAL(database.state(source.name).epoch, 2u);
  // Another writer's message of epoch 7 lands before any bridge finishes the bump.
  auto foreign = publishAsBridge(source, {OutboxRow{0, "item", "foreign", "upsert", "{\"foreign\":true}", 0, 21}}, 7, 20,
                                 /*fenceOnPreviousVersion=*/false);
  BOOST_REQUIRE_EQUAL(foreign.size(), 1u);
  BOOST_REQUIRE_MESSAGE(foreign[0].ok, foreign[0].error);
  bridge.start();
  const int port = bridge.httpPort();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return !database.state(source.name).haltedReason.empty(); }, 20s), bridge.log());
  const std::string reason = database.state(source.name).haltedReason;
  BOOST_TEST(reason.find("holds epoch 7") != std::string::npos, reason);
  BOOST_TEST(reason.find("epoch bump") != std::string::npos, reason);
  BOOST_TEST(waitUntil([&] { return sourceMetric(port, "outbox_halted", source.name) == 1; }, 10s));
  BOOST_TEST(readStream(source).size() == 21u);  // published nothing

  // The operator bumps again, above the stream's epoch: the leader finishes it and goes on.
  auto again = runBridge({"epoch", "bump", "--config", config, "--source", source.name, "--reason", "second"});
  BOOST_REQUIRE_MESSAGE(again.exitCode == 0, again.err);
  insertRows(sql, table, 10, 20);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] {
                          if (!database.allPublished(source.name, table)) return false;
                          auto state = database.state(source.name);
                          return state.haltedReason.empty() && state.publishedThrough > 21;
                        }, 20s),
                        bridge.log());
  BOOST_TEST(database.state(source.name).epoch == 8u);
  BOOST_TEST(waitUntil([&] { return sourceMetric(port, "outbox_halted", source.name) == 0; }, 10s));
  BOOST_TEST(readStream(source).size() == 31u);
  BOOST_TEST(bridge.stop() == 0);
}

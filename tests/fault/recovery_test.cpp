#define BOOST_TEST_MODULE fault_recovery
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "harness.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

std::vector<nats::StoredMessage> readStream(const SourceSpec& source) {
  StreamReader reader;
  return reader.readAll(source.stream(), "control." + source.name);
}

bool publishedThrough(TestDatabase& db, const SourceSpec& source, uint64_t version) {
  return db.state(source.name).publishedThrough == version;
}

// A source whose first `rows` rows a bridge published (epoch 1), that bridge stopped again.
struct PublishedSource {
  TestDatabase database;
  SourceSpec source;
  std::string config;
  std::string table;
  BridgeProcess bridge;
  PublishedSource(const std::string& purpose, const std::string& prefix, int rows)
      : database(purpose),
        source{uniqueName(prefix, database), &database, {}},
        config(writeConfig({source})),
        table(source.outboxTable()),
        bridge(config) {
    migrate(config);
    insertRows(database.sql(), table, rows, 0);
    bridge.start();
    BOOST_REQUIRE_MESSAGE(waitUntil([&] { return publishedThrough(database, source, static_cast<uint64_t>(rows)); }, 20s),
                          bridge.log());
    BOOST_REQUIRE(bridge.stop() == 0);
    BOOST_REQUIRE_EQUAL(readStream(source).size(), static_cast<size_t>(rows));
  }
};

// A leader that gave `count` new rows the versions after published_through (as its assign
// transaction writes them, the scan past them) and froze before publishing them: what it would
// publish, in version order.
std::vector<OutboxRow> assignedByAFrozenLeader(PublishedSource& p, int count) {
  auto& sql = p.database.sql();
  const uint64_t after = p.database.state(p.source.name).publishedThrough;
  insertRows(sql, p.table, count, static_cast<int>(after));
  auto rows = readOutboxRows(sql, p.table, fmt::format("id NOT IN (SELECT outbox_id FROM {}_versions)", p.table));
  BOOST_REQUIRE_EQUAL(rows.size(), static_cast<size_t>(count));
  std::string values;
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].version = after + 1 + i;
    values += fmt::format("{}({}, {})", i ? "," : "", rows[i].version, rows[i].id);
  }
  BOOST_REQUIRE(sql.exec(fmt::format("INSERT INTO {}_versions (version, outbox_id) VALUES {}", p.table, values)).isOk());
  BOOST_REQUIRE(sql.exec(fmt::format("UPDATE outbox_source_state SET assigned_through = {0}, scan_cursor = {2}, "
                                     "scan_floor = {2} WHERE source = '{1}'",
                                     rows.back().version, p.source.name, rows.back().id))
                    .isOk());
  return rows;
}

void setPaused(PublishedSource& p, bool paused) {
  BOOST_REQUIRE(p.database.sql()
                    .exec(fmt::format("UPDATE outbox_source_state SET paused = {} WHERE source = '{}'", paused ? 1 : 0,
                                      p.source.name))
                    .isOk());
}

// Whether no bump waits for the leader to finish it.
bool bumpFinished(PublishedSource& p) {
  return p.database.scalar(fmt::format("SELECT bump_from_epoch IS NULL FROM outbox_source_state WHERE source = '{}'",
                                       p.source.name)) == 1;
}

// The stale leader's publishes of `rows` (epoch 1), fenced as it fences them, after sequence
// `afterSeq`: each must be stored.
void landStale(PublishedSource& p, const std::vector<OutboxRow>& rows, uint64_t afterSeq) {
  auto acks = publishAsBridge(p.source, rows, 1, afterSeq, /*fenceOnPreviousVersion=*/true);
  BOOST_REQUIRE_EQUAL(acks.size(), rows.size());
  for (const auto& ack : acks) BOOST_REQUIRE_MESSAGE(ack.ok, ack.error);
}

// Everything committed is published, or the source halted.
bool drained(PublishedSource& p) {
  auto state = p.database.state(p.source.name);
  return !state.haltedReason.empty() ||
         (p.database.unversioned(p.table) == 0 && state.publishedThrough == state.assignedThrough);
}

// After epoch bumps, through `lastEpoch`: each outbox row of `source` is in the stream exactly once
// (by payload: each row's is its own), under the version it has now; no message of an epoch
// follows one of a later epoch; each epoch's versions are dense from where it began
// (outbox_epoch_history.versions_after).
void requireEveryRowOnceAcrossEpochs(TestDatabase& database, const SourceSpec& source, uint64_t lastEpoch) {
  std::map<uint64_t, uint64_t> versionsAfter;  // epoch -> where its versions begin
  for (uint64_t e = 2; e <= lastEpoch; ++e) {
    versionsAfter[e] = database.scalar(fmt::format(
        "SELECT versions_after FROM outbox_epoch_history WHERE source = '{}' AND epoch = {}", source.name, e));
  }

  // What the stream says, by (epoch, version): each once, in epoch order, dense within an epoch.
  std::map<std::pair<uint64_t, uint64_t>, std::string> published;
  std::map<std::string, uint64_t> copies;  // payload (one per row) -> messages carrying it
  uint64_t streamEpoch = 1, lastVersion = 0;
  for (const auto& m : readStream(source)) {
    uint64_t epoch = headerU64(m, "Outbox-Epoch"), version = headerU64(m, "Outbox-Version");
    BOOST_REQUIRE_MESSAGE(epoch >= streamEpoch, fmt::format("epoch {} message (version {}) at sequence {} after epoch {}",
                                                            epoch, version, m.seq, streamEpoch));
    uint64_t expected = epoch == streamEpoch ? lastVersion + 1 : versionsAfter[epoch] + 1;
    BOOST_REQUIRE_MESSAGE(version == expected, fmt::format("sequence {}: epoch {} version {}, expected {}", m.seq,
                                                           epoch, version, expected));
    BOOST_REQUIRE(published.emplace(std::make_pair(epoch, version), m.data).second);
    BOOST_REQUIRE_MESSAGE(++copies[m.data] == 1, fmt::format("the row with payload {} is in the stream twice (again "
                                                             "as epoch {} version {}, sequence {})",
                                                             m.data, epoch, version, m.seq));
    streamEpoch = epoch;
    lastVersion = version;
  }
  BOOST_TEST(streamEpoch == lastEpoch);
  // Every row is in the stream under the version it has now, with its own payload.
  auto epochOf = [&](uint64_t version) {
    uint64_t epoch = 1;
    for (const auto& [e, after] : versionsAfter) {
      if (version > after) epoch = e;
    }
    return epoch;
  };
  const std::string table = source.outboxTable();
  const uint64_t rows = database.scalar("SELECT COUNT(*) FROM " + table);
  auto conn = database.connect();
  auto all = conn->query(fmt::format("SELECT v.version, o.payload FROM {0} o JOIN {0}_versions v ON v.outbox_id = o.id "
                                     "ORDER BY o.id",
                                     table));
  BOOST_REQUIRE(all.isOk());
  uint64_t checked = 0;
  while (all->next()) {
    uint64_t version = all->u64(0);
    auto it = published.find({epochOf(version), version});
    BOOST_REQUIRE_MESSAGE(it != published.end(), fmt::format("version {} is not in the stream", version));
    BOOST_REQUIRE_EQUAL(it->second, std::string(all->text(1)));
    ++checked;
  }
  BOOST_TEST(checked == rows);
  BOOST_TEST(copies.size() == rows);
}

}  // namespace

// The stream deleted under a running bridge: it is recreated and refilled from the outbox rows.
BOOST_AUTO_TEST_CASE(a_deleted_stream_is_recreated_and_republished_from_the_table) {
  TestDatabase database("del");
  SourceSpec source{uniqueName("del", database), &database, {}};
  std::string config = writeConfig({source});
  migrate(config);
  insertRows(database.sql(), source.outboxTable(), 1000);
  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE(waitUntil([&] { return publishedThrough(database, source, 1000); }, 20s));
  StreamReader reader;
  BOOST_REQUIRE(reader.js().deleteStream(source.stream()).isOk());
  insertRows(database.sql(), source.outboxTable(), 500, 1000);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] {
                          return publishedThrough(database, source, 1500) && reader.exists(source.stream()) &&
                                 reader.state(source.stream()).messages == 1500;
                        }, 30s),
                        bridge.log());
  auto messages = readStream(source);
  BOOST_REQUIRE_EQUAL(checkDenseOnce(messages, source.name, 1500), "");
  BOOST_TEST(database.state(source.name).publishedStreamSeq == 1500u);
  BOOST_TEST(bridge.stop() == 0);
}

// The database restored from a backup taken before the stream's tip: the bridge halts with the
// reason and publishes nothing; `epoch bump` recovers, and no version is ever reused.
BOOST_AUTO_TEST_CASE(a_restored_database_halts_until_epoch_bump_and_versions_are_not_reused) {
  TestDatabase database("restore");
  SourceSpec source{uniqueName("rst", database), &database, {}};
  std::string config = writeConfig({source});
  migrate(config);
  const std::string table = source.outboxTable();
  auto& sql = database.sql();
  BridgeProcess bridge(config);
  insertRows(sql, table, 50, 0);
  bridge.start();
  BOOST_REQUIRE(waitUntil([&] { return publishedThrough(database, source, 50); }, 20s));
  BOOST_REQUIRE(bridge.stop() == 0);
  // The backup.
  BOOST_REQUIRE(sql.exec("CREATE TABLE backup_outbox AS SELECT * FROM " + table).isOk());
  BOOST_REQUIRE(sql.exec("CREATE TABLE backup_versions AS SELECT * FROM " + table + "_versions").isOk());
  BOOST_REQUIRE(sql.exec("CREATE TABLE backup_state AS SELECT * FROM outbox_source_state").isOk());
  insertRows(sql, table, 50, 50);
  bridge.start();
  BOOST_REQUIRE(waitUntil([&] { return publishedThrough(database, source, 100); }, 20s));
  BOOST_REQUIRE(bridge.stop() == 0);
  // The restore: rows 51..100 and their versions are gone from the database, not from the stream.
  BOOST_REQUIRE(sql.exec("DELETE FROM " + table).isOk());
  BOOST_REQUIRE(sql.exec("INSERT INTO " + table + " SELECT * FROM backup_outbox").isOk());
  BOOST_REQUIRE(sql.exec("DELETE FROM " + table + "_versions").isOk());
  BOOST_REQUIRE(sql.exec("INSERT INTO " + table + "_versions SELECT * FROM backup_versions").isOk());
  BOOST_REQUIRE(sql.exec("DELETE FROM outbox_source_state").isOk());
  BOOST_REQUIRE(sql.exec("INSERT INTO outbox_source_state SELECT * FROM backup_state").isOk());
  // Writes after the restore.
  insertRows(sql, table, 30, 1000);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return !database.state(source.name).haltedReason.empty(); }, 20s), bridge.log());
  std::string reason = database.state(source.name).haltedReason;
  BOOST_TEST(reason.find("ahead of the database") != std::string::npos, reason);
  BOOST_TEST(reason.find("epoch bump") != std::string::npos, reason);
  std::this_thread::sleep_for(300ms);
  BOOST_TEST(readStream(source).size() == 100u);  // published nothing while halted

  auto bump = runBridge({"epoch", "bump", "--config", config, "--source", source.name, "--reason", "restored backup"});
  BOOST_REQUIRE_MESSAGE(bump.exitCode == 0, bump.err);
  BOOST_TEST(bump.out.find("epoch 2") != std::string::npos, bump.out);
  auto state = database.state(source.name);
  BOOST_TEST(state.epoch == 2u);
  BOOST_TEST(state.haltedReason.empty());
  BOOST_TEST(state.assignedThrough >= 100u);
  BOOST_TEST(database.scalar(fmt::format("SELECT COUNT(*) FROM outbox_epoch_history WHERE source = '{}' AND epoch = 2 "
                                         "AND reason = 'restored backup' AND versions_after = 100",
                                         source.name)) == 1u);
  // The running bridge notices the bump and publishes the 30 new rows above version 100.
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return publishedThrough(database, source, 130); }, 20s), bridge.log());
  auto messages = readStream(source);
  BOOST_REQUIRE_EQUAL(messages.size(), 130u);
  std::set<uint64_t> versions;
  for (size_t i = 0; i < messages.size(); ++i) {
    uint64_t v = headerU64(messages[i], "Outbox-Version");
    BOOST_REQUIRE_MESSAGE(versions.insert(v).second, fmt::format("version {} reused", v));
    BOOST_TEST(headerU64(messages[i], "Outbox-Epoch") == (i < 100 ? 1u : 2u));
    if (i >= 100) BOOST_TEST(v == 101 + (i - 100));  // dense again within the new epoch
  }
  BOOST_TEST(bridge.stop() == 0);
}

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
                          auto state = database.state(source.name);
                          return !state.haltedReason.empty() ||
                                 (database.unversioned(table) == 0 &&
                                  state.publishedThrough == state.assignedThrough);
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
                          auto state = database.state(source.name);
                          return state.haltedReason.empty() && database.unversioned(table) == 0 &&
                                 state.publishedThrough == state.assignedThrough && state.publishedThrough > 21;
                        }, 20s),
                        bridge.log());
  BOOST_TEST(database.state(source.name).epoch == 8u);
  BOOST_TEST(waitUntil([&] { return sourceMetric(port, "outbox_halted", source.name) == 0; }, 10s));
  BOOST_TEST(readStream(source).size() == 31u);
  BOOST_TEST(bridge.stop() == 0);
}

// Poison rows of every kind halt only their source, with the row id; quarantine lets it go on
// with no hole; on_poison = "quarantine" does that by itself.
BOOST_AUTO_TEST_CASE(a_poison_row_halts_only_its_source_until_quarantined) {
  TestDatabase database("poison");
  SourceSpec healthy{uniqueName("ok", database), &database, {}};
  SourceSpec poisoned{uniqueName("bad", database), &database, {}};
  std::string config = writeConfig({healthy, poisoned});
  migrate(config);
  auto& sql = database.sql();
  insertRows(sql, poisoned.outboxTable(), 3, 0);
  BOOST_REQUIRE(sql.exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES "
                                     "('bad.type', 'x', 'upsert', '{{}}')",
                                     poisoned.outboxTable()))
                    .isOk());
  uint64_t poisonId = database.scalar("SELECT LAST_INSERT_ID()");
  insertRows(sql, poisoned.outboxTable(), 2, 3);
  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return !database.state(poisoned.name).haltedReason.empty(); }, 20s),
                        bridge.log());
  std::string reason = database.state(poisoned.name).haltedReason;
  BOOST_TEST(reason.find(fmt::format("id={}", poisonId)) != std::string::npos, reason);
  BOOST_TEST(reason.find("subject token") != std::string::npos, reason);
  // The rows before it went out: marked as the halted session settles, a moment after the halt.
  BOOST_TEST(waitUntil([&] { return database.state(poisoned.name).publishedThrough == 3u; }, 5s));
  BOOST_TEST(bridge.log().find(fmt::format("id={}", poisonId)) != std::string::npos);
  // The other source goes on.
  insertRows(sql, healthy.outboxTable(), 200);
  BOOST_REQUIRE(waitUntil([&] { return publishedThrough(database, healthy, 200); }, 20s));
  BOOST_TEST(database.state(healthy.name).haltedReason.empty());
  BOOST_TEST(database.state(poisoned.name).publishedThrough == 3u);

  auto q = runBridge({"quarantine", "--config", config, "--source", poisoned.name, "--id", std::to_string(poisonId),
                      "--reason", "bad entity type"});
  BOOST_REQUIRE_MESSAGE(q.exitCode == 0, q.err);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return publishedThrough(database, poisoned, 5); }, 20s), bridge.log());
  auto messages = readStream(poisoned);
  BOOST_REQUIRE_EQUAL(checkDenseOnce(messages, poisoned.name, 5), "");
  BOOST_TEST(database.scalar(fmt::format("SELECT COUNT(*) FROM {}_versions WHERE outbox_id = {}", poisoned.outboxTable(),
                                         poisonId)) == 0u);
  BOOST_TEST(database.scalar("SELECT COUNT(*) FROM outbox_quarantine") == 1u);
  // A published row cannot be quarantined: refused as asked (exit 2).
  auto late = runBridge({"quarantine", "--config", config, "--source", poisoned.name, "--id", "1", "--reason", "x"});
  BOOST_TEST(late.exitCode == 2);
  BOOST_TEST(late.err.find("already has version") != std::string::npos, late.err);
  BOOST_TEST(bridge.stop() == 0);
}

BOOST_AUTO_TEST_CASE(a_fixed_poison_row_resumes_its_source) {
  TestDatabase database("fix");
  SourceSpec source{uniqueName("fix", database), &database, {}};
  std::string config = writeConfig({source});
  migrate(config);
  auto& sql = database.sql();
  BOOST_REQUIRE(sql.exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES "
                                     "('item', 'k', 'replace', '{{}}')", source.outboxTable())).isOk());
  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return !database.state(source.name).haltedReason.empty(); }, 20s), bridge.log());
  BOOST_TEST(database.state(source.name).haltedReason.find("op 'replace'") != std::string::npos);
  allowOutboxUpdates(database, source.outboxTable());  // the operator fixes the row in place
  BOOST_REQUIRE(sql.exec(fmt::format("UPDATE {} SET op = 'upsert'", source.outboxTable())).isOk());
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return publishedThrough(database, source, 1); }, 20s), bridge.log());
  BOOST_TEST(database.state(source.name).haltedReason.empty());
  BOOST_TEST(bridge.stop() == 0);
}

BOOST_AUTO_TEST_CASE(on_poison_quarantine_sets_each_kind_aside_without_a_hole) {
  TestDatabase database("autoq");
  SourceSpec source{uniqueName("aq", database), &database, {{"on_poison", "\"quarantine\""}}};
  std::string config = writeConfig({source});
  migrate(config);
  auto& sql = database.sql();
  const std::string table = source.outboxTable();
  // An older table without JSON validation lets invalid JSON in.
  BOOST_REQUIRE(sql.exec(fmt::format("ALTER TABLE {} MODIFY payload LONGTEXT NULL", table)).isOk());
  auto insert = [&](const std::string& type, const std::string& op, const std::string& payloadSql) {
    BOOST_REQUIRE(sql.exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('{}', 'k', '{}', {})",
                                       table, type, op, payloadSql)).isOk());
    return database.scalar("SELECT LAST_INSERT_ID()");
  };
  insert("item", "upsert", "'{\"n\": 1}'");
  std::set<uint64_t> poison;
  poison.insert(insert("item", "upsert", "'{not json'"));
  insert("item", "upsert", "'{\"n\": 2}'");
  poison.insert(insert("item", "upsert", "CONCAT('{\"big\": \"', REPEAT('x', 1100000), '\"}')"));  // over max_payload
  poison.insert(insert("it em", "upsert", "'{}'"));
  poison.insert(insert("item", "upsert", "NULL"));
  insert("item", "delete", "NULL");
  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return publishedThrough(database, source, 3); }, 20s), bridge.log());
  BOOST_TEST(database.state(source.name).haltedReason.empty());
  BOOST_TEST(database.scalar("SELECT COUNT(*) FROM outbox_quarantine") == poison.size());
  for (uint64_t id : poison) {
    BOOST_TEST(database.scalar(fmt::format("SELECT COUNT(*) FROM outbox_quarantine WHERE outbox_id = {}", id)) == 1u);
  }
  auto messages = readStream(source);
  BOOST_REQUIRE_EQUAL(checkDenseOnce(messages, source.name, 3), "");
  BOOST_TEST(database.scalar(fmt::format("SELECT reason LIKE '%max_payload%' FROM outbox_quarantine WHERE outbox_id = {}",
                                         *std::next(poison.begin()))) == 1u);
  BOOST_TEST(bridge.stop() == 0);
}

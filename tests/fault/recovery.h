#pragma once

// What the fault_recovery cases share (recovery_test.cpp, recovery_epoch_test.cpp,
// recovery_poison_test.cpp): a source's stream read back and its published mark, a source a bridge
// published and stopped, a frozen leader's assigned rows and its stale publishes landing late, and
// the check that every row is in the stream once across epoch bumps.

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "harness.h"

namespace outbox::test {

using namespace std::chrono_literals;

inline std::vector<nats::StoredMessage> readStream(const SourceSpec& source) {
  StreamReader reader;
  return reader.readAll(source.stream(), "control." + source.name);
}

inline bool publishedThrough(TestDatabase& db, const SourceSpec& source, uint64_t version) {
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
inline std::vector<OutboxRow> assignedByAFrozenLeader(PublishedSource& p, int count) {
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

inline void setPaused(PublishedSource& p, bool paused) {
  BOOST_REQUIRE(p.database.sql()
                    .exec(fmt::format("UPDATE outbox_source_state SET paused = {} WHERE source = '{}'", paused ? 1 : 0,
                                      p.source.name))
                    .isOk());
}

// Whether no bump waits for the leader to finish it.
inline bool bumpFinished(PublishedSource& p) {
  return p.database.scalar(fmt::format("SELECT bump_from_epoch IS NULL FROM outbox_source_state WHERE source = '{}'",
                                       p.source.name)) == 1;
}

// The stale leader's publishes of `rows` (epoch 1), fenced as it fences them, after sequence
// `afterSeq`: each must be stored.
inline void landStale(PublishedSource& p, const std::vector<OutboxRow>& rows, uint64_t afterSeq) {
  auto acks = publishAsBridge(p.source, rows, 1, afterSeq, /*fenceOnPreviousVersion=*/true);
  BOOST_REQUIRE_EQUAL(acks.size(), rows.size());
  for (const auto& ack : acks) BOOST_REQUIRE_MESSAGE(ack.ok, ack.error);
}

// Everything committed is published, or the source halted.
inline bool drained(PublishedSource& p) {
  return p.database.allPublished(p.source.name, p.table) || !p.database.state(p.source.name).haltedReason.empty();
}

// After epoch bumps, through `lastEpoch`: each outbox row of `source` is in the stream exactly once
// (by payload: each row's is its own), under the version it has now; no message of an epoch
// follows one of a later epoch; each epoch's versions are dense from where it began
// (outbox_epoch_history.versions_after).
inline void requireEveryRowOnceAcrossEpochs(TestDatabase& database, const SourceSpec& source, uint64_t lastEpoch) {
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

}  // namespace outbox::test

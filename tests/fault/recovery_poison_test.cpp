// Poison rows: a source halted with the row's id until it is quarantined or fixed, and
// on_poison = "quarantine". Part of fault_recovery (recovery_test.cpp); the helpers are in
// recovery.h.
#include <boost/test/unit_test.hpp>

#include <set>

#include <fmt/format.h>

#include "harness.h"
#include "recovery.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

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

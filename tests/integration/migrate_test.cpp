#define BOOST_TEST_MODULE migrate
#include <boost/test/unit_test.hpp>

#include <fmt/format.h>

#include "harness.h"

using namespace outbox;
using namespace outbox::test;

BOOST_AUTO_TEST_CASE(migrate_runs_each_schema_file_once) {
  TestDatabase database("mig");
  SourceSpec a{uniqueName("mga", database), &database, {}};
  SourceSpec b{uniqueName("mgb", database), &database, {}};
  std::string config = writeConfig({a, b});
  auto first = runBridge({"migrate", "--config", config});
  BOOST_TEST(first.exitCode == 0);
  BOOST_TEST(first.out.find("applied 001_bridge_tables.sql") != std::string::npos, first.out);
  BOOST_TEST(first.out.find("(" + a.outboxTable() + ")") != std::string::npos);
  BOOST_TEST(first.out.find("(" + b.outboxTable() + ")") != std::string::npos);
  BOOST_TEST(first.out.find(stack().mysqlPassword) == std::string::npos);
  auto second = runBridge({"migrate", "--config", config});
  BOOST_TEST(second.exitCode == 0);
  BOOST_TEST(second.out.find("up to date") != std::string::npos, second.out);
  // 001-008 of the bridge's tables, and the outbox table files (001, 002) once per source.
  BOOST_TEST(database.scalar("SELECT COUNT(*) FROM outbox_schema_migrations") == 12u);
  // `list` of information_schema `view` for `table`, comma-separated.
  auto schema = [&](const char* list, const char* view, const std::string& table) {
    auto rows = database.sql().query(fmt::format("SELECT GROUP_CONCAT({}) FROM information_schema.{} WHERE TABLE_SCHEMA = '{}' "
                                                 "AND TABLE_NAME = '{}'",
                                                 list, view, database.name(), table));
    BOOST_REQUIRE(rows.isOk());
    BOOST_REQUIRE(rows->next());
    return std::string(rows->text(0));
  };
  auto columns = [&](const std::string& table) { return schema("COLUMN_NAME ORDER BY ORDINAL_POSITION", "COLUMNS", table); };
  auto indexes = [&](const std::string& table) {
    return schema("DISTINCT INDEX_NAME ORDER BY INDEX_NAME", "STATISTICS", table);
  };
  // Exactly the contract's (v2) columns and keys: the outbox table append-only, versions beside it;
  // the state row also names the row a halt is about (halted_row_id, halted_version) and the epoch
  // a bump the leader has yet to finish moves on from (bump_from_epoch).
  BOOST_TEST(columns("outbox_source_state") ==
                 "source,epoch,bump_from_epoch,assigned_through,published_through,published_stream_seq,scan_cursor,scan_floor,"
                 "halted_reason,halted_row_id,halted_version,paused,updated_at",
             columns("outbox_source_state"));
  BOOST_TEST(columns(a.outboxTable()) == "id,entity_type,entity_key,op,payload,created_at");
  BOOST_TEST(indexes(a.outboxTable()) == "PRIMARY");
  BOOST_TEST(columns(a.outboxTable() + "_versions") == "version,outbox_id");
  BOOST_TEST(indexes(a.outboxTable() + "_versions") == "PRIMARY,uk_outbox_id");
  BOOST_TEST(database.scalar("SELECT COUNT(*) FROM outbox_source_state") == 2u);
}

// Schema file 005 moved the row a halt is about out of halted_reason's text into halted_row_id
// (and halted_version): a source halted before the upgrade keeps its row, so quarantining that
// row still resumes it.
BOOST_AUTO_TEST_CASE(a_halt_recorded_before_the_halted_row_columns_keeps_its_row) {
  TestDatabase database("adminmig");
  SourceSpec poisoned{uniqueName("amp", database), &database, {}};
  SourceSpec refused{uniqueName("amr", database), &database, {}};
  SourceSpec other{uniqueName("amo", database), &database, {}};
  std::string config = writeConfig({poisoned, refused, other});
  migrate(config);
  auto setReason = [&](const SourceSpec& s, const std::string& reason) {
    BOOST_REQUIRE(database.sql().exec(fmt::format("UPDATE outbox_source_state SET halted_reason = '{}' WHERE source = '{}'",
                                                  reason, s.name)).isOk());
  };
  // As the bridge before file 005 wrote them.
  BOOST_REQUIRE(database.sql().exec("ALTER TABLE outbox_source_state DROP COLUMN halted_row_id, DROP COLUMN halted_version").isOk());
  BOOST_REQUIRE(database.sql().exec("DELETE FROM outbox_schema_migrations WHERE file = '005_halted_row.sql'").isOk());
  setReason(poisoned, "poison row id=417: payload is not valid JSON (TAPE_ERROR)");
  setReason(refused, "unpublishable version 96 (row id=123): message of 2000 bytes is over the server''s max_payload "
                     "of 1024 bytes; raise the server''s max_payload (the source resumes by itself), or run ...");
  setReason(other, "the stream is ahead of the database: version 9 of epoch 1 is in it, published_through says 4");
  migrate(config);
  BOOST_TEST((database.state(poisoned.name).haltedRow == HaltedRow{417, std::nullopt}));
  BOOST_TEST((database.state(refused.name).haltedRow == HaltedRow{123, 96}));
  BOOST_TEST(!database.state(other.name).haltedRow.has_value());
  BOOST_TEST(database.state(other.name).haltedReason.find("the stream is ahead") == 0u);
}

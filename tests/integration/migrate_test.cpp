#define BOOST_TEST_MODULE migrate
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "db/schema_files.h"
#include "harness.h"

using namespace outbox;
using namespace outbox::test;

namespace {

// How many schema files of `scope` ("bridge": once per database, "outbox": once per outbox
// table) migrate runs: those sql/meson.build embeds.
size_t schemaFilesOf(std::string_view scope) {
  const auto& files = db::schemaFiles();
  return static_cast<size_t>(std::count_if(files.begin(), files.end(), [&](const auto& f) { return f.scope == scope; }));
}

// `list` of information_schema `view` for `table` of `database`, comma-separated.
std::string schemaOf(TestDatabase& database, const std::string& list, const char* view, const std::string& table) {
  auto rows = database.sql().query(fmt::format("SELECT GROUP_CONCAT({}) FROM information_schema.{} WHERE TABLE_SCHEMA = '{}' "
                                               "AND TABLE_NAME = '{}'",
                                               list, view, database.name(), table));
  BOOST_REQUIRE(rows.isOk());
  BOOST_REQUIRE(rows->next());
  return std::string(rows->optText(0).value_or(""));
}
std::string columnsOf(TestDatabase& database, const std::string& table) {
  return schemaOf(database, "COLUMN_NAME ORDER BY ORDINAL_POSITION", "COLUMNS", table);
}
std::string indexesOf(TestDatabase& database, const std::string& table) {
  return schemaOf(database, "DISTINCT INDEX_NAME ORDER BY INDEX_NAME", "STATISTICS", table);
}
// Each column of `table` with its type, nullability and default, by name.
std::string columnDefinitionsOf(TestDatabase& database, const std::string& table) {
  return schemaOf(database,
                  "CONCAT(COLUMN_NAME, ' ', COLUMN_TYPE, ' ', IS_NULLABLE, ' ', COALESCE(COLUMN_DEFAULT, '-')) ORDER BY "
                  "COLUMN_NAME SEPARATOR '; '",
                  "COLUMNS", table);
}

const std::string kStateColumns =
    "source,epoch,bump_from_epoch,assigned_through,published_through,published_stream_seq,scan_cursor,scan_floor,"
    "halted_reason,halted_row_id,halted_version,paused,updated_at";

}  // namespace

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
  // The bridge's tables' files once, and the outbox table's once per source.
  BOOST_TEST(database.scalar("SELECT COUNT(*) FROM outbox_schema_migrations") ==
             schemaFilesOf("bridge") + 2 * schemaFilesOf("outbox"));
  auto columns = [&](const std::string& table) { return columnsOf(database, table); };
  auto indexes = [&](const std::string& table) { return indexesOf(database, table); };
  // Exactly the (v2) columns and keys of docs/design.md, "The tables": the outbox table
  // append-only, versions beside it; the state row also names the row a halt is about
  // (halted_row_id, halted_version) and the epoch a bump the leader has yet to finish moves on from
  // (bump_from_epoch).
  BOOST_TEST(columns("outbox_source_state") == kStateColumns, columns("outbox_source_state"));
  BOOST_TEST(columns(a.outboxTable()) == "id,entity_type,entity_key,op,payload,created_at,headers");
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

// Issue 19 (MySQL): schema files 002, 004 and 005 used MariaDB's ADD COLUMN IF NOT EXISTS, which
// MySQL refuses; they now ask information_schema and run an ALTER adding just the missing columns.
// Run again (their records deleted) on a state table with every column, with some, and with none
// of them, they add exactly what is missing, where the file says, as the shipped files did, and
// leave the columns that are there (and their values) alone.
BOOST_AUTO_TEST_CASE(the_state_columns_files_add_only_what_is_missing) {
  TestDatabase database("migcol");
  SourceSpec a{uniqueName("mca", database), &database, {}};
  std::string config = writeConfig({a});
  BOOST_REQUIRE(runBridge({"migrate", "--config", config}).exitCode == 0);
  BOOST_REQUIRE_EQUAL(columnsOf(database, "outbox_source_state"), kStateColumns);
  const std::string definitions = columnDefinitionsOf(database, "outbox_source_state");
  auto rerun = [&](const std::string& drops, const std::string& expectedColumns) {
    const std::string what = drops.empty() ? "every column there" : drops;
    BOOST_TEST_CONTEXT(what) {
      if (!drops.empty()) BOOST_REQUIRE(database.sql().exec("ALTER TABLE outbox_source_state " + drops).isOk());
      BOOST_REQUIRE(database.sql().exec("DELETE FROM outbox_schema_migrations WHERE file IN ('002_pause.sql', "
                                        "'004_scan_cursor.sql', '005_halted_row.sql')").isOk());
      auto again = runBridge({"migrate", "--config", config});
      BOOST_REQUIRE_MESSAGE(again.exitCode == 0, again.err);
      for (const char* file : {"002_pause.sql", "004_scan_cursor.sql", "005_halted_row.sql"}) {
        BOOST_TEST(again.out.find(std::string("applied ") + file) != std::string::npos, again.out);
      }
      BOOST_TEST(columnsOf(database, "outbox_source_state") == expectedColumns);
      BOOST_TEST(columnDefinitionsOf(database, "outbox_source_state") == definitions);
      // Each file recorded once: the bridge's tables' and the outbox table's.
      BOOST_TEST(database.scalar("SELECT COUNT(*) FROM outbox_schema_migrations") ==
                 schemaFilesOf("bridge") + schemaFilesOf("outbox"));
    }
  };
  // Every column there: nothing changes, values kept.
  BOOST_REQUIRE(database.sql().exec(fmt::format("UPDATE outbox_source_state SET paused = 1, scan_cursor = 7, scan_floor = "
                                                "5, halted_row_id = 3 WHERE source = '{}'", a.name)).isOk());
  rerun("", kStateColumns);
  BOOST_TEST(database.scalar(fmt::format("SELECT paused * 1000 + scan_cursor * 100 + scan_floor * 10 + halted_row_id FROM "
                                         "outbox_source_state WHERE source = '{}'", a.name)) == 1753u);
  // One of each pair missing: the ALTER adds it where it was.
  rerun("DROP COLUMN scan_cursor, DROP COLUMN halted_row_id", kStateColumns);
  BOOST_TEST(database.scalar(fmt::format("SELECT scan_floor FROM outbox_source_state WHERE source = '{}'", a.name)) == 5u);
  // The other of each pair, and paused: 002 puts paused right after halted_reason, then 005 puts
  // halted_version after halted_row_id (the files' own AFTER clauses, as shipped).
  rerun("DROP COLUMN paused, DROP COLUMN scan_floor, DROP COLUMN halted_version",
        "source,epoch,bump_from_epoch,assigned_through,published_through,published_stream_seq,scan_cursor,scan_floor,"
        "halted_reason,paused,halted_row_id,halted_version,updated_at");
  // None of them: as a first migrate of these files.
  rerun("DROP COLUMN paused, DROP COLUMN scan_cursor, DROP COLUMN scan_floor, DROP COLUMN halted_row_id, DROP COLUMN "
        "halted_version",
        kStateColumns);
}

// Issue 19 (MySQL): outbox 002's move of a v1 table (versions in a `version` column) dropped its
// indexes with MariaDB's DROP INDEX IF EXISTS; it now drops the ones information_schema lists.
// Whichever of uk_version and idx_pending a v1 table has, the move copies every version and leaves
// the v2 table; run on a table that is v2 already, it changes nothing.
BOOST_AUTO_TEST_CASE(the_v1_move_drops_whichever_version_indexes_the_table_has) {
  TestDatabase database("migv1");
  SourceSpec both{uniqueName("mvb", database), &database, {}};
  SourceSpec unique{uniqueName("mvu", database), &database, {}};
  SourceSpec pending{uniqueName("mvp", database), &database, {}};
  SourceSpec v2{uniqueName("mv2", database), &database, {}};
  std::string config = writeConfig({both, unique, pending, v2});
  BOOST_REQUIRE(runBridge({"migrate", "--config", config}).exitCode == 0);
  auto& sql = database.sql();
  auto toV1 = [&](const SourceSpec& s, const std::string& indexes) {
    BOOST_REQUIRE(sql.exec(fmt::format("ALTER TABLE `{}` ADD COLUMN version BIGINT UNSIGNED NULL{}", s.outboxTable(),
                                       indexes)).isOk());
    BOOST_REQUIRE(sql.exec(fmt::format("INSERT INTO `{}` (entity_type, entity_key, version) VALUES ('item', '1', 1), "
                                       "('item', '2', NULL), ('item', '3', 2)",
                                       s.outboxTable())).isOk());
  };
  toV1(both, ", ADD UNIQUE KEY uk_version (version), ADD KEY idx_pending (version, id)");
  toV1(unique, ", ADD UNIQUE KEY uk_version (version)");
  toV1(pending, ", ADD KEY idx_pending (version, id)");
  BOOST_REQUIRE(sql.exec(fmt::format("INSERT INTO `{}` (entity_type, entity_key) VALUES ('item', '1')", v2.outboxTable())).isOk());
  BOOST_REQUIRE(sql.exec(fmt::format("INSERT INTO `{}_versions` (version, outbox_id) VALUES (1, 1)", v2.outboxTable())).isOk());
  BOOST_REQUIRE(sql.exec("DELETE FROM outbox_schema_migrations WHERE file = '002_versions_table.sql'").isOk());
  auto again = runBridge({"migrate", "--config", config});
  BOOST_REQUIRE_MESSAGE(again.exitCode == 0, again.err);
  for (const SourceSpec* s : {&both, &unique, &pending, &v2}) {
    BOOST_TEST_CONTEXT(s->outboxTable()) {
      BOOST_TEST(again.out.find("applied 002_versions_table.sql (" + s->outboxTable() + ")") != std::string::npos, again.out);
      BOOST_TEST(columnsOf(database, s->outboxTable()) == "id,entity_type,entity_key,op,payload,created_at,headers");
      BOOST_TEST(indexesOf(database, s->outboxTable()) == "PRIMARY");
      BOOST_TEST(columnsOf(database, s->outboxTable() + "_versions") == "version,outbox_id");
      BOOST_TEST(indexesOf(database, s->outboxTable() + "_versions") == "PRIMARY,uk_outbox_id");
    }
  }
  for (const SourceSpec* s : {&both, &unique, &pending}) {
    auto moved = sql.query(fmt::format("SELECT GROUP_CONCAT(CONCAT(version, '->', outbox_id) ORDER BY version) FROM `{}_versions`",
                                       s->outboxTable()));
    BOOST_REQUIRE(moved.isOk());
    BOOST_REQUIRE(moved->next());
    BOOST_TEST(std::string(moved->text(0)) == "1->1,2->3", s->outboxTable());
  }
  BOOST_TEST(database.scalar(fmt::format("SELECT COUNT(*) FROM `{}_versions`", v2.outboxTable())) == 1u);
}

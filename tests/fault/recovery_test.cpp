#define BOOST_TEST_MODULE fault_recovery
// Recovery (fault_recovery): a stream deleted under the bridge, a database restored from a backup.
// Epoch bumps against a leader are in recovery_epoch_test.cpp, poison rows in
// recovery_poison_test.cpp; what they share in recovery.h.
#include <boost/test/unit_test.hpp>

#include <set>
#include <thread>

#include <fmt/format.h>

#include "harness.h"
#include "recovery.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

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

// The headers column added to a table made before it (docs/design.md, "The message shaped by its
// row"): `migrate` online under a producer, or giving up rather than hold writers back. Part of
// subject (subject_test.cpp).
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <thread>

#include <fmt/format.h>

#include "harness.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

// The outbox table as the schema files before 003 left it: no headers column, 003 not applied.
void asBeforeTheHeadersColumn(TestDatabase& database, const SourceSpec& source) {
  auto& sql = database.sql();
  BOOST_REQUIRE(sql.exec(fmt::format("ALTER TABLE {} DROP COLUMN headers", source.outboxTable())).isOk());
  BOOST_REQUIRE(sql.exec(fmt::format("DELETE FROM outbox_schema_migrations WHERE file = '003_headers_column.sql' AND "
                                     "target = '{}'",
                                     source.outboxTable()))
                    .isOk());
}

}  // namespace

// Upgrade: a table made by the schema files before the headers column gets it from `migrate`
// while a producer writes and a bridge of this version waits for it (it halts naming migrate and
// resumes by itself); nothing is lost.
BOOST_AUTO_TEST_CASE(migrate_adds_the_headers_column_online_while_a_producer_writes) {
  TestDatabase database("hdrup");
  SourceSpec source{uniqueName("hu", database), &database, {}};
  std::string config = writeConfig({source});
  migrate(config);
  asBeforeTheHeadersColumn(database, source);
  std::atomic<bool> stop{false};
  std::atomic<int> written{0}, failed{0};
  std::thread producer([&] {
    auto conn = database.connect();
    while (!stop) {
      if (conn->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('item', 'k{}', "
                                 "'upsert', '{{}}')",
                                 source.outboxTable(), written.load()))
              .isOk()) {
        ++written;
      } else {
        ++failed;
      }
      std::this_thread::sleep_for(2ms);
    }
  });
  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return bridge.log().find("run `outbox-bridge migrate`") != std::string::npos; },
                                  20s),
                        bridge.log());
  auto migrated = runBridge({"migrate", "--config", config});
  BOOST_REQUIRE_MESSAGE(migrated.exitCode == 0, migrated.out + migrated.err);
  BOOST_TEST((migrated.out + migrated.err).find("003_headers_column.sql") != std::string::npos);
  std::this_thread::sleep_for(300ms);
  stop = true;
  producer.join();
  BOOST_TEST(failed.load() == 0);
  BOOST_TEST(written.load() > 0);
  BOOST_TEST(database.scalar(fmt::format("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                                         "DATABASE() AND TABLE_NAME = '{}' AND COLUMN_NAME = 'headers'",
                                         source.outboxTable())) == 1u);
  const uint64_t total = static_cast<uint64_t>(written.load());
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == total; }, 60s),
                        bridge.log());
  requireDenseOnce(source, total);
  BOOST_TEST(bridge.stop() == 0);
}

// The ALTER waits for the table's metadata lock, and writers queue behind it: with a long
// transaction on the table, migrate gives up after 10 s instead of holding the producers for as
// long as that transaction lasts; run again later, it adds the column.
BOOST_AUTO_TEST_CASE(migrate_gives_up_rather_than_hold_writers_behind_a_long_transaction) {
  TestDatabase database("hdrlock");
  SourceSpec source{uniqueName("hl", database), &database, {}};
  std::string config = writeConfig({source});
  migrate(config);
  asBeforeTheHeadersColumn(database, source);
  auto holder = database.connect();  // a report reading the table inside a long transaction
  BOOST_REQUIRE(holder->exec("START TRANSACTION").isOk());
  BOOST_REQUIRE(holder->exec(fmt::format("SELECT COUNT(*) FROM {}", source.outboxTable())).isOk());
  std::chrono::steady_clock::duration insertTook{};
  bool sawAlterWait = false, inserted = false;
  std::thread producer([&] {
    auto conn = database.connect();
    // Once the ALTER waits for the table's metadata lock, a writer queues behind it.
    sawAlterWait = waitUntil(
        [&] {
          auto n = conn->queryU64("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = "
                                  "'Waiting for table metadata lock'");
          return n.isOk() && n->value_or(0) > 0;
        },
        8s);
    const auto t0 = std::chrono::steady_clock::now();
    inserted = conn->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('item', 'k', "
                                      "'upsert', '{{}}')",
                                      source.outboxTable()))
                   .isOk();
    insertTook = std::chrono::steady_clock::now() - t0;
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto refused = runBridge({"migrate", "--config", config});
  const auto migrateTook = std::chrono::steady_clock::now() - t0;
  producer.join();
  BOOST_TEST(refused.exitCode != 0);
  BOOST_TEST((refused.out + refused.err).find("Lock wait timeout") != std::string::npos, refused.out + refused.err);
  BOOST_TEST(migrateTook < 20s);
  BOOST_TEST(sawAlterWait);
  BOOST_TEST(inserted);
  BOOST_TEST(insertTook > 500ms);  // it did queue behind the ALTER ...
  BOOST_TEST(insertTook < 15s);    // ... but not for the holder's whole transaction
  BOOST_REQUIRE(holder->exec("COMMIT").isOk());
  auto again = runBridge({"migrate", "--config", config});
  BOOST_REQUIRE_MESSAGE(again.exitCode == 0, again.out + again.err);
  BOOST_TEST(database.scalar(fmt::format("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                                         "DATABASE() AND TABLE_NAME = '{}' AND COLUMN_NAME = 'headers'",
                                         source.outboxTable())) == 1u);
}

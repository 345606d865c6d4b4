#define BOOST_TEST_MODULE snapshot_read_only
#include <boost/test/unit_test.hpp>

#include <fmt/format.h>

#include "db/connection.h"
#include "harness.h"
#include "snapshot/snapshot.h"

using namespace outbox;
using namespace outbox::test;

// Issue 32: what the config's snapshot_query check misses, the server refuses. A SourceConfig
// built here, past the check, with a query that writes: the snapshot's READ ONLY transaction
// refuses the write, its READ ONLY session a statement that commits implicitly (TRUNCATE and DDL
// ran before: they end the transaction first), its connection (no CLIENT_MULTI_STATEMENTS) a
// second statement, and the table is as it was.
BOOST_AUTO_TEST_CASE(the_server_refuses_a_write_the_config_check_would_miss) {
  TestDatabase database("snapro");
  SourceSpec spec{uniqueName("sro", database), &database, {{"snapshot_query", "\"SELECT id, v FROM kept\""}}};
  const std::string path = writeConfig({spec});
  migrate(path);
  BOOST_REQUIRE(database.sql().exec("CREATE TABLE kept (id BIGINT PRIMARY KEY, v INT NOT NULL)").isOk());
  BOOST_REQUIRE(database.sql().exec("INSERT INTO kept VALUES (1, 10), (2, 20)").isOk());
  const Config config = loadConfig(path, processEnvironment());
  const SourceConfig* configured = config.findSource(spec.name);
  BOOST_REQUIRE(configured != nullptr);
  const std::string contents = "SELECT COALESCE(SUM(id * 1000 + v), 0) + COUNT(*) FROM kept";
  const uint64_t before = database.scalar(contents);

  // The query as configured works.
  {
    auto stream = SnapshotStream::open(*configured, true);
    BOOST_REQUIRE_MESSAGE(stream.isOk(), stream.status().message());
    BOOST_TEST((*stream)->writeTo([](std::string_view) { return true; }).isOk());
    BOOST_TEST((*stream)->header().recordCount == 2u);
  }
  for (const char* query : {"DELETE FROM kept", "UPDATE kept SET v = 0", "INSERT INTO kept VALUES (3, 30)",
                            "REPLACE INTO kept VALUES (1, 0)", "SELECT 1 --;\nDELETE FROM kept",
                            "SELECT id FROM kept; DELETE FROM kept", "DELETE FROM kept; SELECT id FROM kept",
                            "TRUNCATE kept", "DROP TABLE kept", "CREATE TABLE made (id INT)",
                            "ALTER TABLE kept ADD COLUMN w INT", "SELECT id FROM kept FOR UPDATE"}) {
    SourceConfig source = *configured;
    source.snapshotQuery = query;
    auto stream = SnapshotStream::open(source, true);
    BOOST_TEST(!stream.isOk(), "'" << query << "' was run as a snapshot");
    BOOST_TEST(database.scalar(contents) == before, "'" << query << "' changed the table");
  }
  BOOST_TEST(database.scalar("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND "
                             "TABLE_NAME = 'made'") == 0u);
  BOOST_TEST(database.scalar("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND "
                             "TABLE_NAME = 'kept'") == 2u);
  // And the server says why for a write (error 1792: a READ ONLY transaction).
  auto conn = database.connect();
  BOOST_REQUIRE(conn->exec("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY").isOk());
  Status refused = conn->exec("DELETE FROM kept");
  BOOST_TEST(refused.message().find("READ ONLY") != std::string::npos, refused.message());
  BOOST_TEST(conn->exec("ROLLBACK").isOk());
  // A second statement is a syntax error on a connection without CLIENT_MULTI_STATEMENTS.
  Status two = conn->exec("SELECT 1; SELECT 2");
  BOOST_TEST(!two.isOk());
  BOOST_TEST(two.message().find("1064") != std::string::npos, two.message());
  BOOST_TEST(database.scalar(contents) == before);
}

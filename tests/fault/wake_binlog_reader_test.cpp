// What the doorbell reads of the binary log (docs/design.md, "Waking up"), db::BinlogReader on the
// stack's MariaDB. Part of fault_wake (wake_test.cpp).
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <chrono>

#include <fmt/format.h>

#include "db/binlog.h"
#include "harness.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

// What the doorbell reads (db::BinlogReader) on the stack's MariaDB: the tables a committed
// transaction wrote, by database; nothing for rows deleted, a rollback or an XA PREPARE;
// the table a statement logged as text inserts into; the database of DDL; "unknown" where the log
// does not say (XA COMMIT).
BOOST_AUTO_TEST_CASE(the_binlog_reader_tells_commits_by_table_and_says_when_it_cannot) {
  TestDatabase one("wake_rd1");
  TestDatabase two("wake_rd2");
  for (auto* d : {&one, &two}) {
    BOOST_REQUIRE(d->sql().exec("CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)").isOk());
  }
  auto reader = db::BinlogReader::open(stackParams(), 1'500'000'000u + static_cast<uint32_t>(getpid()), 500ms);
  BOOST_REQUIRE_MESSAGE(reader.isOk(), reader.status().message());
  BOOST_TEST((*reader)->format() == globalBinlogFormat());
  auto next = [&] { return nextCommit(**reader); };  // heartbeats skipped, within 10 s
  auto& a = one.sql();
  BOOST_REQUIRE(a.exec("INSERT INTO t (v) VALUES (1)").isOk());
  auto c = next();
  BOOST_TEST(!c.unknown);
  BOOST_TEST((c.tables == std::vector<std::string>{one.name() + ".t"}));

  // Rows deleted (prune): nothing to look for; the next commit reported is the insert after it.
  BOOST_REQUIRE(a.exec("DELETE FROM t WHERE v = 1").isOk());
  BOOST_REQUIRE(a.exec("INSERT INTO t (v) VALUES (6)").isOk());
  c = next();
  BOOST_TEST(!c.unknown);
  BOOST_TEST((c.tables == std::vector<std::string>{one.name() + ".t"}));
  BOOST_TEST(one.scalar("SELECT COUNT(*) FROM t WHERE v = 1") == 0u);

  BOOST_REQUIRE(a.begin().isOk());  // rolled back: nothing; the next commit is the other database's
  BOOST_REQUIRE(a.exec("INSERT INTO t (v) VALUES (2)").isOk());
  a.rollback();
  BOOST_REQUIRE(two.sql().exec("INSERT INTO t (v) VALUES (3)").isOk());
  c = next();
  BOOST_TEST((c.tables == std::vector<std::string>{two.name() + ".t"}));

  // XA: the PREPARE says nothing (not committed); the COMMIT, logged alone, names no table.
  BOOST_REQUIRE(a.exec("XA START 'wk'").isOk());
  BOOST_REQUIRE(a.exec("INSERT INTO t (v) VALUES (4)").isOk());
  BOOST_REQUIRE(a.exec("XA END 'wk'").isOk());
  BOOST_REQUIRE(a.exec("XA PREPARE 'wk'").isOk());
  BOOST_REQUIRE(a.exec("XA COMMIT 'wk'").isOk());
  c = next();
  BOOST_TEST(c.unknown);

  // A statement logged as a statement (STATEMENT, or MIXED, MariaDB's default): the table it
  // inserts into is read from it; an UPDATE adds no rows and says nothing (issue 33).
  BOOST_REQUIRE(a.exec("SET SESSION binlog_format = 'STATEMENT'").isOk());
  BOOST_REQUIRE(a.exec("INSERT INTO t (v) VALUES (5)").isOk());
  c = next();
  BOOST_TEST(!c.unknown);
  BOOST_TEST((c.tables == std::vector<std::string>{one.name() + ".t"}));
  BOOST_REQUIRE(a.exec("UPDATE t SET v = 7 WHERE v = 5").isOk());
  BOOST_REQUIRE(a.exec("INSERT INTO " + two.name() + ".t (v) VALUES (8)").isOk());
  c = next();
  BOOST_TEST((c.tables == std::vector<std::string>{two.name() + ".t"}));
  BOOST_REQUIRE(a.exec("SET SESSION binlog_format = DEFAULT").isOk());  // the server's own again

  // DDL: a look for its database's sources, not rows to wait for; then a row commit again, by table.
  BOOST_REQUIRE(a.exec("CREATE TABLE u (id INT PRIMARY KEY)").isOk());
  c = next();
  BOOST_TEST(!c.unknown);
  BOOST_TEST(c.tables.empty());
  BOOST_TEST((c.databases == std::vector<std::string>{one.name()}));
  BOOST_REQUIRE(a.exec("INSERT INTO u VALUES (1)").isOk());
  c = next();
  BOOST_TEST((c.tables == std::vector<std::string>{one.name() + ".u"}));
}

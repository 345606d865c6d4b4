#define BOOST_TEST_MODULE binlog_statement
#include <boost/test/unit_test.hpp>

#include "db/binlog_statement.h"

using namespace outbox::db;
using Kind = LoggedStatement::Kind;

namespace {

// "kind table" of what `statement` run in database "d" writes, e.g. "rows d.t".
std::string read(std::string_view statement, std::string_view database = "d") {
  const LoggedStatement s = readLoggedStatement(statement, database);
  switch (s.kind) {
    case Kind::kNewRows: return "rows " + s.table;
    case Kind::kNoNewRows: return "none";
    case Kind::kUnreadable: return "unreadable";
  }
  return "?";
}

}  // namespace

// Issue 33: on MIXED (MariaDB's default) most INSERTs reach the binary log as text, and the
// doorbell rang every source on each; the table they insert into is read from the statement.
BOOST_AUTO_TEST_CASE(the_table_an_insert_writes_is_read_as_the_server_reads_it) {
  BOOST_TEST(read("INSERT INTO t (a) VALUES (1)") == "rows d.t");
  BOOST_TEST(read("insert into `d2`.`t` values (1)") == "rows d2.t");
  BOOST_TEST(read("INSERT LOW_PRIORITY IGNORE INTO t SELECT * FROM u") == "rows d.t");
  BOOST_TEST(read("INSERT t VALUES (1)") == "rows d.t");
  BOOST_TEST(read("INSERT HIGH_PRIORITY t VALUES (1) ON DUPLICATE KEY UPDATE a = 2") == "rows d.t");
  BOOST_TEST(read("REPLACE DELAYED INTO x.y VALUES (1)") == "rows x.y");
  BOOST_TEST(read("INSERT INTO d . t VALUES (1)") == "rows d.t");
  BOOST_TEST(read("INSERT INTO `we``ird` VALUES (1)") == "rows d.we`ird");
  BOOST_TEST(read("INSERT INTO t\xc3\xa4 VALUES (1)") == "rows d.t\xc3\xa4");
  BOOST_TEST(read("INSERT INTO $t_1 VALUES (1)") == "rows d.$t_1");
  // Comments as the server takes them.
  BOOST_TEST(read("/* app */ INSERT /* x */ INTO /**/ t VALUES (1)") == "rows d.t");
  BOOST_TEST(read("-- a comment\nINSERT INTO t VALUES (1)") == "rows d.t");
  BOOST_TEST(read("--\tc\ninsert into t values (1)") == "rows d.t");
  BOOST_TEST(read("# c\ninsert into t values (1)") == "rows d.t");
  BOOST_TEST(read("INSERT INTO t -- x\n VALUES (1)") == "rows d.t");
  // LOAD DATA, as an Execute_load_query event carries it.
  BOOST_TEST(read("LOAD DATA INFILE '/tmp/x' INTO TABLE t") == "rows d.t");
  BOOST_TEST(read("LOAD DATA LOCAL INFILE '../../tmp/SQL_LOAD-1-2-3.data' IGNORE INTO TABLE `db`.`t` FIELDS "
                  "TERMINATED BY ','") == "rows db.t");
  BOOST_TEST(read("LOAD DATA CONCURRENT INFILE 'it''s \\' here' REPLACE INTO TABLE t") == "rows d.t");
}

// The bridge's own writes (marks, versions, leases) and prune's deletes add no outbox rows.
BOOST_AUTO_TEST_CASE(updates_and_deletes_add_no_rows) {
  BOOST_TEST(read("UPDATE outbox_source_state SET published_through = 7 WHERE source = 'a'") == "none");
  BOOST_TEST(read("DELETE FROM t WHERE id <= 10") == "none");
  BOOST_TEST(read("  update t set a = 1") == "none");
}

// What cannot be placed is unreadable: its database looks once.
BOOST_AUTO_TEST_CASE(what_cannot_be_read_is_said) {
  BOOST_TEST(read("CREATE TABLE t (id INT)") == "unreadable");
  BOOST_TEST(read("GRANT SELECT ON d.* TO 'u'@'%'") == "unreadable");
  BOOST_TEST(read("/*!40000 INSERT INTO t VALUES (1) */") == "unreadable");  // the server runs it
  BOOST_TEST(read("/*M!100100 INSERT INTO t VALUES (1) */") == "unreadable");
  BOOST_TEST(read("/* not closed INSERT INTO t VALUES (1)") == "unreadable");
  BOOST_TEST(read("--INSERT INTO t VALUES (1)") == "unreadable");  // `--` without a blank: no comment
  BOOST_TEST(read("INSERTINTO t VALUES (1)") == "unreadable");
  BOOST_TEST(read("INSERT INTO") == "unreadable");
  BOOST_TEST(read("INSERT INTO `t") == "unreadable");
  BOOST_TEST(read("INSERT INTO ``.t VALUES (1)") == "unreadable");
  BOOST_TEST(read("INSERT INTO t VALUES (1)", "") == "unreadable");  // no database to put it in
  BOOST_TEST(read("INSERT INTO x.t VALUES (1)", "") == "rows x.t");
  BOOST_TEST(read("LOAD DATA INFILE INTO TABLE t") == "unreadable");
  BOOST_TEST(read("WITH c AS (SELECT 1) INSERT INTO t SELECT * FROM c") == "unreadable");
  BOOST_TEST(read("") == "unreadable");
}

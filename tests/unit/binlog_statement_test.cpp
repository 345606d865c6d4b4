#define BOOST_TEST_MODULE binlog_statement
#include <boost/test/unit_test.hpp>

#include "db/binlog_statement.h"

using namespace outbox::db;
using Kind = LoggedStatement::Kind;

namespace {

// "kind table" of what `statement` run in database "d" writes, e.g. "rows d.t".
std::string read(std::string_view statement, std::string_view database = "d", bool insertId = false) {
  const LoggedStatement s = readLoggedStatement(statement, database, insertId);
  switch (s.kind) {
    case Kind::kNewRows: return "rows " + s.table;
    case Kind::kNoNewRows: return "none";
    case Kind::kSchema: return "schema";
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

// DDL adds no rows: its database's sources look once.
BOOST_AUTO_TEST_CASE(ddl_asks_its_database_to_look) {
  BOOST_TEST(read("CREATE TABLE t (id INT)") == "schema");
  BOOST_TEST(read("CREATE OR REPLACE TABLE t (id INT)") == "schema");
  BOOST_TEST(read("ALTER TABLE t ADD COLUMN b INT") == "schema");
  BOOST_TEST(read("DROP TABLE t") == "schema");
  BOOST_TEST(read("TRUNCATE TABLE t") == "schema");
  BOOST_TEST(read("GRANT SELECT ON d.* TO 'u'@'%'") == "schema");
  BOOST_TEST(read("SET PASSWORD FOR 'u'@'%' = PASSWORD('x')") == "schema");
}

// Review of issue 33 (c): MIXED logs a session's temporary tables around the statements it logs as
// text; they are the session's own, never an outbox, and asked its database to look for nothing.
BOOST_AUTO_TEST_CASE(temporary_tables_ask_nothing) {
  BOOST_TEST(read("CREATE TEMPORARY TABLE tmp (id INT)") == "none");
  BOOST_TEST(read("CREATE OR REPLACE TEMPORARY TABLE tmp SELECT * FROM t") == "none");
  BOOST_TEST(read("DROP TEMPORARY TABLE IF EXISTS `tmp`") == "none");
  // As the server logs the DROP of a session's temporary tables when it ends.
  BOOST_TEST(read("DROP /*!40005 TEMPORARY */ TABLE IF EXISTS `d`.`tmp`") == "none");
  BOOST_TEST(read("CREATE TABLE tmp_not (id INT)") == "schema");
}

// Review of issue 33 (a): on STATEMENT, an UPDATE or DELETE whose trigger (or a function it calls)
// inserts into the outbox names only its own table, and rang nothing. The log sets INSERT_ID before
// it when something it ran took an auto-increment value: then it may have added rows anywhere.
BOOST_AUTO_TEST_CASE(an_update_that_took_an_auto_increment_value_is_unreadable) {
  BOOST_TEST(read("UPDATE orders SET state = 'paid' WHERE id = 7", "d", true) == "unreadable");
  BOOST_TEST(read("DELETE FROM orders WHERE id = 7", "d", true) == "unreadable");
  BOOST_TEST(read("UPDATE orders SET state = 'paid' WHERE id = 7", "d", false) == "none");
  // A SELECT logged as text calls a function that writes.
  BOOST_TEST(read("SELECT `d`.`place_order`(7)", "d", true) == "unreadable");
  // An INSERT's own auto-increment: its table, as before.
  BOOST_TEST(read("INSERT INTO t (a) VALUES (1)", "d", true) == "rows d.t");
}

// Review of issue 33 (b): what could not be read rang the session's database, which need not be
// the one written. Read now: ANSI_QUOTES names, SET STATEMENT ... FOR, executable comments every
// server runs; what still cannot be read asks every source to look.
BOOST_AUTO_TEST_CASE(more_forms_are_read_and_the_rest_asks_everyone) {
  BOOST_TEST(read("INSERT INTO \"other\".\"t\" VALUES (1)") == "rows other.t");
  BOOST_TEST(read("INSERT INTO \"we\"\"ird\" VALUES (1)") == "rows d.we\"ird");
  BOOST_TEST(read("SET STATEMENT max_statement_time = 10, sql_mode = 'ANSI,NO_BACKSLASH_ESCAPES' FOR INSERT INTO "
                  "x.t VALUES (1)") == "rows x.t");
  BOOST_TEST(read("SET STATEMENT sql_mode = 'a for b' FOR UPDATE t SET a = 1") == "none");
  BOOST_TEST(read("set statement max_statement_time=-1.5 for /* c */ replace into t values (1)") == "rows d.t");
  BOOST_TEST(read("/*!40000 INSERT INTO t VALUES (1) */") == "rows d.t");  // the server runs it
  BOOST_TEST(read("/*M!100000 INSERT INTO x.t VALUES (1) */") == "rows x.t");
  BOOST_TEST(read("INSERT /*!50000 IGNORE */ INTO t VALUES (1)") == "rows d.t");
  BOOST_TEST(read("/*! INSERT INTO t VALUES (1) */") == "rows d.t");
  // A version some servers run and others do not; one inside another; not closed.
  BOOST_TEST(read("/*!100500 INSERT INTO t VALUES (1) */") == "unreadable");
  BOOST_TEST(read("/*M!100100 INSERT INTO t VALUES (1) */") == "unreadable");
  BOOST_TEST(read("/*!40000 /*!40000 INSERT INTO t VALUES (1) */ */") == "unreadable");
  BOOST_TEST(read("SET STATEMENT a = 1 INSERT INTO t VALUES (1)") == "schema");  // no FOR: not a SET STATEMENT
  BOOST_TEST(read("SET STATEMENT a = 'FOR' INSERT INTO t VALUES (1)") == "schema");
}

// What cannot be placed is unreadable: every source looks once.
BOOST_AUTO_TEST_CASE(what_cannot_be_read_is_said) {
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
  BOOST_TEST(read("CALL p()") == "unreadable");
  BOOST_TEST(read("") == "unreadable");
}

#define BOOST_TEST_MODULE sql_text
#include <boost/test/unit_test.hpp>

#include <string>

#include "config/section.h"

using outbox::config_detail::snapshotQueryProblem;

// Issue 32: snapshot_query is read as the server's lexer reads it. `--;` is no comment to
// MariaDB (it needs whitespace or a control character after `--`), so the DELETE after it ran
// when a client asked for a snapshot; executable comments run; INTO, FOR UPDATE and locking or
// waiting functions were accepted.
BOOST_AUTO_TEST_CASE(a_query_that_writes_locks_or_hides_a_statement_is_refused) {
  const std::pair<std::string, std::string> refused[] = {
      {"SELECT 1 --;\nDELETE FROM t", "second statement"},
      {"SELECT 1 --;\n; DELETE FROM t", "second statement"},
      {"SELECT 1 /*! ; DELETE FROM t */", "executable comment"},
      {"SELECT id FROM t /*!50000 FOR UPDATE */", "executable comment"},
      {"SELECT id FROM t /*M!100000 FOR UPDATE */", "executable comment"},
      {"SELECT id FROM t /*m! FOR UPDATE */", "executable comment"},
      {"SELECT * FROM t INTO OUTFILE '/tmp/x'", "INTO OUTFILE"},
      {"SELECT * INTO DUMPFILE '/tmp/x' FROM t", "INTO OUTFILE"},
      {"SELECT 1 INTO @v", "@variable"},
      {"SELECT 1 UNION SELECT 2 INTO @v", "INTO"},
      {"SELECT id FROM t FOR UPDATE", "FOR UPDATE"},
      {"SELECT id FROM t FOR /* c */ SHARE", "FOR SHARE"},
      {"select id from t for update skip locked", "FOR UPDATE"},
      {"WITH c AS (SELECT 1 AS id) SELECT id FROM c FOR UPDATE", "FOR UPDATE"},
      {"SELECT id FROM t LOCK IN SHARE MODE", "LOCK IN SHARE MODE"},
      {"SELECT id FROM t PROCEDURE ANALYSE()", "PROCEDURE"},
      {"SELECT GET_LOCK('x', 10)", "GET_LOCK"},
      {"SELECT release_lock('x')", "RELEASE_LOCK"},
      {"SELECT RELEASE_ALL_LOCKS()", "RELEASE_ALL_LOCKS"},
      {"SELECT SLEEP(5)", "SLEEP"},
      {"SELECT sleep (5)", "SLEEP"},
      {"SELECT `sleep`(5)", "SLEEP"},
      {"SELECT BENCHMARK(1000000000, MD5('a'))", "BENCHMARK"},
      {"SELECT LOAD_FILE('/etc/shadow') AS id", "LOAD_FILE"},
      {"SELECT NEXTVAL(s)", "NEXTVAL"},
      {"SELECT SETVAL(s, 1)", "SETVAL"},
      {"SELECT LASTVAL(s)", "LASTVAL"},
      {"SELECT NEXT VALUE FOR s", "NEXT VALUE FOR"},
      {"SELECT PREVIOUS VALUE FOR s", "PREVIOUS VALUE FOR"},
      {"SELECT MASTER_POS_WAIT('bin.000001', 4)", "MASTER_POS_WAIT"},
      {"SELECT MASTER_GTID_WAIT('0-1-100')", "MASTER_GTID_WAIT"},
      {"SELECT SOURCE_POS_WAIT('bin.000001', 4)", "SOURCE_POS_WAIT"},
      // Under NO_BACKSLASH_ESCAPES the string ends at \' and SLEEP runs.
      {"SELECT 'x\\', SLEEP(5) -- '", "NO_BACKSLASH_ESCAPES"},
      {"SELECT 'x\\'; DELETE FROM t; -- '", "NO_BACKSLASH_ESCAPES"},
      {std::string("SELECT 1\0; DELETE FROM t", 25), "control character"},
      {"SELECT 1 /* unclosed", "unclosed comment"},
      {"SELECT 'unclosed", "unclosed quote"},
  };
  for (const auto& [query, why] : refused) {
    const std::string problem = snapshotQueryProblem(query);
    BOOST_TEST(problem.find(why) != std::string::npos, "'" << query << "': got '" << problem << "', expected '" << why << "'");
  }
}

BOOST_AUTO_TEST_CASE(a_plain_read_is_accepted) {
  for (const char* query : {
           "SELECT id, display_name AS displayName FROM accounts",
           "SELECT 1 --1",                             // 1 minus -1: no comment, no second statement
           "SELECT a FROM t -- trailing",
           "SELECT a FROM t --",                       // "--" at the end is a comment
           "SELECT a FROM t --\tx",
           "SELECT a FROM t # x\n WHERE b = 'it''s'",
           "SELECT 'FOR UPDATE', `into` FROM t",
           "SELECT id, `sleep` FROM t",
           "SELECT a /* FOR UPDATE; DELETE */ FROM t",
           "SELECT a /* /* not nested */ FROM t",
           "SELECT sleeping_bag, next_value FROM t",
           "SELECT 'C:\\path' AS p FROM t",
           "SELECT a FROM t FOR SYSTEM_TIME ALL",
           "WITH c AS (SELECT 1 AS id) SELECT id FROM c;",
       }) {
    BOOST_TEST(snapshotQueryProblem(query).empty(), "'" << query << "': " << snapshotQueryProblem(query));
  }
}

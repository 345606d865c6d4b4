#define BOOST_TEST_MODULE session
#include <boost/test/unit_test.hpp>

#include <fmt/format.h>

#include "db/session.h"
#include "harness.h"

// db::Session against the real MariaDB: a call the server rolls back to settle a conflict
// (MariaDB 11.6+'s snapshot-isolation error 1020, a deadlock) runs again at once on the same
// connection, at most kRolledBackTries times; other failures are not retried. The server raises
// the errors itself (SIGNAL with their numbers), so the tries are counted exactly.

using namespace outbox;
using namespace outbox::test;

namespace {

// A statement the server answers with error `code`.
std::string raise(unsigned code) {
  return fmt::format("SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = {}, MESSAGE_TEXT = 'raised by the test'", code);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_call_the_server_rolled_back_runs_again) {
  TestDatabase database("session");
  db::Session session(stackParams(database.name()));
  for (unsigned code : {1020u, 1213u}) {
    int tries = 0;
    Status s = session.run([&](db::Connection& conn) { return conn.exec(++tries == 1 ? raise(code) : "DO 1"); });
    BOOST_TEST(s.isOk(), code << ": " << s.toString());
    BOOST_TEST(tries == 2, code);
    tries = 0;
    s = session.transaction([&](db::Connection& conn) { return conn.exec(++tries < 3 ? raise(code) : "DO 1"); });
    BOOST_TEST(s.isOk(), code << ": " << s.toString());
    BOOST_TEST(tries == 3, code);
  }
  // Rolled back every time: the caller sees it after the last try, as transient.
  int tries = 0;
  Status s = session.transaction([&](db::Connection& conn) {
    ++tries;
    return conn.exec(raise(1020));
  });
  BOOST_TEST(s.isTransient());
  BOOST_TEST((s.cause() == Cause::kRolledBack));
  BOOST_TEST(tries == db::Session::kRolledBackTries);
  // Anything else is not run again.
  tries = 0;
  s = session.run([&](db::Connection& conn) {
    ++tries;
    return conn.exec(raise(1205));  // a lock wait timed out: the row is held, asking at once will not help
  });
  BOOST_TEST(s.isTransient());
  BOOST_TEST(tries == 1);
  tries = 0;
  s = session.run([&](db::Connection& conn) {
    ++tries;
    return conn.exec("SELECT * FROM no_such_table");
  });
  BOOST_TEST(s.isPermanent());
  BOOST_TEST(tries == 1);
}

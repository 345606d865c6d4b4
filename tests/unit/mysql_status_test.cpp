#define BOOST_TEST_MODULE mysql_status
#include <boost/test/unit_test.hpp>

#include "db/binlog.h"
#include "db/connection.h"

using namespace outbox;

namespace {

Status from(unsigned code) { return db::fromMysql(code, "the server's text", "a statement"); }

}  // namespace

// Issue 19, finding 3: MariaDB 11.6+ (innodb_snapshot_isolation = ON by default since 11.6.2)
// answers a locking statement whose row another transaction changed meanwhile with error 1020
// (ER_CHECKREAD). It was permanent: "halted:" in the log, outbox_halted 1, reconcile and rescan
// every few seconds under load, since the relay's assign and mark write the same state row from
// two connections. It is a conflict the server rolled back, like a deadlock: db::Session runs the
// call again at once (kRolledBack), and only after three tries does the caller see it, as
// transient. (No 11.x server here: the mapping is what is tested.)
BOOST_AUTO_TEST_CASE(a_snapshot_isolation_conflict_is_run_again_not_a_halt) {
  const Status checkRead = from(1020);
  BOOST_TEST(checkRead.isTransient());
  BOOST_TEST((checkRead.cause() == Cause::kRolledBack));
  BOOST_TEST(checkRead.isLockConflict());
  BOOST_TEST(checkRead.message() == "a statement: mysql error 1020: the server's text");
  const Status deadlock = from(1213);
  BOOST_TEST(deadlock.isTransient());
  BOOST_TEST((deadlock.cause() == Cause::kRolledBack));
}

// A lock held by someone else: a wait that timed out (1205), or a NOWAIT read that met it (MariaDB
// says 1205, MySQL 3572). The hole's probe (docs/design.md, "Contract v2") reads either as "held".
BOOST_AUTO_TEST_CASE(a_held_lock_is_transient_and_says_so) {
  for (unsigned code : {1205u, 3572u}) {
    const Status s = from(code);
    BOOST_TEST(s.isTransient(), code);
    BOOST_TEST((s.cause() == Cause::kLockWait), code);
    BOOST_TEST(s.isLockConflict(), code);
  }
}

// Issue 19, "MySQL": error 4031 (MySQL 8's ER_CLIENT_INTERACTION_TIMEOUT, the server closing a
// session idle past wait_timeout) read as permanent; it is a lost connection like 2006/2013.
BOOST_AUTO_TEST_CASE(a_connection_the_server_closed_is_transient) {
  for (unsigned code : {0u, 2002u, 2003u, 2006u, 2013u, 2026u, 1053u, 1927u, 1040u, 4031u}) {
    const Status s = from(code);
    BOOST_TEST(s.isTransient(), code);
    BOOST_TEST((s.cause() == Cause::kConnection), code);
  }
}

// What callers ask instead of error numbers: a table not migrated, a privilege missing; anything
// else the server refuses is permanent with no more said.
BOOST_AUTO_TEST_CASE(missing_tables_and_privileges_are_named) {
  BOOST_TEST((from(1146).cause() == Cause::kMissingTable));
  BOOST_TEST(from(1146).isPermanent());
  for (unsigned code : {1045u, 1044u, 1142u, 1143u, 1227u}) {
    BOOST_TEST((from(code).cause() == Cause::kAccessDenied), code);
    BOOST_TEST(from(code).isPermanent(), code);
  }
  // A duplicate key is named (a read of new rows without its joins meets one: MysqlOutboxStore).
  BOOST_TEST((from(1062).cause() == Cause::kDuplicateKey));
  BOOST_TEST(from(1062).isPermanent());
  BOOST_TEST((from(1064).cause() == Cause::kServer));
  BOOST_TEST(from(1064).isPermanent());
  BOOST_TEST(!from(1064).isLockConflict());
  // A Status the bridge made itself has no cause.
  BOOST_TEST((Status::transient("ours").cause() == Cause::kNone));
}

// Issue 20: the doorbell watches no source whose database the server's binary log leaves out
// (binlog_do_db names others, or binlog_ignore_db names it): those poll instead of waiting for
// rings that never come.
BOOST_AUTO_TEST_CASE(the_doorbell_knows_which_databases_the_binary_log_carries) {
  using outbox::db::binlogCarries;
  BOOST_TEST(binlogCarries("", "", "shop"));
  BOOST_TEST(!binlogCarries("", "shop", "shop"));
  BOOST_TEST(!binlogCarries("", "audit,shop", "shop"));
  BOOST_TEST(binlogCarries("", "audit,shopping", "shop"));
  BOOST_TEST(binlogCarries("billing,shop", "", "shop"));
  BOOST_TEST(!binlogCarries("billing", "", "shop"));
  BOOST_TEST(!binlogCarries("billing", "shop", "shop"));
}

// db::fromMysql: what a MySQL or MariaDB error number means to a caller (the Cause it names, and
// whether asking again may work). Connections and the binlog reader report every failure through
// it; callers ask the Status, never the number.
#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>

#include <fmt/format.h>

#include "db/connection.h"

namespace outbox::db {

namespace {

// MySQL's numbers for errors MariaDB's headers name otherwise (or not at all).
constexpr unsigned kMysqlLockNowait = 3572;                 // ER_LOCK_NOWAIT: a NOWAIT read met a lock
constexpr unsigned kMysqlClientInteractionTimeout = 4031;   // the server closed an idle session

// What a failed call's error number was, and whether asking again may work.
struct Classified {
  Cause cause;
  bool transient;
};

Classified classify(unsigned code) {
  switch (code) {
    case 0:
    case CR_SERVER_GONE_ERROR:
    case CR_SERVER_LOST:
    case CR_CONNECTION_ERROR:
    case CR_CONN_HOST_ERROR:
    case CR_SERVER_LOST_EXTENDED:
    // Over TLS a server that goes away (a restart) reads as a TLS error ("unexpected eof").
    case CR_SSL_CONNECTION_ERROR:
    case ER_SERVER_SHUTDOWN:
    case ER_CONNECTION_KILLED:
    case ER_CON_COUNT_ERROR:
    case ER_TOO_MANY_USER_CONNECTIONS:
    case kMysqlClientInteractionTimeout:
      return {Cause::kConnection, true};
    case ER_LOCK_WAIT_TIMEOUT:
    case kMysqlLockNowait:
      return {Cause::kLockWait, true};
    case ER_LOCK_DEADLOCK:
    // MariaDB 11.6+ (innodb_snapshot_isolation = ON): a locking statement that waited for a row
    // another transaction then changed. The transaction is rolled back; the next try reads anew.
    case ER_CHECKREAD:
      return {Cause::kRolledBack, true};
    case ER_QUERY_INTERRUPTED:
      return {Cause::kServer, true};
    case ER_DUP_ENTRY:
      return {Cause::kDuplicateKey, false};
    case ER_NO_SUCH_TABLE:
    case ER_BAD_FIELD_ERROR:  // a column a newer schema file adds
      return {Cause::kMissingTable, false};
    case ER_ACCESS_DENIED_ERROR:
    case ER_DBACCESS_DENIED_ERROR:
    case ER_TABLEACCESS_DENIED_ERROR:
    case ER_COLUMNACCESS_DENIED_ERROR:
    case ER_SPECIFIC_ACCESS_DENIED_ERROR:
      return {Cause::kAccessDenied, false};
    default:
      return {Cause::kServer, false};
  }
}

}  // namespace

Status fromMysql(unsigned code, std::string_view error, std::string_view what) {
  std::string message = fmt::format("{}: mysql error {}: {}", what, code, error);
  const Classified c = classify(code);
  return (c.transient ? Status::transient(std::move(message)) : Status::permanent(std::move(message))).because(c.cause);
}

Status fromMysql(MYSQL* mysql, std::string_view what) {
  return fromMysql(mysql_errno(mysql), mysql_error(mysql), what);
}

}  // namespace outbox::db

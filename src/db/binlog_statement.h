#pragma once

#include <string>
#include <string_view>

namespace outbox::db {

// What a statement the binary log carries as text (binlog_format STATEMENT, or MIXED, MariaDB's
// default, for most INSERTs) writes, read as the server reads the head of it: comments as the
// server takes them (`-- ` needs a blank after it; `#` to the end of the line; `/* */`), names
// bare or in backquotes, a table qualified by its database or not.
struct LoggedStatement {
  enum class Kind {
    kNewRows,     // INSERT, REPLACE or LOAD DATA into `table`: new rows there
    kNoNewRows,   // UPDATE or DELETE: rows changed or removed, none added (prune, the bridge's marks)
    kUnreadable,  // anything else (DDL, GRANT, an executable comment, a form not read here)
  };
  Kind kind = Kind::kUnreadable;
  std::string table;  // kNewRows: "database.table", the database `defaultDatabase` when not named
};

// Reads `statement` (a Query event's text, or an Execute_load_query event's) whose session's
// database was `defaultDatabase` ("" for none). A statement that names no database while there is
// none is unreadable. Never throws; linear in what it reads.
LoggedStatement readLoggedStatement(std::string_view statement, std::string_view defaultDatabase);

}  // namespace outbox::db

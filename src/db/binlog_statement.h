#pragma once

#include <string>
#include <string_view>

namespace outbox::db {

// What a statement the binary log carries as text (binlog_format STATEMENT, or MIXED, MariaDB's
// default, for most INSERTs) writes, read as the server reads the head of it: comments as the
// server takes them (`-- ` needs a blank after it; `#` to the end of the line; `/* */`; the
// markers of an executable comment, `/*!NNNNN` and `/*M!NNNNN` up to version 10.0.0 and their
// `*/`, as blanks: every server runs what they hold), `SET STATEMENT ... FOR` before it, names
// bare, in backquotes or (ANSI_QUOTES) in double quotes, a table qualified by its database or not.
struct LoggedStatement {
  enum class Kind {
    kNewRows,     // INSERT, REPLACE or LOAD DATA into `table`: new rows there
    kNoNewRows,   // UPDATE or DELETE: rows changed or removed, none added (prune, the bridge's marks);
                  // CREATE or DROP TEMPORARY TABLE (a session's own table, never an outbox)
    kSchema,      // DDL, GRANT and the like: no rows, but its database's sources look once
    kUnreadable,  // anything else, which may have added rows to any table of any database (an
                  // INSERT not read, a SELECT or an UPDATE whose function or trigger inserts)
  };
  Kind kind = Kind::kUnreadable;
  std::string table;  // kNewRows: "database.table", the database `defaultDatabase` when not named
};

// Reads `statement` (a Query event's text, or an Execute_load_query event's) whose session's
// database was `defaultDatabase` ("" for none). A statement that names no database while there is
// none is unreadable. `insertId`: the log set an INSERT_ID for it (an Intvar event), so something
// it ran took an auto-increment value: an UPDATE or DELETE that did was a trigger's or a stored
// function's INSERT, into a table the statement does not name, and is unreadable. Never throws;
// linear in what it reads.
LoggedStatement readLoggedStatement(std::string_view statement, std::string_view defaultDatabase,
                                    bool insertId = false);

}  // namespace outbox::db

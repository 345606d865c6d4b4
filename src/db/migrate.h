#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "db/connection.h"

namespace outbox::db {

// Applies every schema file not yet recorded in outbox_schema_migrations: the bridge's tables
// once, then the outbox table file once per name in `outboxTables` (validated identifiers), then
// a state row for each of `sources`. Appends "file (target)" for each file it ran to `applied`.
Status migrate(Connection& conn, const std::vector<std::string>& outboxTables, const std::vector<std::string>& sources,
               std::vector<std::string>& applied);

// Splits a schema file into statements: a statement ends with ';' at the end of a line.
std::vector<std::string> splitStatements(const std::string& sql);

}  // namespace outbox::db

#include "db/migrate.h"

#include <sstream>

#include <fmt/format.h>

#include "db/schema_files.h"

namespace outbox::db {

std::vector<std::string> splitStatements(const std::string& sql) {
  std::vector<std::string> out;
  std::string current;
  std::istringstream in(sql);
  std::string line;
  while (std::getline(in, line)) {
    std::string trimmed = line.substr(0, line.find_last_not_of(" \t\r") + 1);
    if (trimmed.rfind("--", 0) == 0 || trimmed.find_first_not_of(" \t") == std::string::npos) continue;
    current += line + "\n";
    if (!trimmed.empty() && trimmed.back() == ';') {
      current.erase(current.find_last_of(';'));
      out.push_back(current);
      current.clear();
    }
  }
  if (current.find_first_not_of(" \t\n") != std::string::npos) out.push_back(current);
  return out;
}

namespace {

std::string substitute(std::string text, const std::string& table) {
  const std::string marker = "{{outbox_table}}";
  for (size_t pos = text.find(marker); pos != std::string::npos; pos = text.find(marker, pos + table.size())) {
    text.replace(pos, marker.size(), table);
  }
  return text;
}

// Whether `file` was applied to `target` ('' for the bridge's own tables).
Result<bool> isApplied(Connection& conn, const SchemaFile& file, const std::string& target) {
  auto done = conn.queryU64(fmt::format("SELECT COUNT(*) FROM outbox_schema_migrations WHERE file = {} AND target = {}",
                                        conn.quote(file.name), conn.quote(target)));
  if (!done.isOk()) return done.status();
  return done->value_or(0) > 0;
}

Status applyOnce(Connection& conn, const SchemaFile& file, const std::string& target,
                 std::vector<std::string>& applied) {
  auto done = isApplied(conn, file, target);
  if (!done.isOk()) return done.status();
  if (*done) return Status::ok();
  std::string sql = target.empty() ? std::string(file.sql) : substitute(file.sql, target);
  for (const auto& statement : splitStatements(sql)) {
    Status s = conn.exec(statement);
    if (!s.isOk()) return Status::permanent(fmt::format("{} ({}): {}", file.name, target, s.message()));
  }
  OUTBOX_RETURN_IF_ERROR(conn.exec(fmt::format("INSERT INTO outbox_schema_migrations (file, target) VALUES ({}, {})",
                                               conn.quote(file.name), conn.quote(target))));
  applied.push_back(target.empty() ? std::string(file.name) : fmt::format("{} ({})", file.name, target));
  return Status::ok();
}

// A file that begins "-- online:" changes nothing a running bridge reads or writes (a column
// only a newer bridge reads): it may be applied while bridges run.
bool appliesOnline(const SchemaFile& file) { return std::string_view(file.sql).starts_with("-- online:"); }

// Schema changes move what a running bridge writes (v2 moved versions out of the outbox table):
// with files to apply, a bridge that leads a source must be stopped first, unless every one of
// them applies online.
Status refuseWhileLed(Connection& conn, const std::vector<std::string>& outboxTables) {
  size_t pending = 0;
  for (const auto& file : schemaFiles()) {
    if (appliesOnline(file)) continue;
    const bool bridgeScope = std::string(file.scope) == "bridge";
    for (size_t i = 0; i < (bridgeScope ? 1 : outboxTables.size()); ++i) {
      auto done = isApplied(conn, file, bridgeScope ? "" : outboxTables[i]);
      if (!done.isOk()) return done.status();
      if (!*done) ++pending;
    }
  }
  if (pending == 0) return Status::ok();
  auto led = conn.query(
      "SELECT source, holder_id, expires_at FROM outbox_bridge_lease WHERE expires_at > NOW(6) ORDER BY source "
      "LIMIT 1");
  if (!led.isOk()) return Status::ok();  // no lease table yet: no bridge ever ran here
  if (!led->next()) return Status::ok();
  return Status::permanent(fmt::format(
      "{} schema file(s) to apply, but a bridge is running: source {} is led by {} (lease until {}). Stop every "
      "bridge of this database, run migrate, then start them again",
      pending, led->text("source"), led->text("holder_id"), led->text("expires_at")));
}

}  // namespace

Status migrate(Connection& conn, const std::vector<std::string>& outboxTables, const std::vector<std::string>& sources,
               std::vector<std::string>& applied) {
  OUTBOX_RETURN_IF_ERROR(conn.exec(
      "CREATE TABLE IF NOT EXISTS outbox_schema_migrations ("
      "file VARCHAR(255) NOT NULL, target VARCHAR(64) NOT NULL DEFAULT '', "
      "applied_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), PRIMARY KEY (file, target)"
      ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"));
  OUTBOX_RETURN_IF_ERROR(refuseWhileLed(conn, outboxTables));
  for (const auto& file : schemaFiles()) {
    if (std::string(file.scope) == "bridge") OUTBOX_RETURN_IF_ERROR(applyOnce(conn, file, "", applied));
  }
  for (const auto& table : outboxTables) {
    for (const auto& file : schemaFiles()) {
      if (std::string(file.scope) == "outbox") OUTBOX_RETURN_IF_ERROR(applyOnce(conn, file, table, applied));
    }
  }
  for (const auto& source : sources) {
    OUTBOX_RETURN_IF_ERROR(
        conn.exec(fmt::format("INSERT IGNORE INTO outbox_source_state (source) VALUES ({})", conn.quote(source))));
  }
  return Status::ok();
}

}  // namespace outbox::db

// MysqlOutboxStore::applierWorkLeft (docs/design.md, "Contract v2: finding late commits",
// replica appliers): whether a replication applier on the server may still write outbox rows
// with ids another server handed out. Read from the replication status when the account may
// (SLAVE MONITOR on MariaDB, REPLICATION CLIENT on MySQL), else from the applier threads in
// PROCESSLIST.
#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "common/log.h"
#include "relay/mysql_store.h"

namespace outbox {

namespace {

// The index of the first of `names` among the result's columns (MariaDB and MySQL before 8.0.22
// say Master, MySQL since says Source), compared as db::Rows::index() compares them.
std::optional<size_t> columnOf(const db::Rows& rows, std::initializer_list<std::string_view> names) {
  for (std::string_view name : names) {
    if (rows.has(name)) return rows.index(name);
  }
  return std::nullopt;
}

// What the replication connections of SHOW ALL SLAVES STATUS / SHOW REPLICA STATUS (one row
// each) have received and not executed, for people; nullopt when none has any. An event group is
// executed when its transaction committed: a connection whose executed position is its received
// one has nothing left, whether its SQL thread runs or not — unless its IO thread runs (or tries
// to connect): then its upstream is a live writer (a second primary) that may send a transaction
// holding any hole at any moment, even between this reading and the probe.
Result<std::optional<std::string>> relayLogBacklog(db::Rows& rows) {
  const auto name = columnOf(rows, {"Connection_name", "Channel_Name"});
  const auto readFile = columnOf(rows, {"Master_Log_File", "Source_Log_File"});
  const auto readPos = columnOf(rows, {"Read_Master_Log_Pos", "Read_Source_Log_Pos"});
  const auto execFile = columnOf(rows, {"Relay_Master_Log_File", "Relay_Source_Log_File"});
  const auto execPos = columnOf(rows, {"Exec_Master_Log_Pos", "Exec_Source_Log_Pos"});
  const auto sqlRunning = columnOf(rows, {"Slave_SQL_Running", "Replica_SQL_Running"});
  const auto ioRunning = columnOf(rows, {"Slave_IO_Running", "Replica_IO_Running"});
  if (!readFile || !readPos || !execFile || !execPos || !sqlRunning || !ioRunning) {
    return Status::permanent(
        "the server's replication status lacks the received and executed positions the bridge compares "
        "(Master_Log_File, Read_Master_Log_Pos, Relay_Master_Log_File, Exec_Master_Log_Pos, Slave_SQL_Running): an "
        "unsupported server version");
  }
  while (rows.next()) {
    const std::string_view received = rows.optText(*readFile).value_or("");
    const std::string_view executed = rows.optText(*execFile).value_or("");
    const uint64_t receivedPos = rows.isNull(*readPos) ? 0 : rows.u64(*readPos);
    const uint64_t executedPos = rows.isNull(*execPos) ? 0 : rows.u64(*execPos);
    const std::string_view io = rows.optText(*ioRunning).value_or("No");
    if (io != "No") {
      return std::optional<std::string>(fmt::format(
          "replication connection '{}' is receiving from a live upstream (IO thread: {}; a second primary?)",
          name ? rows.optText(*name).value_or("") : "", io));
    }
    if (received == executed && executedPos >= receivedPos) continue;
    return std::optional<std::string>(fmt::format(
        "replication connection '{}' has executed its relay log through {}:{} of {}:{} received (SQL thread "
        "running: {})",
        name ? rows.optText(*name).value_or("") : "", executed, executedPos, received, receivedPos,
        rows.optText(*sqlRunning).value_or("?")));
  }
  return std::optional<std::string>();
}

}  // namespace

Result<bool> MysqlOutboxStore::applierWorkLeft() {
  auto backlog = session_->run([&](db::Connection& conn) -> Result<std::optional<std::string>> {
    auto status = conn.query(mysql_ ? "SHOW REPLICA STATUS" : "SHOW ALL SLAVES STATUS");
    // MySQL before 8.0.22 knows only the older words.
    if (mysql_ && !status.isOk() && status.status().cause() == Cause::kServer) status = conn.query("SHOW SLAVE STATUS");
    if (status.isOk()) return relayLogBacklog(*status);
    if (status.status().cause() != Cause::kAccessDenied) return status.status();
    // Without the grant (db::checkServer said so at connect) only running replication threads show:
    // a receiving one (a live upstream), or an applier not in its idle state. A stopped SQL thread
    // with events left goes unseen. (MySQL shows them as `system user` with COMMAND Connect: any
    // of those counts.)
    auto threads = conn.query(
        "SELECT ID, STATE FROM information_schema.PROCESSLIST WHERE COMMAND = 'Slave_IO' OR "
        "(USER = 'system user' AND COMMAND = 'Connect') OR (COMMAND IN ('Slave_SQL', 'Slave_worker') AND "
        "STATE NOT LIKE '%has read all relay log%' AND STATE NOT IN ('Waiting for work from SQL thread', "
        "'Waiting for an event from Coordinator')) ORDER BY ID LIMIT 1");
    if (!threads.isOk()) return threads.status();
    if (!threads->next()) return std::optional<std::string>();
    return std::optional<std::string>(fmt::format("replication applier thread {} is '{}'", threads->u64("ID"),
                                                  threads->optText("STATE").value_or("")));
  });
  if (!backlog.isOk()) return backlog.status();
  const bool workLeft = backlog->has_value();
  if (workLeft != applierWorkLeft_) {
    if (workLeft) {
      sourceLogger(source_.name)->warn(
          "{}: open holes stay open until it has applied it (its rows carry ids another server handed out: a promoted "
          "replica still catching up?)",
          **backlog);
    } else {
      sourceLogger(source_.name)->info("the replication applier has applied everything it received: open holes are "
                                       "probed again");
    }
    applierWorkLeft_ = workLeft;
  }
  return workLeft;
}

}  // namespace outbox

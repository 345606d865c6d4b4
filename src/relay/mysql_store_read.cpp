// MysqlOutboxStore's reads of the outbox table (docs/design.md, "Contract v2: finding late
// commits"): new rows, where a new scan starts, and the assigned tail. The open holes' reads and
// probes are in mysql_store_holes.cpp; a batch's writes in mysql_store_assign.cpp; halts,
// quarantine and the epoch bump in mysql_store_epoch.cpp; the state row in mysql_store.cpp.
#include <algorithm>
#include <cstdint>
#include <functional>

#include <fmt/format.h>

#include "db/open_transactions.h"
#include "relay/id_ranges_sql.h"
#include "relay/mysql_store.h"

namespace outbox {

using sql::without;

namespace {
// The outbox row's columns (alias o), then more per query: its version, or the scan's flags
// (versioned, quarantined). Read by name (RowColumns).
constexpr const char* kRowColumns =
    "o.id, o.entity_type, o.entity_key, o.op, o.payload, CAST(UNIX_TIMESTAMP(o.created_at) * 1000000 AS UNSIGNED) "
    "AS created_micros, o.headers";

// Where kRowColumns are in a result set, looked up once for all its rows.
struct RowColumns {
  explicit RowColumns(const db::Rows& rows)
      : id(rows.index("id")),
        entityType(rows.index("entity_type")),
        entityKey(rows.index("entity_key")),
        op(rows.index("op")),
        payload(rows.index("payload")),
        createdMicros(rows.index("created_micros")),
        headers(rows.index("headers")) {}
  size_t id, entityType, entityKey, op, payload, createdMicros, headers;
};

OutboxRow rowFrom(const db::Rows& rows, const RowColumns& c) {
  OutboxRow r;
  r.id = rows.u64(c.id);
  r.entityType = std::string(rows.text(c.entityType));
  r.entityKey = std::string(rows.text(c.entityKey));
  r.op = std::string(rows.text(c.op));
  if (auto payload = rows.optText(c.payload)) r.payload = std::string(*payload);
  r.createdAtMicros = static_cast<int64_t>(rows.u64(c.createdMicros));
  if (auto headers = rows.optText(c.headers)) r.headers = std::string(*headers);
  return r;
}

// The server refused the statement itself (no such column or table in information_schema on an
// older MariaDB, the plugin unloaded): the scan goes on without what it would have told.
bool refusedByServer(const Status& s) {
  return !s.isTransient() && (s.cause() == Cause::kServer || s.cause() == Cause::kMissingTable);
}

// PROCESSLIST states of a statement's execution (MariaDB's stage names): none comes after its
// `query end`, where a statement's transaction commits under autocommit. Not the network's
// ('Writing to net' shows instead of the stage while a result or an OK is sent, after the commit
// too: a client that reads slowly keeps it so, the statement committed — found by review).
constexpr const char* kExecutingStates =
    "'User sleep', 'Sending data', 'executing', 'Creating sort index', 'Copying to tmp table', "
    "'Copying to tmp table on disk', 'Filling schema table', 'User lock', 'Waiting for table metadata lock', "
    "'Waiting for table level lock', 'Updating', 'Searching rows for update'";

// A new source's first scan starts this many ids below its lowest visible row (initialFloor).
constexpr uint64_t kNewSourceWindow = 10'000;
}  // namespace

std::string MysqlOutboxStore::scannedRowsQuery(const std::string& where) const {
  return fmt::format(
      "SELECT {}, v.version IS NOT NULL AS versioned, q.outbox_id IS NOT NULL AS quarantined FROM {} o "
      "LEFT JOIN {} v ON v.outbox_id = o.id LEFT JOIN outbox_quarantine q ON q.source = {} AND q.outbox_id = o.id "
      "WHERE {} ORDER BY o.id",
      kRowColumns, table_, versions_, sourceLiteral_, where);
}

std::vector<ScannedRow> MysqlOutboxStore::scannedRows(db::Rows& rows) {
  std::vector<ScannedRow> out;
  out.reserve(rows.rowCount());
  const RowColumns columns(rows);
  const size_t versioned = rows.index("versioned"), quarantined = rows.index("quarantined");
  while (rows.next()) {
    out.push_back(ScannedRow{rowFrom(rows, columns), rows.u64(versioned) != 0, rows.u64(quarantined) != 0});
  }
  return out;
}

Result<NewRows> MysqlOutboxStore::readNew(uint64_t cursor, int limit, bool withConnections) {
  db::Session::Hold hold(*session_);  // one connection for the poll's reads
  NewRows out;
  // Rows above the cursor have no version but after an epoch bump or a v1 migration (each starts
  // a session): above the highest outbox id with a version (read once a session), the read
  // leaves out its join of the versions, which costs MariaDB a third of the read (docs/design.md,
  // "Cost per row"). Should such a row be there after all, the versions' unique outbox_id
  // refuses its assign, and the next read is a whole one. Above the highest quarantined one too,
  // it leaves out the quarantine's join (another 110 us a read): a row an operator quarantines
  // ahead of the scan meanwhile is refused by the assign, which reads the quarantine under the
  // state row's lock, and the next session reads both bounds again; a poison row is looked up
  // alone before it halts the source or is quarantined (readBatch, NewRows::quarantineUnread).
  if (!leanThrough_) {
    auto through = queryRows(fmt::format(
        "SELECT (SELECT COALESCE(MAX(outbox_id), 0) FROM {}) AS versioned_id, (SELECT COALESCE(MAX(outbox_id), 0) "
        "FROM outbox_quarantine WHERE source = {}) AS quarantined_id",
        versions_, sourceLiteral_));
    if (!through.isOk()) return through.status();
    // (Always one row; without one, every read of the session joins both.)
    leanThrough_ = through->next() ? LeanThrough{through->u64("versioned_id"), through->u64("quarantined_id")}
                                   : LeanThrough{UINT64_MAX, UINT64_MAX};
  }
  out.lean = cursor >= leanThrough_->versioned;
  out.quarantineUnread = out.lean && cursor >= leanThrough_->quarantined;
  // One statement: a consistent read of its own.
  const std::string where = fmt::format("o.id > {}", cursor);
  std::string read;
  if (out.quarantineUnread) {
    read = fmt::format("SELECT {}, 0 AS versioned, 0 AS quarantined FROM {} o WHERE {} ORDER BY o.id", kRowColumns,
                       table_, where);
  } else if (out.lean) {
    read = fmt::format("SELECT {}, 0 AS versioned, q.outbox_id IS NOT NULL AS quarantined FROM {} o LEFT JOIN "
                       "outbox_quarantine q ON q.source = {} AND q.outbox_id = o.id WHERE {} ORDER BY o.id",
                       kRowColumns, table_, sourceLiteral_, where);
  } else {
    read = scannedRowsQuery(where);
  }
  auto rows = queryRows(fmt::format("{} LIMIT {}", read, limit));
  if (!rows.isOk()) return rows.status();
  out.rows = scannedRows(*rows);
  // An epoch bump lowers scan_floor below rows it took versions from: the scan must start over.
  // A poll with rows to assign learns it from the assign's epoch guard; only one with none asks,
  // at most once a second: at a trickle a tenth of the polls find nothing (the doorbell rings
  // before InnoDB shows the commit), and their asking was a tenth of a statement a row (the
  // bump's republishing may start up to a second later).
  const auto now = std::chrono::steady_clock::now();
  if (now - epochAskedAt_ >= std::chrono::seconds(1) &&
      std::none_of(out.rows.begin(), out.rows.end(),
                   [](const ScannedRow& r) { return !r.versioned && !r.quarantined; })) {
    epochAskedAt_ = now;
    auto epoch = queryRows(fmt::format("SELECT epoch FROM outbox_source_state WHERE source = {}", sourceLiteral_));
    if (!epoch.isOk()) return epoch.status();
    if (epoch->next()) out.epoch = epoch->u64("epoch");
  }
  if (!withConnections) return out;
  // After the read, every connection but those between statements and the server's own threads
  // (an id the read went past is taken inside a statement): ids are taken under COMMAND values
  // other than Query too (Execute, MariaDB's Bulk_execute for batched inserts, Connect for event
  // scheduler workers). Not a replica's threads: they write rows with the ids another server
  // gave them, outside the rule's scope (producers write through this server), and an idle
  // applier would otherwise keep every hole open for good.
  auto busy = [](const char* p) {  // PROCESSLIST's alias, with its dot
    return fmt::format("{0}COMMAND NOT IN ('Sleep', 'Daemon', 'Binlog Dump', 'Binlog Dump GTID', 'Slave_IO', "
                       "'Slave_SQL', 'Slave_worker') AND NOT ({0}USER = 'system user' AND {0}HOST = '') AND "
                       "{0}ID <> CONNECTION_ID()",
                       p);
  };
  ConnectionReading reading;
  // Where the server shows metadata locks, only those of them that may write the outbox table: a
  // statement that writes it, through a trigger, function or procedure too, holds a metadata lock
  // on it other than a reader's from before it takes an id until its transaction ends (the lock
  // is taken when the statement opens its tables). One without such a lock holds no id of the
  // table now, and any it takes later are above the scan cursor: a report, a dump or a
  // SELECT SLEEP(600) keeps no hole open. With each, how long it has held its oldest such lock,
  // and, read first, the age of a user lock a bridge connection holds: the server's clock to hold it against.
  if (writersVisible_) {
    // The clock is the such lock of the lowest connection id on the server, whichever connection
    // reads it: the relays' connections are shared (docs/design.md, "Connections"), and one clock
    // across them keeps a tagging comparable with the readings after it on any of them. (A lock
    // taken again while held keeps its age; its connection gone, the next one reads as another
    // clock: a re-tagging, as after a reconnect.)
    auto clock = queryRows(
        "SELECT THREAD_ID, LOCK_TIME_MS FROM information_schema.METADATA_LOCK_INFO WHERE LOCK_TYPE = 'User lock' "
        "AND TABLE_SCHEMA = CONCAT('outbox_bridge_clock_', THREAD_ID) AND LOCK_TIME_MS IS NOT NULL ORDER BY "
        "THREAD_ID LIMIT 1");
    if (clock.isOk() && clock->next() && !clock->isNull("LOCK_TIME_MS")) {
      reading.clock = ConnectionReading::ServerClock{clock->u64("THREAD_ID"),
                                                     std::chrono::milliseconds(clock->u64("LOCK_TIME_MS"))};
    } else if (!clock.isOk() && !refusedByServer(clock.status())) {
      return clock.status();
    }
    auto writers = queryRows(fmt::format(
        "SELECT p.ID, MAX(m.LOCK_TIME_MS) AS held_ms, MAX(m.LOCK_TIME_MS IS NULL) AS held_unknown FROM "
        "information_schema.PROCESSLIST p JOIN information_schema.METADATA_LOCK_INFO m ON m.THREAD_ID = p.ID WHERE {} "
        "AND m.TABLE_SCHEMA = DATABASE() AND m.TABLE_NAME = {} AND m.LOCK_MODE NOT IN ('MDL_SHARED', "
        "'MDL_SHARED_HIGH_PRIO', 'MDL_SHARED_READ', 'MDL_SHARED_READ_ONLY') GROUP BY p.ID ORDER BY p.ID",
        busy("p."), tableLiteral_));
    if (writers.isOk()) {
      const size_t id = writers->index("ID"), heldMs = writers->index("held_ms");
      const size_t heldUnknown = writers->index("held_unknown");
      while (writers->next()) {
        reading.busy.push_back(writers->u64(id));
        reading.writingFor.push_back(writers->isNull(heldMs) || writers->u64(heldUnknown) != 0
                                         ? ConnectionReading::kUnknown
                                         : std::chrono::milliseconds(writers->u64(heldMs)));
      }
      out.busy = std::move(reading);
      return out;
    }
    // The plugin was unloaded since the connection began: every busy connection is a suspect.
    if (!refusedByServer(writers.status())) return writers.status();
    writersVisible_ = false;
    reading = ConnectionReading{};
  }
  if (mysql_) {  // MySQL's PROCESSLIST has no QUERY_ID: no statement is known to be the same
    auto all = queryRows("SELECT ID FROM information_schema.PROCESSLIST WHERE " + busy("") + " ORDER BY ID");
    if (!all.isOk()) return all.status();
    const size_t id = all->index("ID");
    while (all->next()) reading.busy.push_back(all->u64(id));
    out.busy = std::move(reading);
    return out;
  }
  // MariaDB: with each, its statement and whether it is still executing it, whether a
  // replication applier runs, and what the appliers have applied (ConnectionReading). The states
  // are those of a statement's execution, which come before `query end` (its commit follows);
  // any other, an unknown one included, counts as not executing: a span read each poll, as
  // without this. Only under the commands that run one statement a QUERY_ID: not Bulk_execute,
  // which runs an UPDATE or DELETE once for each row of parameters, each committed under
  // autocommit, under one (found by review).
  auto all = queryRows(fmt::format(
      "SELECT ID, QUERY_ID, COMMAND IN ('Query', 'Execute') AND STATE IN ({}) AS executing, COMMAND IN "
      "('Slave_SQL', 'Slave_worker') AS applier, @@global.gtid_slave_pos AS applied FROM "
      "information_schema.PROCESSLIST WHERE ({}) OR COMMAND IN ('Slave_SQL', 'Slave_worker') ORDER BY ID",
      kExecutingStates, busy("")));
  if (!all.isOk()) return all.status();
  reading.numbered = true;
  const size_t id = all->index("ID"), queryId = all->index("QUERY_ID"), executing = all->index("executing");
  const size_t applier = all->index("applier"), applied = all->index("applied");
  while (all->next()) {
    reading.applied = std::string(all->text(applied));
    if (all->u64(applier) != 0) {
      reading.applier = true;
      continue;
    }
    reading.busy.push_back(all->u64(id));
    reading.statements.push_back(ConnectionReading::Statement{all->u64(queryId), all->u64(executing) != 0});
  }
  out.busy = std::move(reading);
  return out;
}

Result<std::vector<IdRange>> MysqlOutboxStore::unresolved(uint64_t floor, uint64_t cursor) {
  if (cursor <= floor) return std::vector<IdRange>{};
  std::vector<uint64_t> resolved;
  auto rows = queryRows(fmt::format(
      "SELECT outbox_id FROM {} WHERE outbox_id > {} AND outbox_id <= {} UNION "
      "SELECT outbox_id FROM outbox_quarantine WHERE source = {} AND outbox_id > {} AND outbox_id <= {} ORDER BY 1",
      versions_, floor, cursor, sourceLiteral_, floor, cursor));
  if (!rows.isOk()) return rows.status();
  const size_t outboxId = rows->index("outbox_id");
  while (rows->next()) resolved.push_back(rows->u64(outboxId));
  return without({IdRange{floor + 1, cursor}}, resolved);
}

Result<std::vector<IdRange>> MysqlOutboxStore::pinnedHoles() {
  auto rows = queryRows(fmt::format(
      "SELECT first_id, last_id FROM outbox_scan_holes WHERE source = {} ORDER BY first_id", sourceLiteral_));
  if (!rows.isOk()) return rows.status();
  std::vector<IdRange> out;
  const size_t first = rows->index("first_id"), last = rows->index("last_id");
  while (rows->next()) out.push_back(IdRange{rows->u64(first), rows->u64(last)});
  return out;
}

Result<std::string> MysqlOutboxStore::openTransactionsOlderThan(std::chrono::seconds olderThan) {
  return session_->run([&](db::Connection& conn) -> Result<std::string> {
    auto open = db::openTransactions(conn, olderThan, 5);
    if (!open.isOk()) return open.status();
    return open->describe();
  });
}

Result<std::optional<uint64_t>> MysqlOutboxStore::nextAutoId() {
  return session_->run([&](db::Connection& conn) -> Result<std::optional<uint64_t>> {
    // MySQL 8 serves information_schema.TABLES from a cache (a day old by default): ask afresh.
    if (mysql_) OUTBOX_RETURN_IF_ERROR(conn.exec("SET SESSION information_schema_stats_expiry = 0"));
    return conn.queryU64(fmt::format(
        "SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = {}",
        conn.quote(source_.outboxTable)));
  });
}

Result<uint64_t> MysqlOutboxStore::initialFloor() {
  // Where the first scan of a source starts. Ids below the table's lowest visible row are pruned
  // (published) rows — or, on a source that never versioned a row, ids never used, rolled back, or
  // taken by a transaction still open, which the lowest visible row cannot show. So a source
  // with versions (one migrated from v1) starts just below its oldest kept row, and a new one a
  // window further down: the window's ids are holes, and die in a poll unless a transaction holds
  // them. Never guessed from clocks.
  // READ UNCOMMITTED: the lowest row includes one a transaction has inserted and not committed.
  auto rows = queryRows(fmt::format("SELECT (SELECT MIN(id) FROM {}) AS lowest, "
                                    "(SELECT COUNT(*) FROM (SELECT 1 FROM {} LIMIT 1) v) AS versioned",
                                    table_, versions_),
                        "READ UNCOMMITTED");
  if (!rows.isOk()) return rows.status();
  if (!rows->next() || rows->isNull("lowest")) return uint64_t{0};
  const uint64_t lowest = rows->u64("lowest");
  const bool versioned = rows->u64("versioned") > 0;
  if (versioned) return lowest - 1;
  return lowest - 1 > kNewSourceWindow ? lowest - 1 - kNewSourceWindow : 0;
}

Result<std::vector<OutboxRow>> MysqlOutboxStore::readAssigned(uint64_t fromVersion, uint64_t throughVersion,
                                                              int limit) {
  auto rows = queryRows(fmt::format(
      "SELECT {}, v.version FROM {} v JOIN {} o ON o.id = v.outbox_id WHERE v.version BETWEEN {} AND {} "
      "ORDER BY v.version LIMIT {}",
      kRowColumns, versions_, table_, fromVersion, throughVersion, limit));
  if (!rows.isOk()) return rows.status();
  std::vector<OutboxRow> out;
  out.reserve(rows->rowCount());
  const RowColumns columns(*rows);
  const size_t version = rows->index("version");
  while (rows->next()) {
    out.push_back(rowFrom(*rows, columns));
    out.back().version = rows->u64(version);
  }
  return out;
}

}  // namespace outbox

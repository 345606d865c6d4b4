#include "relay/mysql_store.h"

#include <algorithm>
#include <functional>

#include <mysqld_error.h>

#include <fmt/format.h>

#include "common/log.h"
#include "db/preflight.h"
#include "relay/poison.h"
#include "relay/resume_point.h"

namespace outbox {

namespace {
// The outbox row's columns (alias o), then one more per query: its version, or the scan's flags.
constexpr const char* kRowColumns =
    "o.id, o.entity_type, o.entity_key, o.op, o.payload, CAST(UNIX_TIMESTAMP(o.created_at) * 1000000 AS UNSIGNED)";

OutboxRow rowFrom(const db::Rows& rows) {
  OutboxRow r;
  r.id = rows.u64(0);
  r.entityType = std::string(rows.text(1));
  r.entityKey = std::string(rows.text(2));
  r.op = std::string(rows.text(3));
  if (auto payload = rows.optText(4)) r.payload = std::string(*payload);
  r.createdAtMicros = static_cast<int64_t>(rows.u64(5));
  return r;
}

// `column` in one of `ranges`: a range scan of the primary key per range.
std::string inRanges(const char* column, const std::vector<IdRange>& ranges) {
  std::string out = "(";
  for (const IdRange& r : ranges) {
    if (out.size() > 1) out += " OR ";
    out += r.first == r.last ? fmt::format("{} = {}", column, r.first)
                             : fmt::format("{} BETWEEN {} AND {}", column, r.first, r.last);
  }
  return out + ")";
}

// The parts of `ranges` (ascending) without an id of `present` (ascending).
std::vector<IdRange> without(const std::vector<IdRange>& ranges, const std::vector<uint64_t>& present) {
  std::vector<IdRange> out;
  size_t i = 0;
  for (IdRange r : ranges) {
    while (i < present.size() && present[i] < r.first) ++i;
    for (; i < present.size() && present[i] <= r.last; ++i) {
      if (present[i] > r.first) out.push_back(IdRange{r.first, present[i] - 1});
      r.first = present[i] + 1;
    }
    if (r.first <= r.last) out.push_back(r);
  }
  return out;
}

// Where the state row's current epoch began (outbox_epoch_history; 0, 0 in epoch 1): its versions
// start above the first, its messages after the second.
constexpr const char* kEpochStartColumns =
    "COALESCE((SELECT versions_after FROM outbox_epoch_history h WHERE h.source = s.source AND h.epoch = s.epoch), 0), "
    "COALESCE((SELECT stream_seq FROM outbox_epoch_history h WHERE h.source = s.source AND h.epoch = s.epoch), 0)";
// The probes name at most this many ranges in one statement.
constexpr size_t kRangeChunk = 1000;
// ... and look at no more than this many uncommitted rows in one (a transaction holding more
// keeps the rest of its ranges open until a later probe).
constexpr size_t kProbeRows = 100'000;
// Locking probes one unheld() may spend on halving statements that met a held row, and on ids
// between two held rows.
constexpr int kLockProbeBudget = 64;
// Ids between two held rows are probed one by one when there are at most this many.
constexpr uint64_t kPointProbeMost = 4;
// MySQL 8's ER_LOCK_NOWAIT (MariaDB reports a NOWAIT conflict as ER_LOCK_WAIT_TIMEOUT).
constexpr unsigned kMysqlLockNowait = 3572;
// A new source's first scan starts this many ids below its lowest visible row (initialFloor).
constexpr uint64_t kNewSourceWindow = 10'000;
}  // namespace

MysqlOutboxStore::MysqlOutboxStore(const SourceConfig& source, std::chrono::seconds idleTransactionTimeout,
                                   ServerCheck check)
    : source_(source),
      idleTransactionTimeout_(idleTransactionTimeout),
      check_(check),
      table_("`" + source.outboxTable + "`"),
      versions_("`" + source.outboxTable + "_versions`") {}

Status MysqlOutboxStore::connect() {
  if (conn_) return Status::ok();  // methods drop the connection when it breaks
  auto opened = db::Connection::open(db::paramsFrom(source_.dsn));
  if (!opened.isOk()) return opened.status();
  conn_ = std::move(opened).value();
  sourceLiteral_ = conn_->quote(source_.name);
  if (auto version = conn_->query("SELECT VERSION()"); version.isOk() && version->next()) {
    mysql_ = version->text(0).find("MariaDB") == std::string_view::npos;
  }
  if (check_ != ServerCheck::kNone) {
    std::vector<std::string> notes;
    if (Status s = db::checkServer(*conn_, notes); !s.isOk()) {
      conn_.reset();
      return s;
    }
    for (const auto& note : notes) {
      if (!notesLogged_ && check_ == ServerCheck::kCheckAndWarn) sourceLogger(source_.name)->warn("{}", note);
    }
    notesLogged_ = true;
  }
  if (idleTransactionTimeout_.count() > 0) {
    // MariaDB only; MySQL has no such variable, and there the server's wait_timeout applies.
    (void)conn_->exec(fmt::format("SET SESSION idle_transaction_timeout = {}", idleTransactionTimeout_.count()));
  }
  Status s = conn_->exec(fmt::format("INSERT IGNORE INTO outbox_source_state (source) VALUES ({})", sourceLiteral_));
  if (!s.isOk()) conn_.reset();
  return s;
}

std::string MysqlOutboxStore::guardedStateUpdate(const std::string& assignments, const std::string& condition) {
  std::string join, where = fmt::format("s.source = {}", sourceLiteral_);
  if (guard_.lease) {
    join = fmt::format(
        " JOIN outbox_bridge_lease l ON l.source = s.source AND l.holder_id = {} AND l.lease_epoch = {} "
        "AND l.expires_at > NOW(6)",
        conn_->quote(guard_.lease->holder), guard_.lease->leaseEpoch);
  }
  if (guard_.epoch != 0) where += fmt::format(" AND s.epoch = {}", guard_.epoch);
  if (!condition.empty()) where += " AND " + condition;
  return fmt::format("UPDATE outbox_source_state s{} SET {} WHERE {}", join, assignments, where);
}

Status MysqlOutboxStore::guardedStateWrite(const std::string& assignments, const std::string& condition,
                                           const char* what) {
  OUTBOX_RETURN_IF_ERROR(ensureConnected());
  auto matched = conn_->execCount(guardedStateUpdate(assignments, condition));
  // A broken connection is dropped by the caller (inTransaction, or standalone()): never here,
  // where a transaction may still need it to roll back.
  if (!matched.isOk()) return matched.status();
  if (*matched != 1) {
    return Status::transient(fmt::format("{} refused: the lease was lost or an epoch bump moved the source to a new "
                                         "epoch; reconciling",
                                         what));
  }
  return Status::ok();
}

Status MysqlOutboxStore::ensureConnected() {
  if (conn_) return Status::ok();
  return connect();
}

template <typename Fn>
Status MysqlOutboxStore::inTransaction(Fn&& fn) {
  OUTBOX_RETURN_IF_ERROR(ensureConnected());
  Status s = conn_->begin();
  if (s.isOk()) s = fn();
  if (s.isOk()) s = conn_->commit();
  if (!s.isOk() && conn_) {
    conn_->rollback();
    if (s.isTransient()) conn_.reset();
  }
  return s;
}

Status MysqlOutboxStore::standalone(Status s) {
  if (s.isTransient() && conn_ && conn_->failed()) conn_.reset();
  return s;
}

Result<SourceState> MysqlOutboxStore::loadState() {
  OUTBOX_RETURN_IF_ERROR(ensureConnected());
  auto rows = conn_->query(fmt::format(
      "SELECT epoch, assigned_through, published_through, published_stream_seq, halted_reason, paused, {}, "
      "scan_cursor, scan_floor FROM outbox_source_state s WHERE source = {}",
      kEpochStartColumns, sourceLiteral_));
  if (!rows.isOk()) {
    if (rows.status().isTransient()) conn_.reset();
    return rows.status();
  }
  if (!rows->next()) return Status::transient("outbox_source_state has no row for source " + source_.name);
  SourceState state;
  state.epoch = rows->u64(0);
  state.assignedThrough = rows->u64(1);
  state.publishedThrough = rows->u64(2);
  state.publishedStreamSeq = rows->u64(3);
  state.haltedReason = std::string(rows->text(4));
  state.paused = rows->u64(5) != 0;
  state.epochVersionsAfter = rows->u64(6);
  state.epochStreamSeq = rows->u64(7);
  if (!rows->isNull(8)) state.scanCursor = rows->u64(8);
  if (!rows->isNull(9)) state.scanFloor = rows->u64(9);
  return state;
}

Result<db::Rows> MysqlOutboxStore::queryRows(const std::string& sql) {
  OUTBOX_RETURN_IF_ERROR(ensureConnected());
  auto rows = conn_->query(sql);
  if (!rows.isOk() && rows.status().isTransient()) conn_.reset();
  return rows;
}

std::string MysqlOutboxStore::scannedRowsQuery(const std::string& where) const {
  return fmt::format(
      "SELECT {}, v.version IS NOT NULL, q.outbox_id IS NOT NULL FROM {} o LEFT JOIN {} v ON v.outbox_id = o.id "
      "LEFT JOIN outbox_quarantine q ON q.source = {} AND q.outbox_id = o.id WHERE {} ORDER BY o.id",
      kRowColumns, table_, versions_, sourceLiteral_, where);
}

std::vector<ScannedRow> MysqlOutboxStore::scannedRows(db::Rows& rows) {
  std::vector<ScannedRow> out;
  out.reserve(rows.rowCount());
  while (rows.next()) out.push_back(ScannedRow{rowFrom(rows), rows.u64(6) != 0, rows.u64(7) != 0});
  return out;
}

Result<NewRows> MysqlOutboxStore::readNew(uint64_t cursor, int limit, bool withConnections) {
  NewRows out;
  // One statement: a consistent read of its own.
  auto rows = queryRows(scannedRowsQuery(fmt::format("o.id > {}", cursor)) + fmt::format(" LIMIT {}", limit));
  if (!rows.isOk()) return rows.status();
  out.rows = scannedRows(*rows);
  // An epoch bump lowers scan_floor below rows it took versions from: the scan must start over.
  // A poll with rows to assign learns it from the assign's epoch guard; only one with none asks.
  if (std::none_of(out.rows.begin(), out.rows.end(), [](const ScannedRow& r) { return !r.versioned && !r.quarantined; })) {
    auto epoch = queryRows(fmt::format("SELECT epoch FROM outbox_source_state WHERE source = {}", sourceLiteral_));
    if (!epoch.isOk()) return epoch.status();
    if (epoch->next()) out.epoch = epoch->u64(0);
  }
  if (!withConnections) return out;
  // After the read, every connection but those between statements and the server's own threads
  // (an id the read went past is taken inside a statement): ids are taken under COMMAND values
  // other than Query too (Execute, MariaDB's Bulk_execute for batched inserts, Connect for event
  // scheduler workers). Not a replica's threads: they write rows with the ids another server
  // gave them, outside section 3a's scope (producers write through this server), and an idle
  // applier would otherwise keep every hole open for good.
  auto busy = queryRows(
      "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND NOT IN ('Sleep', 'Daemon', 'Binlog Dump', "
      "'Binlog Dump GTID', 'Slave_IO', 'Slave_SQL', 'Slave_worker') AND NOT (USER = 'system user' AND HOST = '') "
      "AND ID <> CONNECTION_ID() ORDER BY ID");
  if (!busy.isOk()) return busy.status();
  ConnectionReading reading;
  while (busy->next()) reading.busy.push_back(busy->u64(0));
  out.busy = std::move(reading);
  return out;
}

Result<std::vector<ScannedRow>> MysqlOutboxStore::readRanges(const std::vector<IdRange>& ranges, int limit) {
  if (ranges.empty() || limit <= 0) return std::vector<ScannedRow>{};
  auto rows = queryRows(scannedRowsQuery(inRanges("o.id", ranges)) + fmt::format(" LIMIT {}", limit));
  if (!rows.isOk()) return rows.status();
  return scannedRows(*rows);
}

Result<std::vector<IdRange>> MysqlOutboxStore::unheld(const std::vector<IdRange>& ranges) {
  OUTBOX_RETURN_IF_ERROR(ensureConnected());
  std::vector<IdRange> out;
  int budget = kLockProbeBudget;
  for (size_t i = 0; i < ranges.size() && budget > 0; i += kRangeChunk) {
    const std::vector<IdRange> chunk(ranges.begin() + static_cast<long>(i),
                                     ranges.begin() + static_cast<long>(std::min(ranges.size(), i + kRangeChunk)));
    // First a plain read at READ UNCOMMITTED (no locks) of the ids that hold a row, committed or
    // not: those stay open without a probe.
    OUTBOX_RETURN_IF_ERROR(standalone(conn_->exec("SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")));
    auto rows = queryRows(fmt::format("SELECT id FROM {} WHERE {} ORDER BY id LIMIT {}", table_,
                                      inRanges("id", chunk), kProbeRows));
    if (!rows.isOk()) return rows.status();
    std::vector<uint64_t> present;
    while (rows->next()) present.push_back(rows->u64(0));
    // Then the contract's locking probe (section 3a) of the ranges between them: it also finds a
    // row an open transaction has deleted and may still restore (ROLLBACK TO SAVEPOINT), which
    // the read above does not show. A locking range read at READ COMMITTED also locks the row
    // just past the range in the direction it reads, so a range with a held row above it is read
    // downwards, one with a held row below it upwards, and one between two held rows waits for
    // one of them to end (docs/design.md).
    auto held = [&](uint64_t id) { return std::binary_search(present.begin(), present.end(), id); };
    std::vector<IdRange> up, down, between;
    for (IdRange r : without(chunk, present)) {
      if (present.size() == kProbeRows) {  // past the last id read, unknown: stays open
        if (r.first > present.back()) break;
        r.last = std::min(r.last, present.back());
      }
      const bool heldAbove = held(r.last + 1);
      const bool heldBelow = r.first > 0 && held(r.first - 1);
      if (heldAbove && heldBelow) {
        // A lookup of one id (`id = N`) locks no neighbour: a few ids are probed one by one.
        if (r.size() <= kPointProbeMost) {
          for (uint64_t id = r.first; id <= r.last; ++id) between.push_back(IdRange{id, id});
        }
        continue;
      }
      (heldAbove ? down : up).push_back(r);
    }
    OUTBOX_RETURN_IF_ERROR(probeDead(up, /*downwards=*/false, budget, out));
    OUTBOX_RETURN_IF_ERROR(probeDead(down, /*downwards=*/true, budget, out));
    for (const IdRange& id : between) {
      if (budget-- <= 0) break;
      auto nothing = lockFree({id}, /*downwards=*/false);
      if (!nothing.isOk()) return nothing.status();
      if (*nothing) out.push_back(id);
    }
  }
  std::sort(out.begin(), out.end(), [](const IdRange& a, const IdRange& b) { return a.first < b.first; });
  return out;
}

Status MysqlOutboxStore::probeDead(const std::vector<IdRange>& ranges, bool downwards, int& budget,
                                   std::vector<IdRange>& dead) {
  for (size_t i = 0; i < ranges.size(); i += kRangeChunk) {
    const std::vector<IdRange> some(ranges.begin() + static_cast<long>(i),
                                    ranges.begin() + static_cast<long>(std::min(ranges.size(), i + kRangeChunk)));
    // A statement that meets a held row leaves all its ranges open: halves are tried while the
    // budget lasts, so one held row costs a few statements, and thousands cost no more.
    std::function<Status(const std::vector<IdRange>&)> probe = [&](const std::vector<IdRange>& part) -> Status {
      if (budget <= 0) return Status::ok();
      --budget;
      auto nothing = lockFree(part, downwards);
      if (!nothing.isOk()) return nothing.status();
      if (*nothing) {
        dead.insert(dead.end(), part.begin(), part.end());
        return Status::ok();
      }
      if (part.size() == 1) return Status::ok();
      const auto half = part.begin() + static_cast<long>(part.size() / 2);
      OUTBOX_RETURN_IF_ERROR(probe(std::vector<IdRange>(part.begin(), half)));
      return probe(std::vector<IdRange>(half, part.end()));
    };
    OUTBOX_RETURN_IF_ERROR(probe(some));
  }
  return Status::ok();
}

Result<bool> MysqlOutboxStore::lockFree(const std::vector<IdRange>& ranges, bool downwards) {
  OUTBOX_RETURN_IF_ERROR(standalone(conn_->exec("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")));
  OUTBOX_RETURN_IF_ERROR(standalone(conn_->begin()));
  auto rows = conn_->query(fmt::format("SELECT id FROM {} WHERE {} ORDER BY id {} {}", table_, inRanges("id", ranges),
                                       downwards ? "DESC" : "ASC",
                                       mysql_ ? "FOR SHARE NOWAIT" : "LOCK IN SHARE MODE NOWAIT"));
  if (!rows.isOk()) {
    const unsigned code = conn_->errorCode();
    (void)conn_->rollback();
    // A deadlock too: the probe's shared lock on a row it read can be what a holder waits for.
    if (code == ER_LOCK_WAIT_TIMEOUT || code == ER_LOCK_DEADLOCK || code == kMysqlLockNowait) return false;
    return standalone(rows.status());
  }
  const bool nothing = !rows->next();
  OUTBOX_RETURN_IF_ERROR(standalone(conn_->commit()));
  return nothing;
}

Result<std::vector<IdRange>> MysqlOutboxStore::unresolved(uint64_t floor, uint64_t cursor) {
  if (cursor <= floor) return std::vector<IdRange>{};
  std::vector<uint64_t> resolved;
  auto rows = queryRows(fmt::format(
      "SELECT outbox_id FROM {} WHERE outbox_id > {} AND outbox_id <= {} UNION "
      "SELECT outbox_id FROM outbox_quarantine WHERE source = {} AND outbox_id > {} AND outbox_id <= {} ORDER BY 1",
      versions_, floor, cursor, sourceLiteral_, floor, cursor));
  if (!rows.isOk()) return rows.status();
  while (rows->next()) resolved.push_back(rows->u64(0));
  return without({IdRange{floor + 1, cursor}}, resolved);
}

Result<std::optional<uint64_t>> MysqlOutboxStore::nextAutoId() {
  OUTBOX_RETURN_IF_ERROR(ensureConnected());
  // MySQL 8 serves information_schema.TABLES from a cache (a day old by default): ask afresh.
  if (mysql_) OUTBOX_RETURN_IF_ERROR(standalone(conn_->exec("SET SESSION information_schema_stats_expiry = 0")));
  auto rows = queryRows(fmt::format(
      "SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = {}",
      conn_->quote(source_.outboxTable)));
  if (!rows.isOk()) return rows.status();
  if (!rows->next() || rows->isNull(0)) return std::optional<uint64_t>{};
  return std::optional<uint64_t>{rows->u64(0)};
}

Result<uint64_t> MysqlOutboxStore::initialFloor() {
  // Where the first scan of a source starts. Ids below the table's lowest visible row are pruned
  // (published) rows — or, on a source that never versioned a row, ids never used, rolled back, or
  // taken by a transaction still open, which the lowest visible row cannot show. So a source
  // with versions (one migrated from v1) starts just below its oldest kept row, and a new one a
  // window further down: the window's ids are holes, and die in a poll unless a transaction holds
  // them. Never guessed from clocks.
  // READ UNCOMMITTED: the lowest row includes one a transaction has inserted and not committed.
  OUTBOX_RETURN_IF_ERROR(ensureConnected());
  OUTBOX_RETURN_IF_ERROR(standalone(conn_->exec("SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")));
  auto rows = queryRows(fmt::format("SELECT (SELECT MIN(id) FROM {}), (SELECT COUNT(*) FROM (SELECT 1 FROM {} LIMIT 1) v)",
                                    table_, versions_));
  if (!rows.isOk()) return rows.status();
  if (!rows->next() || rows->isNull(0)) return uint64_t{0};
  const uint64_t lowest = rows->u64(0);
  const bool versioned = rows->u64(1) > 0;
  if (versioned) return lowest - 1;
  return lowest - 1 > kNewSourceWindow ? lowest - 1 - kNewSourceWindow : 0;
}

Status MysqlOutboxStore::saveScan(ScanMark mark) {
  OUTBOX_RETURN_IF_ERROR(ensureConnected());
  return standalone(guardedStateWrite(fmt::format("s.scan_cursor = {}, s.scan_floor = {}", mark.cursor, mark.floor),
                                      "", "recording the scan"));
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
  while (rows->next()) {
    out.push_back(rowFrom(*rows));
    out.back().version = rows->u64(6);
  }
  return out;
}

Status MysqlOutboxStore::assign(std::vector<OutboxRow>& rows, uint64_t expectedAssignedThrough, ScanMark mark) {
  if (rows.empty()) return saveScan(mark);
  std::string values;
  values.reserve(rows.size() * 24);
  uint64_t v = expectedAssignedThrough;
  for (const auto& r : rows) {
    if (!values.empty()) values += ',';
    values += fmt::format("({},{})", ++v, r.id);
  }
  Status s = inTransaction([&]() -> Status {
    auto claimed = conn_->execCount(guardedStateUpdate(
        fmt::format("s.assigned_through = s.assigned_through + {}, s.scan_cursor = {}, s.scan_floor = {}", rows.size(),
                    mark.cursor, mark.floor),
        fmt::format("s.assigned_through = {} AND s.halted_reason IS NULL AND s.paused = 0", expectedAssignedThrough)));
    if (!claimed.isOk()) return claimed.status();
    if (*claimed != 1) {
      return Status::transient(
          "assigned_through moved under us, the source was halted or paused, the lease was lost, or an epoch bump "
          "moved the source to a new epoch");
    }
    // One statement for the whole batch; versions follow id order. The outbox rows are not touched.
    return conn_->exec(fmt::format("INSERT INTO {} (version, outbox_id) VALUES {}", versions_, values));
  });
  if (!s.isOk()) return s;
  v = expectedAssignedThrough;
  for (auto& r : rows) r.version = ++v;
  return Status::ok();
}

Status MysqlOutboxStore::markPublished(uint64_t version, uint64_t seq) {
  OUTBOX_RETURN_IF_ERROR(ensureConnected());
  Status s = conn_->exec(guardedStateUpdate(
      fmt::format("s.published_through = {}, s.published_stream_seq = {}", version, seq),
      fmt::format("s.published_through < {}", version)));
  if (s.isTransient()) conn_.reset();
  return s;
}

Status MysqlOutboxStore::setPublished(uint64_t version, uint64_t seq) {
  return standalone(guardedStateWrite(
      fmt::format("s.published_through = {}, s.published_stream_seq = {}", version, seq), "", "setting the published marks"));
}

Status MysqlOutboxStore::moveEpochStart(uint64_t seq) {
  if (guard_.epoch == 0) return Status::permanent("moveEpochStart needs the epoch in the write guard");
  return inTransaction([&]() -> Status {
    OUTBOX_RETURN_IF_ERROR(guardedStateWrite(fmt::format("s.published_stream_seq = {}", seq), "",
                                             "moving the epoch's start"));
    return conn_->exec(fmt::format("UPDATE outbox_epoch_history SET stream_seq = {} WHERE source = {} AND epoch = {}",
                                   seq, sourceLiteral_, guard_.epoch));
  });
}

Status MysqlOutboxStore::halt(const std::string& reason) {
  OUTBOX_RETURN_IF_ERROR(ensureConnected());
  return standalone(
      guardedStateWrite(fmt::format("s.halted_reason = {}", conn_->quote(reason.substr(0, 1000))), "", "halting the source"));
}

Status MysqlOutboxStore::clearHalt() {
  return standalone(guardedStateWrite("s.halted_reason = NULL", "", "clearing the halt"));
}

Status MysqlOutboxStore::setPaused(bool paused) {
  OUTBOX_RETURN_IF_ERROR(ensureConnected());
  Status s = conn_->exec(
      fmt::format("UPDATE outbox_source_state SET paused = {} WHERE source = {}", paused ? 1 : 0, sourceLiteral_));
  if (s.isTransient()) conn_.reset();
  return s;
}

Result<bool> MysqlOutboxStore::quarantineAndResume(uint64_t outboxId, const std::string& reason) {
  OUTBOX_RETURN_IF_ERROR(quarantine(outboxId, reason));
  auto state = loadState();
  if (!state.isOk()) return state.status();
  if (!isPoisonHalt(state->haltedReason, outboxId)) return false;
  OUTBOX_RETURN_IF_ERROR(clearHalt());
  return true;
}

Status MysqlOutboxStore::quarantine(uint64_t outboxId, const std::string& reason) {
  return inTransaction([&]() -> Status {
    auto version = conn_->queryU64(fmt::format("SELECT version FROM {} WHERE outbox_id = {} FOR UPDATE", versions_, outboxId));
    if (!version.isOk()) return version.status();
    if (version->has_value()) {
      return Status::permanent(fmt::format("row {} already has version {}: only unpublished rows can be quarantined",
                                           outboxId, **version));
    }
    return conn_->exec(fmt::format(
        "INSERT INTO outbox_quarantine (source, outbox_id, reason) VALUES ({}, {}, {}) "
        "ON DUPLICATE KEY UPDATE reason = VALUES(reason)",
        sourceLiteral_, outboxId, conn_->quote(reason.substr(0, 1000))));
  });
}

Result<SourceState> MysqlOutboxStore::epochBump(const StreamTip& tip, const std::string& reason) {
  SourceState result;
  BumpPlan plan;
  Status s = inTransaction([&]() -> Status {
    auto rows = conn_->query(fmt::format(
        "SELECT epoch, assigned_through, published_through, published_stream_seq, {} FROM outbox_source_state s "
        "WHERE source = {} FOR UPDATE",
        kEpochStartColumns, sourceLiteral_));
    if (!rows.isOk()) return rows.status();
    if (!rows->next()) return Status::permanent("no state row for source " + source_.name + " (run migrate)");
    SourceState current;
    current.epoch = rows->u64(0);
    current.assignedThrough = rows->u64(1);
    current.publishedThrough = rows->u64(2);
    current.publishedStreamSeq = rows->u64(3);
    current.epochVersionsAfter = rows->u64(4);
    current.epochStreamSeq = rows->u64(5);
    auto maxInTable = conn_->queryU64(fmt::format("SELECT MAX(version) FROM {}", versions_));
    if (!maxInTable.isOk()) return maxInTable.status();
    plan = planEpochBump(current, tip, maxInTable->value_or(0));
    // Assigned but not certainly in the stream: publish again under fresh versions. The scan's
    // floor goes below those rows, so the next scan finds them again.
    auto lowest = conn_->queryU64(fmt::format("SELECT MIN(outbox_id) FROM {} WHERE version > {}", versions_, plan.kept));
    if (!lowest.isOk()) return lowest.status();
    OUTBOX_RETURN_IF_ERROR(conn_->exec(fmt::format("DELETE FROM {} WHERE version > {}", versions_, plan.kept)));
    std::string floor;
    if (lowest->has_value()) {
      floor = fmt::format(", scan_floor = LEAST(COALESCE(scan_floor, {0}), {0})", **lowest - 1);
    }
    OUTBOX_RETURN_IF_ERROR(conn_->exec(fmt::format(
        "UPDATE outbox_source_state SET epoch = {}, assigned_through = {}, published_through = {}, "
        "published_stream_seq = {}, halted_reason = NULL{} WHERE source = {}",
        plan.epoch, plan.highest, plan.highest, tip.lastSeq, floor, sourceLiteral_)));
    OUTBOX_RETURN_IF_ERROR(conn_->exec(fmt::format(
        "INSERT INTO outbox_epoch_history (source, epoch, reason, versions_after, stream_seq) VALUES ({}, {}, {}, {}, {})",
        sourceLiteral_, plan.epoch, conn_->quote(reason.substr(0, 1000)), plan.highest, tip.lastSeq)));
    result.epoch = plan.epoch;
    result.assignedThrough = plan.highest;
    result.publishedThrough = plan.highest;
    result.publishedStreamSeq = tip.lastSeq;
    return Status::ok();
  });
  if (!s.isOk()) return s;
  return result;
}

}  // namespace outbox

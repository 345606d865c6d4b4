// MysqlOutboxStore: its connections (the session's setup, the server's kind), the state row and
// the write guard every write of the source's state goes under. A batch's writes are in
// mysql_store_assign.cpp, the scan's reads in mysql_store_read.cpp and mysql_store_holes.cpp.
#include "relay/mysql_store.h"

#include <atomic>
#include <memory>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/log.h"
#include "db/preflight.h"
#include "relay/resume_point.h"

namespace outbox {

// Where an epoch began (outbox_epoch_history; 0, 0 in epoch 1): its versions start above the
// first, its messages after the second. `epoch` is an SQL expression of outbox_source_state s.
std::string MysqlOutboxStore::epochStartColumns(const char* epoch) {
  return fmt::format(
      "COALESCE((SELECT versions_after FROM outbox_epoch_history h WHERE h.source = s.source AND h.epoch = {0}), 0) "
      "AS epoch_versions_after, "
      "COALESCE((SELECT stream_seq FROM outbox_epoch_history h WHERE h.source = s.source AND h.epoch = {0}), 0) "
      "AS epoch_stream_seq",
      epoch);
}

// Server facts a connection reads once: MySQL rather than MariaDB, and whether the server shows
// metadata locks (MariaDB's metadata_lock_info plugin).
MysqlOutboxStore::ServerKind MysqlOutboxStore::serverKind(db::Connection& conn) {
  ServerKind kind;
  if (auto version = conn.query("SELECT VERSION() AS version"); version.isOk() && version->next()) {
    kind.mysql = version->text("version").find("MariaDB") == std::string_view::npos;
  }
  if (!kind.mysql) {
    auto plugin = conn.queryU64(
        "SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'METADATA_LOCK_INFO' AND "
        "PLUGIN_STATUS = 'ACTIVE'");
    kind.writersVisible = plugin.isOk() && plugin->value_or(0) > 0;
  }
  return kind;
}

// What each connection holds for its life: the idle-transaction bound, and where the server shows
// metadata locks, the scan's clock on the server (ConnectionReading::clock).
Status MysqlOutboxStore::setUpConnection(db::Connection& conn, const ServerKind& kind,
                                         std::chrono::seconds idleTransactionTimeout,
                                         const std::function<void(const std::string&)>& clockRefused) {
  if (kind.writersVisible) {
    auto clock = conn.queryU64("SELECT GET_LOCK(CONCAT('outbox_bridge_clock_', CONNECTION_ID()), 0)");
    if (!clock.isOk() || clock->value_or(0) != 1) {
      clockRefused(clock.isOk() ? "someone else holds it" : clock.status().message());
    }
  }
  // The lease's times (its guard, `expires_at > NOW(6)`) in UTC: in the session's own zone NOW(6)
  // repeats an hour when daylight saving time ends, and an expiry computed there could stand an
  // hour too long (docs/design.md, "Leases and the clock"). Nothing this connection reads renders
  // a time as text: the rows' times come as UNIX_TIMESTAMP.
  std::string set = "SET SESSION time_zone = '+00:00'";
  if (idleTransactionTimeout.count() > 0) {
    // MySQL has no idle_transaction_timeout: there wait_timeout bounds it (a session idle that
    // long, in a transaction or not, is closed and its locks released; the next call reconnects).
    // Lock waits, of rows and of metadata (an ALTER queued behind a long transaction), end as
    // soon: a call waits no longer than that with a connection other sources share.
    set += fmt::format(", SESSION {0} = {1}, SESSION innodb_lock_wait_timeout = {1}, SESSION lock_wait_timeout = {1}",
                       kind.mysql ? "wait_timeout" : "idle_transaction_timeout", idleTransactionTimeout.count());
    // A pool then closes it itself before the server would (db::ConnectionPool::borrow): a call on
    // a connection the server closed would fail first, and reconnect only after.
    if (kind.mysql) conn.setIdleLimit(idleTransactionTimeout);
  }
  return conn.exec(set);
}

namespace {
constexpr const char* kClockRefused =
    "could not take the user lock outbox_bridge_clock_<connection id> ({}): open holes then die only once the "
    "connections that may hold them are seen between statements (slower, never a row lost)";
}  // namespace

db::ConnectionPool::Setup MysqlOutboxStore::connectionSetup(std::chrono::seconds idleTransactionTimeout) {
  auto warned = std::make_shared<std::atomic<bool>>(false);
  return [idleTransactionTimeout, warned](db::Connection& conn) {
    // What the scan needs of the server, on each connection: a grant revoked since another was
    // checked applies only to the connections opened after (db::checkServer).
    std::vector<std::string> notes;  // the stores log them when they prepare
    OUTBOX_RETURN_IF_ERROR(db::checkServer(conn, notes));
    return setUpConnection(conn, serverKind(conn), idleTransactionTimeout, [warned](const std::string& why) {
      if (!warned->exchange(true)) spdlog::warn(fmt::runtime(kClockRefused), why);
    });
  };
}

MysqlOutboxStore::MysqlOutboxStore(const SourceConfig& source, std::chrono::seconds idleTransactionTimeout,
                                   ServerCheck check)
    : MysqlOutboxStore(source, check) {
  session_ =
      std::make_unique<db::Session>(db::paramsFrom(source.dsn), [this, idleTransactionTimeout](db::Connection& conn) {
        OUTBOX_RETURN_IF_ERROR(prepare(conn));
        return setUpConnection(conn, ServerKind{mysql_, writersVisible_}, idleTransactionTimeout,
                               [this](const std::string& why) {
                                 if (!std::exchange(clockWarned_, true)) {
                                   sourceLogger(source_.name)->warn(fmt::runtime(kClockRefused), why);
                                 }
                               });
      });
}

MysqlOutboxStore::MysqlOutboxStore(const SourceConfig& source, db::ConnectionPool& pool, ServerCheck check,
                                   JointMarks* marks)
    : MysqlOutboxStore(source, check) {
  marks_ = marks;
  session_ = std::make_unique<db::Session>(pool, source.dsn.database,
                                           [this](db::Connection& conn) { return prepare(conn); });
}

MysqlOutboxStore::MysqlOutboxStore(const SourceConfig& source, ServerCheck check)
    : source_(source),
      check_(check),
      table_("`" + source.outboxTable + "`"),
      versions_("`" + source.outboxTable + "_versions`"),
      // A source name is an SQL identifier (config), so it needs no escaping.
      sourceLiteral_("'" + source.name + "'"),
      // A table name is an SQL identifier too (config).
      tableLiteral_("'" + source.outboxTable + "'") {}

MysqlOutboxStore::~MysqlOutboxStore() = default;

Status MysqlOutboxStore::prepare(db::Connection& conn) {
  const ServerKind kind = serverKind(conn);
  mysql_ = kind.mysql;
  writersVisible_ = kind.writersVisible;
  if (check_ != ServerCheck::kNone) {
    std::vector<std::string> notes;
    OUTBOX_RETURN_IF_ERROR(db::checkServer(conn, notes));
    for (const auto& note : notes) {
      if (!notesLogged_ && check_ == ServerCheck::kCheckAndWarn) sourceLogger(source_.name)->warn("{}", note);
    }
    notesLogged_ = true;
  }
  return conn.exec(fmt::format("INSERT IGNORE INTO outbox_source_state (source) VALUES ({})", sourceLiteral_));
}

Status MysqlOutboxStore::connect() {
  return session_->run([](db::Connection&) { return Status::ok(); });
}

std::string MysqlOutboxStore::guardedStateUpdate(db::Connection& conn, const std::string& assignments,
                                                 const std::string& condition) {
  // One table, the lease as a subquery: a multi-table UPDATE (the lease joined) costs MariaDB
  // more to open, plan and log than the whole row it guards (docs/design.md, "Cost per row").
  // At REPEATABLE READ, which every connection sets, InnoDB reads the subquery's lease row with a
  // shared lock, as it did the joined one: a takeover waits for this write to commit.
  std::string where = fmt::format("s.source = {}", sourceLiteral_);
  if (guard_.epoch != 0) where += fmt::format(" AND s.epoch = {}", guard_.epoch);
  if (!condition.empty()) where += " AND " + condition;
  if (guard_.lease) {
    where += fmt::format(
        " AND EXISTS (SELECT 1 FROM outbox_bridge_lease l WHERE l.source = {} AND l.holder_id = {} AND l.lease_epoch = "
        "{} AND l.expires_at > NOW(6))",
        sourceLiteral_, conn.quote(guard_.lease->holder), guard_.lease->leaseEpoch);
  }
  return fmt::format("UPDATE outbox_source_state s SET {} WHERE {}", assignments, where);
}

Status MysqlOutboxStore::guardedStateWrite(db::Connection& conn, const std::string& assignments,
                                           const std::string& condition, const char* what) {
  auto matched = conn.execCount(guardedStateUpdate(conn, assignments, condition));
  if (!matched.isOk()) return matched.status();
  if (*matched != 1) {
    return Status::transient(fmt::format("{} refused: the lease was lost or an epoch bump moved the source to a new "
                                         "epoch; reconciling",
                                         what));
  }
  return Status::ok();
}

Result<SourceState> MysqlOutboxStore::loadState() {
  auto rows = queryRows(fmt::format(
      "SELECT epoch, assigned_through, published_through, published_stream_seq, halted_reason, paused, {}, "
      "scan_cursor, scan_floor, halted_row_id, halted_version, bump_from_epoch FROM outbox_source_state s "
      "WHERE source = {}",
      epochStartColumns("s.epoch"), sourceLiteral_));
  if (!rows.isOk()) return rows.status();
  if (!rows->next()) return Status::transient("outbox_source_state has no row for source " + source_.name);
  SourceState state;
  state.epoch = rows->u64("epoch");
  state.assignedThrough = rows->u64("assigned_through");
  state.publishedThrough = rows->u64("published_through");
  state.publishedStreamSeq = rows->u64("published_stream_seq");
  state.haltedReason = std::string(rows->text("halted_reason"));
  state.paused = rows->u64("paused") != 0;
  state.epochVersionsAfter = rows->u64("epoch_versions_after");
  state.epochStreamSeq = rows->u64("epoch_stream_seq");
  state.scanCursor = rows->optU64("scan_cursor");
  state.scanFloor = rows->optU64("scan_floor");
  if (auto id = rows->optU64("halted_row_id")) state.haltedRow = HaltedRow{*id, rows->optU64("halted_version")};
  state.bumpFromEpoch = rows->optU64("bump_from_epoch");
  return state;
}

Result<db::Rows> MysqlOutboxStore::queryRows(const std::string& sql, const char* isolation) {
  auto rows = session_->run([&](db::Connection& conn) -> Result<db::Rows> {
    if (isolation != nullptr) {
      OUTBOX_RETURN_IF_ERROR(conn.exec(fmt::format("SET TRANSACTION ISOLATION LEVEL {}", isolation)));
    }
    return conn.query(sql);
  });
  // A statement that failed before it began a transaction leaves the isolation level set for the
  // next one, which may be the scan's consistent read: start from a fresh connection instead.
  if (isolation != nullptr && !rows.isOk()) session_->drop();
  if (!rows.isOk() && rows.status().cause() == Cause::kMissingTable) {
    return Status::permanent(fmt::format("{}; the schema is older than this bridge: run `outbox-bridge migrate` (the "
                                         "source resumes by itself)",
                                         rows.status().message()))
        .because(Cause::kMissingTable);
  }
  return rows;
}

Status MysqlOutboxStore::guardedStateWrite(const std::string& assignments, const std::string& condition,
                                           const char* what) {
  return session_->run([&](db::Connection& conn) { return guardedStateWrite(conn, assignments, condition, what); });
}

Status MysqlOutboxStore::lockState(db::Connection& conn, const char* what) {
  return guardedStateWrite(conn, "s.source = s.source", "", what);
}

void MysqlOutboxStore::setWriteGuard(WriteGuard guard) {
  guard_ = std::move(guard);
  // A new session: an epoch bump may have moved the scan below versioned rows, an operator may have
  // quarantined rows ahead of it.
  leanThrough_.reset();
  if (marks_ != nullptr) marks_->forget(source_.name);  // an earlier session's offer
}

}  // namespace outbox

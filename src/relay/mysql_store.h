#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "config/config.h"
#include "db/pool.h"
#include "db/session.h"
#include "relay/joint_marks.h"
#include "relay/ports.h"

namespace outbox {

// OutboxStore over one MySQL/MariaDB connection of its own, or over connections borrowed from a
// pool shared with other sources (docs/design.md, "Connections"). Not thread-safe.
class MysqlOutboxStore final : public OutboxStore {
 public:
  // `idleTransactionTimeout` (MariaDB's idle_transaction_timeout; on MySQL, which lacks it,
  // wait_timeout; 0: server default): a process frozen in the middle of a transaction (SIGSTOP, a
  // VM stall) must not hold its row locks — and so block the instance that takes over — for longer
  // than this.
  // `check`: whether every connect first checks what the relay needs of the server
  // (db::checkServer: the PROCESS privilege, a primary); a shortfall is a permanent error naming
  // the fix. kCheckAndWarn also logs, once, what the operator should know (a Galera node).
  enum class ServerCheck { kNone, kCheck, kCheckAndWarn };
  // A batch of at most this many rows checks the quarantine in its versions INSERT (one statement
  // less a trickle's row, issue 20); a larger one reads the quarantine first and inserts VALUES.
  static constexpr size_t kFoldedCheckRows = 16;
  explicit MysqlOutboxStore(const SourceConfig& source, std::chrono::seconds idleTransactionTimeout = {},
                            ServerCheck check = ServerCheck::kNone);
  // Over `pool` (on the source's database), whose connections ran connectionSetup(). The pool
  // outlives the store. `marks` (null: each mark alone): the database's joint marks, which the
  // store's marks and rides go through while a lease guards its writes; it outlives the store.
  MysqlOutboxStore(const SourceConfig& source, db::ConnectionPool& pool, ServerCheck check,
                   JointMarks* marks = nullptr);
  ~MysqlOutboxStore() override;
  // Its session's setup calls back into it: it stays where it was made.
  MysqlOutboxStore(const MysqlOutboxStore&) = delete;
  MysqlOutboxStore& operator=(const MysqlOutboxStore&) = delete;

  // What every connection of a pool the stores share runs once (see the constructor above).
  static db::ConnectionPool::Setup connectionSetup(std::chrono::seconds idleTransactionTimeout);

  void setWriteGuard(WriteGuard guard) override;
  Status connect() override;
  Result<SourceState> loadState() override;
  Result<NewRows> readNew(uint64_t cursor, int limit, bool withConnections) override;
  Result<std::vector<ScannedRow>> readRanges(const std::vector<IdRange>& ranges, int limit) override;
  Result<std::vector<IdRange>> unheld(const std::vector<IdRange>& ranges) override;
  Result<bool> spanClear(const IdRange& span) override;  // two statements at most, never halved
  // From SHOW ALL SLAVES STATUS (MariaDB, needs SLAVE MONITOR) or SHOW REPLICA STATUS (MySQL,
  // REPLICATION CLIENT); without the grant, from the applier threads' state in PROCESSLIST, which
  // cannot show a stopped SQL thread's unapplied relay log. Logs when the answer changes.
  Result<bool> applierWorkLeft() override;
  Result<std::vector<IdRange>> unresolved(uint64_t floor, uint64_t cursor) override;
  Result<std::optional<uint64_t>> nextAutoId() override;
  Result<uint64_t> initialFloor() override;
  Result<std::vector<IdRange>> pinnedHoles() override;
  Result<std::string> openTransactionsOlderThan(std::chrono::seconds olderThan) override;
  Status saveScan(const ScanMark& mark) override;
  Result<std::vector<OutboxRow>> readAssigned(uint64_t fromVersion, uint64_t throughVersion, int limit) override;
  Status assign(std::vector<OutboxRow>& rows, uint64_t expectedAssignedThrough, const ScanMark& mark) override;
  void offerMark(const PublishedMark& mark) override;
  Status markPublished(uint64_t version, uint64_t seq) override;
  Status setPublished(uint64_t version, uint64_t seq) override;
  Result<uint64_t> adoptStaleTail(const StaleTail& tail) override;
  Status completeEpochBump(const StreamTip& tip) override;
  Status halt(const std::string& reason, std::optional<HaltedRow> row) override;
  Status clearHalt() override;
  Status quarantine(uint64_t outboxId, const std::string& reason) override;

  // `outbox-bridge epoch bump`, given the stream's tip read just before (for the epochs it holds):
  // in one transaction, a new epoch above the database's and the stream's, the halt cleared, the
  // reason recorded in outbox_epoch_history, and the bump left for the leader to finish
  // (bump_from_epoch; completeEpochBump). A leader still publishing is fenced from then on: its
  // writes carry the old epoch. Returns the new state.
  Result<SourceState> epochBump(const StreamTip& tip, const std::string& reason);

 private:
  MysqlOutboxStore(const SourceConfig& source, ServerCheck check);
  struct ServerKind {
    bool mysql = false;
    bool writersVisible = false;
  };
  static ServerKind serverKind(db::Connection& conn);
  // The columns where the epoch `epoch` began (outbox_source_state alias s): epoch_versions_after,
  // epoch_stream_seq.
  static std::string epochStartColumns(const char* epoch);
  // A connection's own part: session variables, the scan's clock lock (`clockRefused` says why
  // it could not be taken).
  static Status setUpConnection(db::Connection& conn, const ServerKind& kind,
                                std::chrono::seconds idleTransactionTimeout,
                                const std::function<void(const std::string&)>& clockRefused);
  // What the session does first, and after its connection was dropped (db::Session's setup): the
  // server's kind, the server check, the state row.
  Status prepare(db::Connection& conn);
  // A query outside a transaction, after SET TRANSACTION ISOLATION LEVEL `isolation` when given
  // (for that statement only).
  Result<db::Rows> queryRows(const std::string& sql, const char* isolation = nullptr);
  // Outbox rows (alias o) matching `where`, in id order, with whether each has a version and
  // whether it is quarantined.
  std::string scannedRowsQuery(const std::string& where) const;
  static std::vector<ScannedRow> scannedRows(db::Rows& rows);
  // Appends to `dead` the ranges a locking probe finds free, spending at most `budget` statements.
  Status probeDead(const std::vector<IdRange>& ranges, bool downwards, int& budget, std::vector<IdRange>& dead);
  // Appends to `dead` the spans, or halves of them, whose ids without a version hold no visible
  // row and no lock, spending at most `budget` statements.
  Status probeSpans(const std::vector<IdRange>& spans, int& budget, std::vector<IdRange>& dead);
  // Whether `select` (a read of the outbox table without its locking clause), run as a locking
  // read at READ COMMITTED, NOWAIT, finds no row and no lock.
  Result<bool> lockFree(const std::string& select);
  // The locking probe's read of `ranges`, in id order up or down.
  std::string rangesProbe(const std::vector<IdRange>& ranges, bool downwards) const;
  // "UPDATE outbox_source_state s SET <assignments> WHERE s.source = ... [AND s.epoch = ...] AND
  // <condition> [AND EXISTS (the lease held)]", with the write guard's checks.
  std::string guardedStateUpdate(db::Connection& conn, const std::string& assignments, const std::string& condition);
  // Runs a guarded update that must match the state row: none matched means the guard refused
  // (transient; the connection is kept). On `conn` inside a transaction, or on its own.
  Status guardedStateWrite(db::Connection& conn, const std::string& assignments, const std::string& condition,
                           const char* what);
  Status guardedStateWrite(const std::string& assignments, const std::string& condition, const char* what);
  // Takes the state row's lock on `conn`, inside a transaction, where the write guard holds (else
  // transient, as a refused write): what writers that must not interleave take first.
  Status lockState(db::Connection& conn, const char* what);
  // The pinned holes' changes of `mark` (outbox_scan_holes), on `conn` inside a transaction.
  Status recordPins(db::Connection& conn, const ScanMark& mark);
  // The transient failure of a claim that matched no state row, naming which of its conditions
  // fails (read on `conn`, in the claim's transaction).
  Status lostClaim(db::Connection& conn, uint64_t expectedAssignedThrough);
  // On `conn`, inside a transaction that holds the state row: the rows a bump's finish took
  // tail's versions from (outbox_bump_removed) get them back, and leave that table. Those rows
  // must hold no version now. Returns how many.
  Result<uint64_t> giveBackStaleTail(db::Connection& conn, const StaleTail& tail);

  const SourceConfig& source_;
  ServerCheck check_;
  bool notesLogged_ = false;
  bool applierWorkLeft_ = false;  // what applierWorkLeft() last said
  std::string table_;        // quoted identifier
  std::string versions_;     // `<outbox_table>_versions`, quoted
  std::string sourceLiteral_;  // the source's name as an SQL string
  bool mysql_ = false;  // MySQL rather than MariaDB: FOR SHARE NOWAIT (error 3572), cached statistics
  // The server shows who may write the outbox table (MariaDB's metadata_lock_info plugin): the
  // connection reading lists only those (readNew).
  bool writersVisible_ = false;
  bool clockWarned_ = false;  // the scan's clock lock could not be taken: said once
  std::string tableLiteral_;  // the outbox table's name as an SQL string
  WriteGuard guard_;
  // readNew leaves out its join of the versions while the cursor is at or above `versioned` (the
  // highest outbox id with a version), and that of the quarantine too while it is at or above
  // `quarantined` (the source's highest quarantined id); both read at a session's first read, by
  // each store that reads (a failed assign resets the assigning store's too, which reads new
  // rows only without a read store). The thread's that reads the scan, as readNew is;
  // setWriteGuard's reset comes from the relay thread while no batch is being prepared or read (a
  // session begins after both drained). Whether a read left the versions' join out travels with
  // its batch (ScanMark::leanRead) to the assign, which may be another store's.
  struct LeanThrough {
    uint64_t versioned = 0;
    uint64_t quarantined = 0;
  };
  std::optional<LeanThrough> leanThrough_;
  // The database (or a proxy before it) refused several statements sent as one: the assign sends
  // them one at a time (assign). The thread's that assigns.
  bool oneStatementAtATime_ = false;
  // Batches in a row whose statements were refused as one and whose claim alone was then answered;
  // so many say the refusal is the database's way, not a claim's failure of its own (a statement
  // time limit, a read-only moment): one at a time from then on.
  int refusedAsOneInARow_ = 0;
  static constexpr int kRefusalsBeforeOneAtATime = 3;
  // When a poll with nothing to assign last asked the state row's epoch (readNew).
  std::chrono::steady_clock::time_point epochAskedAt_{};
  JointMarks* marks_ = nullptr;
  std::unique_ptr<db::Session> session_;  // set last: its setup uses the members above
};

}  // namespace outbox

#pragma once

// The seams of the relay: what it needs from the database and from JetStream. The real
// implementations are MysqlOutboxStore and JetStreamPublisher; unit tests use fakes.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "relay/outbox_row.h"
#include "relay/scan_reads.h"

namespace outbox {

// The row a source halted on, when one row is the cause (outbox_source_state.halted_row_id and
// halted_version): a poison row, before it got a version, or a row the server refuses now that was
// assigned `version` while it could still be published.
struct HaltedRow {
  uint64_t id = 0;
  std::optional<uint64_t> version;
  bool operator==(const HaltedRow&) const = default;
};

// One row of outbox_source_state.
struct SourceState {
  uint64_t epoch = 1;
  uint64_t assignedThrough = 0;
  uint64_t publishedThrough = 0;
  uint64_t publishedStreamSeq = 0;
  std::string haltedReason;  // empty: not halted
  std::optional<HaltedRow> haltedRow;
  bool paused = false;       // an operator paused the source (admin API)
  // The epoch's versions start above this, and its messages after this stream sequence
  // (outbox_epoch_history.versions_after and stream_seq; 0 in epoch 1): a stream that lost
  // everything is published again from here.
  uint64_t epochVersionsAfter = 0;
  uint64_t epochStreamSeq = 0;
  // Where the scan for new rows stands (docs/design.md, "Contract v2"); nullopt until the source is
  // first scanned.
  std::optional<uint64_t> scanCursor;  // the highest outbox id read past
  std::optional<uint64_t> scanFloor;   // every id at or below it is resolved for good
  // Set while an `epoch bump` waits for the leader to finish it (completeEpochBump): the epoch
  // whose versions are still to be moved on. `epoch` is already the new one.
  std::optional<uint64_t> bumpFromEpoch;
};

// What the stream has acknowledged, for published_through and published_stream_seq (version 0:
// nothing to mark).
struct PublishedMark {
  uint64_t version = 0;
  uint64_t seq = 0;
};

// What the assign transaction also records: where the scan stands once the batch is versioned.
// Every id at or below `cursor` is resolved (versioned, quarantined, never used), above `floor`,
// or inside a range of outbox_scan_holes (the holes kept for a while): `pin` adds ranges there,
// `unpin` deletes them by first id (none of their ids is open any more). `published`, when set,
// moves the published marks forward (never back) in the same statement: the acks of the batch
// before ride on this one's commit instead of one of their own (docs/design.md, "Marks").
struct ScanMark {
  uint64_t cursor = 0;
  uint64_t floor = 0;
  std::vector<IdRange> pin;
  std::vector<uint64_t> unpin;
  PublishedMark published;
  // The new rows were read without the versions' join (NewRows::lean): a duplicate outbox_id on
  // the assign is a row of the batch that has a version (scan again), not a halt. Travels with the
  // mark because the read and the assign may be on different stores (the relay reads the next
  // batch while this one is assigned).
  bool leanRead = false;
  // Whether recording this mark changes what `recorded` says.
  bool differsFrom(const ScanMark& recorded) const {
    return cursor != recorded.cursor || floor != recorded.floor || !pin.empty() || !unpin.empty();
  }
};

// The stream's last message, as reconcile needs it.
struct StreamTip {
  uint64_t lastSeq = 0;              // the stream's last sequence (0: never written)
  std::optional<uint64_t> version;   // Outbox-Version of the newest stored message; nullopt: none stored
  uint64_t epoch = 0;                // its Outbox-Epoch
  uint64_t seq = 0;                  // its sequence
};

// Messages of an older epoch that the stream stored after the epoch's recorded start
// (outbox_epoch_history.stream_seq), before any message of the epoch itself: the last publishes of
// a leader an `epoch bump` fenced (frozen past its lease, or the previous session's, landing late),
// stored after the bump's finish read the stream's tip. Sequences afterSeq+1..throughSeq hold
// versions firstVersion..lastVersion, one each: every publish is fenced on the sequence before
// it, and all but a session's first also on the version before it.
struct StaleTail {
  uint64_t afterSeq = 0;
  uint64_t throughSeq = 0;
  uint64_t firstVersion = 0;
  uint64_t lastVersion = 0;
  bool operator==(const StaleTail&) const = default;
};

// The server's answer to the publish of one version.
struct VersionAck {
  uint64_t version = 0;
  uint64_t seq = 0;
  bool ok = false;
  bool fenced = false;  // Nats-Expected-Last-Sequence did not match: reconcile
  std::string error;
};
// A publisher reports an ack as ok only when the stream holds the version at `seq`: a duplicate
// ack whose first copy was deleted or expired (inside the duplicate window) is a failure.

// Who may write: the assign, mark and reconcile statements check it in their own transaction
// against outbox_bridge_lease, so a stale leader's writes change nothing.
struct LeaseGuard {
  std::string holder;
  uint64_t leaseEpoch = 0;
};

// The conditions every write of the relay carries: the lease (when there is one) and the epoch
// its session reconciled in, so a leader that an `epoch bump` overtook can neither assign nor
// mark nor halt the new epoch (docs/design.md, "Reconcile": the bump fences it).
struct WriteGuard {
  std::optional<LeaseGuard> lease;  // nullopt: unguarded (a single instance, tests)
  uint64_t epoch = 0;               // 0: any epoch (before the state is loaded)
};

// The source's tables. Single-threaded: the source's relay thread owns it.
class OutboxStore {
 public:
  virtual ~OutboxStore() = default;
  // From now on, writes take effect only while `guard` holds. A write the guard refuses (other
  // than a mark, which may find nothing to move) is a transient error: reconcile.
  virtual void setWriteGuard(WriteGuard guard) = 0;
  // Connects unless connected; creates the source's state row if it is missing.
  virtual Status connect() = 0;
  virtual Result<SourceState> loadState() = 0;
  // Section 3a, step (1) and (2): up to `limit` rows with ids above `cursor`, in id order, in one
  // consistent read; with `withConnections`, the busy connections read right after it.
  virtual Result<NewRows> readNew(uint64_t cursor, int limit, bool withConnections) = 0;
  // Step (3): the first `limit` rows visible now (a fresh consistent read) with ids in `ranges`
  // (ascending, disjoint; of a span, only rows without a version and not quarantined), in id
  // order. One statement, whatever the number of ranges.
  virtual Result<std::vector<ScannedRow>> readRanges(const std::vector<IdRange>& ranges, int limit) = 0;
  // The parts of `ranges` (ascending, disjoint; none of their rows visible when read) that no row
  // and no transaction occupies, ascending: a locking read at READ COMMITTED, NOWAIT, returns no
  // row and no lock error there. Called once no statement that could have taken them still runs:
  // such an id was rolled back or never used. A span is dead, whole or in parts (returned as
  // spans), where no row without a version and not quarantined is visible and nothing is locked.
  virtual Result<std::vector<IdRange>> unheld(const std::vector<IdRange>& ranges) = 0;
  // Whether unheld()'s locking read finds `span` (a span) clear whole: no row without a version and
  // not quarantined visible, nothing locked. Asked while statements that may hold its ids still
  // run: clear, none of its ids holds a row yet (the scan then reads it only after one of them
  // ends: docs/design.md, "Quiet spans"). A store may stop at the first lock it meets.
  virtual Result<bool> spanClear(const IdRange& span) {
    auto clear = unheld({span});
    if (!clear.isOk()) return clear.status();
    return clear->size() == 1 && clear->front() == span;
  }
  // Whether a replication applier on this server has work left (docs/design.md, "Contract v2":
  // replica threads): a replication connection whose relay log holds events it has not executed —
  // its SQL thread running or stopped (started, it applies them) — or an applier thread busy
  // applying. Such an applier writes rows with ids another server handed out (a promoted replica
  // still catching up, a second primary) and shows in no ConnectionReading, so it may hold any open
  // hole: while it has work left, no hole dies. One that has executed everything it received holds
  // none. Asked after the new-row read it guards and before unheld().
  virtual Result<bool> applierWorkLeft() = 0;
  // The ids in (floor, cursor] that have no version and are not quarantined, visible or not (the
  // open holes of a scan that restarts), as ascending ranges.
  virtual Result<std::vector<IdRange>> unresolved(uint64_t floor, uint64_t cursor) = 0;
  // The ranges of outbox_scan_holes (ScanMark::pin), ascending by first id.
  virtual Result<std::vector<IdRange>> pinnedHoles() = 0;
  // For people: the transactions open at least `olderThan` that may hold long-open holes (each
  // connection, its user, host and age; XA transactions left PREPARED by xid); empty when none.
  virtual Result<std::string> openTransactionsOlderThan(std::chrono::seconds olderThan) = 0;
  // The id the table's AUTO_INCREMENT gives next (nullopt when the server does not say).
  virtual Result<std::optional<uint64_t>> nextAutoId() = 0;
  // Where a source never scanned starts: just below its lowest row without a version, and below
  // every row a transaction open now may hold.
  virtual Result<uint64_t> initialFloor() = 0;
  // Records the scan's progress when a poll assigned nothing: the cursor, the floor and the pinned
  // holes' changes, in one transaction.
  virtual Status saveScan(const ScanMark& mark) = 0;
  // Rows with versions from `fromVersion` up to `throughVersion`, in version order.
  virtual Result<std::vector<OutboxRow>> readAssigned(uint64_t fromVersion, uint64_t throughVersion, int limit) = 0;
  // One transaction: gives `rows` (in id order) versions expectedAssignedThrough+1... (one
  // multi-row INSERT into the versions table), moves assigned_through and records `mark` (with
  // the pinned holes' changes),
  // provided assigned_through is still `expectedAssignedThrough` and the source is not halted.
  // Sets each row's version on success.
  virtual Status assign(std::vector<OutboxRow>& rows, uint64_t expectedAssignedThrough, const ScanMark& mark) = 0;
  // Acks that may wait for markPublished: a store that writes the marks of several sources
  // together (JointMarks) may write these with another source's.
  virtual void offerMark(const PublishedMark& mark) { (void)mark; }
  // Moves published_through/published_stream_seq forward (never back).
  virtual Status markPublished(uint64_t version, uint64_t seq) = 0;
  // Sets published_through/published_stream_seq to what the stream holds (reconcile).
  virtual Status setPublished(uint64_t version, uint64_t seq) = 0;
  // The stream stored `tail` after the epoch's recorded start, and nothing of the epoch itself
  // (reconcile; findResumePoint). In one transaction, guarded like every write, and only while the
  // epoch still begins at tail.afterSeq with nothing of it published (else transient): the rows a
  // bump's finish took those versions from get them back (outbox_bump_removed), since the stream
  // holds them; every version the epoch assigned is dropped (none can be in the stream: an
  // old-epoch message cannot follow one of the epoch) and assigned_through goes back to where the
  // epoch's versions start, so they are handed out again, densely, by the scan (scan_floor goes
  // below their rows); the epoch begins after tail.throughSeq (outbox_epoch_history.stream_seq and
  // published_stream_seq). Returns how many rows got their versions back.
  virtual Result<uint64_t> adoptStaleTail(const StaleTail& tail) = 0;
  // Finishes a pending `epoch bump` (state.bumpFromEpoch), given the stream's tip read by the
  // leader once nothing it sent is in flight, so the tip is final for the old epoch but for a
  // fenced leader's last messages (a StaleTail, found by a later reconcile): in one transaction,
  // what planEpochBump() says — assigned and published through the highest version ever used, the
  // versions the stream lacks cleared and recorded in outbox_bump_removed (their rows are found
  // again and published under new versions, unless a StaleTail gives them back), where the epoch
  // begins recorded. A StaleTail of an older epoch past the old epoch's start (a second bump before
  // the first one's epoch published) is given back as adoptStaleTail does. Ok, changing nothing,
  // when no bump is pending. Guarded like every write.
  virtual Status completeEpochBump(const StreamTip& tip) = 0;
  // Stops the source until an operator acts: `reason` for people, `row` when one row is the cause.
  virtual Status halt(const std::string& reason, std::optional<HaltedRow> row) = 0;
  virtual Status clearHalt() = 0;
  // Sets an unpublished row aside for good. A row that already has a version, or that is not
  // committed (yet): kRejected. Waits for an assign in progress (both take the state row first).
  virtual Status quarantine(uint64_t outboxId, const std::string& reason) = 0;
};

// The source's stream. Single-threaded like the store, except that acks arrive from elsewhere.
class Publisher {
 public:
  virtual ~Publisher() = default;
  // (Re)connects and creates the stream if it is missing. A stream with other subjects is a
  // permanent error.
  virtual Status prepare() = 0;
  virtual Result<StreamTip> tip() = 0;
  // Sends `row` fenced on `expectedLastSeq` and, with `fenceOnPreviousVersion`, also on the
  // stream's last message being version row.version - 1 (Nats-Expected-Last-Msg-Id). Its
  // VersionAck arrives through takeAcks().
  //
  // Why both: a pipelined writer's sequence fences are consecutive, so when one is refused the
  // next can match as soon as another writer stores a message (a stale leader resumed after an
  // epoch bump would then store old-epoch messages between the new leader's). Message ids of one
  // source are never reused (invariant 5), so the id fence cannot be met by anyone else's
  // message. The first publish of a session fences on the sequence only: the server forgets the
  // last id when it restarts and the last message is older than the duplicate window.
  virtual Status publish(const OutboxRow& row, uint64_t epoch, uint64_t expectedLastSeq,
                         bool fenceOnPreviousVersion) = 0;
  virtual void takeAcks(std::vector<VersionAck>& out) = 0;
  virtual void waitForAcks(std::chrono::milliseconds timeout) = 0;
  // Forgets every publish still in flight, and every ack not yet taken; none will come for them.
  virtual void abandon() = 0;
  // Why this row cannot be published as is, or nullopt when it can; then it fills the row's
  // subject and moreHeaders, which publish() uses instead of working them out again.
  // Thread-safe: prepareBatch calls it on the relay's prefetch thread.
  virtual std::optional<std::string> poisonReason(OutboxRow& row) = 0;
};

}  // namespace outbox

#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <spdlog/logger.h>

#include "common/clock.h"
#include "common/prefetcher.h"
#include "common/status.h"
#include "common/wakeup.h"
#include "common/stop_token.h"
#include "config/config.h"
#include "lease/lease.h"
#include "metrics/source_metrics.h"
#include "relay/ack_window.h"
#include "relay/batch.h"
#include "relay/poll_pacer.h"
#include "relay/ports.h"
#include "relay/progress_log.h"
#include "relay/scanner.h"
#include "settle/settle_feed.h"

namespace outbox {

// The relay of one source (docs/design.md, "The relay loop", "Reconcile", "Failure handling"):
// read pending rows, assign them versions, publish them fenced and pipelined, mark what the
// stream holds; reconcile with the stream on start and after every failure. One thread per source
// runs run(); the store and the publisher belong to that thread, except `assignStore` (a second
// connection) and Publisher::poisonReason(), which the prefetch thread uses to prepare the next
// batch while this one is published, and Options::readStore, on which a third thread reads the
// batch after that while the next one is assigned. Every time and wait is the `clock`'s.
// `source`, the stores, `publisher`, `lease`, `stop`, `metrics` and `clock` must outlive the Relay.
class Relay {
 public:
  struct Options {
    int maxInFlight = 4096;                          // versions sent and not yet acked
    std::chrono::milliseconds ackTimeout{5000};      // a publish not acked within this: reconcile
    // The longest acks wait for published_through: until then they ride on the next batch's
    // assign, a trickle's mark costing no commit of its own (docs/design.md, "Marks").
    std::chrono::milliseconds markInterval{500};
    std::chrono::milliseconds haltRecheck{1000};     // how often a halted source looks again
    // Rung by the binlog doorbell and the shared idle check (docs/design.md, "Waking up"); null:
    // the relay polls on its own, following the flow. The `stop` given to the relay must stop()
    // it (onRequest).
    Wakeup* wakeup = nullptr;
    // The source's settle feed when it settles (docs/design.md, "The settled stream (issue 36)"):
    // the rows the stream acknowledged are moved to it, and it is told when a session begins and
    // ends. Null: nothing is kept, and publishing costs what it did.
    SettleFeed* settleFeed = nullptr;
    // A store of its own (a third connection) for the scan, which then reads the next batch while
    // the one before is assigned (docs/design.md, "The relay loop"); null: the scan reads on
    // `assignStore`, one step after the assign.
    OutboxStore* readStore = nullptr;
  };

  // `lease` may be null: then this relay assumes it is the only one (tests, single instance).
  Relay(const SourceConfig& source, OutboxStore& store, OutboxStore& assignStore, Publisher& publisher,
        LeaderLease* lease, StopSignal& stop, SourceMetrics& metrics, const Clock& clock, Options options);

  // Relays until stop is requested. Transient failures are retried with backoff; a halted source
  // waits for an operator (epoch bump, or a poison row fixed or quarantined). Returns within
  // about a second of stop, after waiting briefly for publishes in flight to be acked and marked.
  void run();

 private:
  // A session ends to leave the source to `to`, a candidate that leads fewer sources: not a
  // failure, so no backoff, no halt.
  struct HandOver {
    std::string to;
  };
  // How a session ended: a Status (ok: stop was requested; else the failure), or a hand-over.
  using SessionEnd = std::variant<Status, HandOver>;

  // One leadership session: set up, then the loop — take acks, publish a ready batch, poll for
  // the next, wait — until a failure, stop, or a lighter candidate to hand the source to.
  SessionEnd session();
  // Waits as a standby until this process holds the lease (or stop). False on stop.
  bool awaitLeadership();
  // Not (or no longer) the leader: the gauges only a leader knows go to zero.
  void standBy();
  // Ok while we may act as leader of the lease epoch the session started with.
  Status checkLeadership();
  // Guards every write with this session's lease and epoch, connects, and reconciles; the
  // session's first batch then rebuilds the scan.
  Status beginSession();
  Status reconcile();
  // An `epoch bump` recorded the new epoch: reads the stream's tip and moves the versions on
  // (OutboxStore::completeEpochBump), then reloads state_.
  Status finishEpochBump();
  // A halt on a row that has since become publishable (a poison row fixed or quarantined, an
  // assigned row the server takes again) clears itself; any other halt waits for an operator.
  Status recheckHalt();
  // Starts the next poll: the assigned-but-unpublished tail first (after reconcile), else the
  // next batch on the prefetch thread.
  Status poll();
  // Publishes the next rows (a batch's worth) of the assigned-but-unpublished tail.
  Status publishTail();
  void startBatch();
  // Counts what woke the poll starting now (outbox_wakeups_total) and the rings it answers.
  void countWakeup();
  // Publishes a batch prepareBatch made (starting the next one first when more is waiting), and
  // deals with the poison row that ended it, if any.
  Status onBatch(Batch& batch);
  bool roomFor(size_t rows) const;
  // Takes the rows by value: with a settle feed, each sent row is kept (moved) until acked.
  Status publishRows(std::vector<OutboxRow> rows);
  // Moves the sent rows now below the contiguous ack mark to the settle feed.
  void feedAcked();
  // Takes the acks received so far and marks; returns the first publish failure, if any.
  Status takeAcks();
  // Counts what `taken` published (rows, commit-to-ack latency) and its failure (errors); returns
  // that failure as a transient Status (the session reconciles), else ok.
  Status count(const AckWindow::Taken& taken);
  // A publish unanswered past ack_timeout ends the session: reconcile finds what the stream has.
  Status checkAckDeadline();
  // Waits for acks or for the next poll, whichever is due first (at most 50 ms).
  void waitForWork();
  // Writes the acks taken so far to published_through on its own, once they have waited
  // markInterval for a batch to carry them (at once with `force`).
  Status mark(bool force);
  // Acks not yet in published_through, for the next batch to carry (version 0: none).
  PublishedMark unmarked() const;
  // `mark` is in published_through now (by a mark or a batch that carried it).
  void marked(const PublishedMark& mark);
  // After a failure: takes acks until every publish in flight is answered (bounded by `limit`),
  // then a last mark, and closes the window. Marks nothing unless this session's reconcile
  // opened the window.
  void settle(std::chrono::milliseconds limit);
  Status haltWith(const std::string& reason, std::optional<HaltedRow> row = std::nullopt);

  const SourceConfig& source_;
  std::shared_ptr<spdlog::logger> log_;  // lines about this source
  OutboxStore& store_;
  OutboxStore& assignStore_;  // the prefetch thread's, while a batch is being prepared
  Publisher& publisher_;
  LeaderLease* lease_;
  StopSignal& stop_;
  SourceMetrics& metrics_;
  const Clock& clock_;
  Options options_;
  uint64_t sessionLeaseEpoch_ = 0;
  // The lease epoch "leader" was last logged for (0: none since standing by): a halted or paused
  // source, or one retrying, starts a session every few seconds and says so once.
  uint64_t leaderSaidFor_ = 0;
  WriteGuard guard_;  // this session's, on both stores

  Scanner scanner_;  // the prefetch or read-ahead thread's, while a batch is being prepared or read
  // The scan's view predates the last reconcile: the next batch first rebuilds it from state_.
  bool scanFromState_ = false;
  // With Options::readStore: the next batch's read, started by the prefetch thread (its caller)
  // as it assigns a full batch. Before prefetcher_: its work waits for this one's.
  std::unique_ptr<Prefetcher<ScannedBatch>> readAhead_;
  Prefetcher<Batch> prefetcher_;

  SourceState state_;
  uint64_t expectedSeq_ = 0;  // the stream's last sequence once everything sent is stored
  bool nothingSentYet_ = true;  // this session: fence its first publish on the sequence only
  // This session's publishes in flight, from reconcile() to the end of settle(): marks come only
  // from it.
  AckWindow window_;
  PollPacer pacer_;
  Wakeup::Rings answeredRings_;  // the rings the last poll answered
  std::optional<Clock::TimePoint> unmarkedSince_;  // when acks first passed published_through
  uint64_t offeredMark_ = 0;  // the acks last offered to the store (OutboxStore::offerMark)
  ProgressLog progress_;
  // The stream acknowledged a publish of this session: its failure starts the backoff afresh.
  bool ackedThisSession_ = false;
  // With a settle feed: this session's sent rows not yet below the contiguous ack mark, oldest
  // first (at most maxInFlight), and the vector handed to the feed (reused).
  std::deque<OutboxRow> sentRows_;
  std::vector<SettleFeed::Row> feeding_;
};

}  // namespace outbox

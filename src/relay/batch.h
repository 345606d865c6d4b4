#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "metrics/source_metrics.h"
#include "relay/ports.h"
#include "relay/scanner.h"

namespace outbox {

// The life of a batch, the one place it is told whole (docs/design.md, "The relay loop"):
//  1. read — readBatch on the read-ahead thread (Relay::Options::readStore, a backlog with no hole
//     open) or the prefetch thread: the scan's rows above the cursor and the holes' late rows,
//     stopped before the first poison row; the scanner counts them as its own from here on.
//  2. assigned — assignBatch on the prefetch thread, one transaction: the claim on
//     assigned_through under the write guard, the versions, the scan's cursor and floor, and the
//     acks of earlier batches riding on it (`published`).
//  3. published — Relay::onBatch on the relay thread: each row sent fenced on the one before;
//     the batch after it is being assigned meanwhile.
//  4. acknowledged — Relay::takeAcks: the stream's acks into the AckWindow; a failure or an ack
//     past ack_timeout ends the session, and reconcile finds what the stream holds. With a settle
//     feed, its rows go on to the settle thread once every version below them is acknowledged
//     too (Relay::feedAcked).
//  5. marked — published_through moves past it on a later batch's transaction (2), or on its own
//     after Relay::Options::markInterval (Relay::mark).
// A batch whose step fails is never finished in its session: the session ends, and the next one
// starts again from the database and the stream.

// The database half of a batch, ready to publish.
struct Batch {
  Status status;
  std::vector<OutboxRow> rows;  // assigned, in version order
  size_t read = 0;              // rows the new-row read returned (as many as asked: more may wait)
  std::optional<std::pair<uint64_t, std::string>> poison;  // (row id, reason): the batch stops before it
  bool holesOpen = true;  // the scan keeps open holes (they need probes); true when unknown
  uint64_t cursor = 0;    // the highest outbox id the scan has read past (0 when unknown)
  PublishedMark marked;   // the published marks its transaction wrote (version 0: none)
};

// The first half of a batch: the scan's rows, checked for poison, not yet assigned.
struct ScannedBatch {
  Status status;
  Scanner::Batch scan;
  std::optional<std::pair<uint64_t, std::string>> poison;  // (row id, reason): the rows stop before it
  bool saveScan = false;  // no row to assign, but a mark to record
  // The scanner's figures once the rows are versioned, taken as the scan ended (the scanner may
  // be reading the next batch meanwhile).
  bool holesOpen = true;
  uint64_t openHoles = 0;
  std::chrono::milliseconds oldestHoleAge{0};
  uint64_t holeRanges = 0;
  uint64_t quietRanges = 0;
  uint64_t holeReads = 0;
  // As many new rows as asked and no poison row: more may wait, and the next batch may be read
  // before this one is assigned.
  bool full(int limit) const {
    return status.isOk() && scan.newRead == static_cast<size_t>(limit) && !poison;
  }
};

// A batch in two halves (docs/design.md, "The relay loop" and "Contract v2: finding late
// commits"): readBatch scans for committed rows and stops before the first poison row;
// assignBatch versions them, and records the scan's cursor and floor, in one transaction.
//
// readBatch takes the rows as the scanner's (Scanner::committed) before they are assigned, so
// that the next batch can be read while this one is assigned: a batch whose assign fails, or
// one read after it, is never assigned in this session (the relay ends it, and the next one
// resets the scanner from the database), and a batch's assign succeeds only after the one before
// it did (assignedThrough, below). On a failed scan the scanner is invalidated. `publisher` is
// asked only poisonReason(), which is thread-safe.
ScannedBatch readBatch(Scanner& scanner, Publisher& publisher, int limit);

// The rows are numbered from assignedThrough + 1; the store's write guard refuses the assign if
// another writer or an epoch bump moved assigned_through. `published` (version 0: none) rides on
// the batch's transaction, when it writes one. Touches neither the scanner nor the publisher.
Batch assignBatch(ScannedBatch scanned, OutboxStore& store, SourceMetrics& metrics, uint64_t assignedThrough,
                  PublishedMark published = {});

// Both halves, one after the other.
Batch prepareBatch(Scanner& scanner, OutboxStore& store, Publisher& publisher, SourceMetrics& metrics, int limit,
                   uint64_t assignedThrough, PublishedMark published = {});

}  // namespace outbox

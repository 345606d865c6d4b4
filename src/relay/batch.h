#pragma once

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

// One batch (docs/design.md, "The relay loop" and "Contract v2: finding late commits"): scan for
// committed rows, stop before the first poison row, and in one transaction version the rows
// before it and record the scan's cursor and floor. The rows are numbered from
// assignedThrough + 1; the store's write guard refuses the assign if another writer or an epoch
// bump moved assigned_through. On failure the scanner is invalidated (the database may differ
// from what it knows). `publisher` is asked only poisonReason(), which is thread-safe: the relay
// runs this on its prefetch thread. `published` (version 0: none) rides on the batch's
// transaction, when it writes one.
Batch prepareBatch(Scanner& scanner, OutboxStore& store, Publisher& publisher, SourceMetrics& metrics, int limit,
                   uint64_t assignedThrough, PublishedMark published = {});

}  // namespace outbox

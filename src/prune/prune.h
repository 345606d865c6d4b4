#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "config/config.h"

namespace outbox {

// The shortest --keep allowed: a JetStream ack is not an fsync, and the reconciler may need the
// rows to publish a lost tail again.
inline constexpr std::chrono::minutes kMinimumKeep{10};

struct PruneOptions {
  std::chrono::milliseconds keep{3'600'000};
  int batch = 5000;  // rows per transaction at most; fewer when the database is slow (pruneStep)
  bool dryRun = false;
  std::chrono::seconds lockWait{2};
  // Called now and then with the rows deleted so far (progress on a terminal).
  std::function<void(uint64_t deleted)> progress;
};

struct PruneReport {
  bool skipped = false;        // another prune held the source's lock
  uint64_t deleted = 0;        // or, with dryRun, how many would be
  double seconds = 0;
  double longestTransactionMs = 0;
  uint64_t publishedThrough = 0;
  std::string oldestKept;      // "id N, version V, created_at T", or "none"
};

// How many versions the next prune transaction covers, given how long the last one took: sized
// so a transaction takes about kPruneTransactionTarget whatever the machine and its load, never
// more than `most`. The contract allows 100 ms; the same size varies 2-3x from one transaction
// to the next once InnoDB flushes pages, and a commit costs little next to the rows (~9 us a row
// here), so the target is low.
inline constexpr std::chrono::milliseconds kPruneTransactionTarget{20};
uint64_t pruneStep(uint64_t last, std::chrono::duration<double, std::milli> took, uint64_t most);

// README, "Pruning": deletes the source's rows with version <= published_through and
// created_at older than `keep`, with their versions-table rows, walking the versions table's
// primary key in ranges sized by pruneStep, one short autocommit DELETE each, at READ COMMITTED
// so no gap locks reach where producers insert or the relay assigns. Never touches unpublished or
// quarantined rows (they have no version at or below published_through). Holds
// GET_LOCK('outbox-prune:<db>.<source>') so overlapping runs skip.
Result<PruneReport> pruneSource(const SourceConfig& source, const PruneOptions& options);

}  // namespace outbox

#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "db/session.h"
#include "lease/lease.h"

namespace outbox {

// What /readyz, /healthz and /metrics need from a source's database.
struct SourceProbeResult {
  bool reachable = false;
  std::string error;           // why not reachable (never SQL text or credentials)
  uint64_t pendingRows = 0;    // committed rows not yet in the stream (quarantined ones excluded)
  double oldestPendingSeconds = 0;
  std::string haltedReason;
  std::optional<uint64_t> haltedRowId;  // the row the source halted on, when one row is the cause
  uint64_t publishedThrough = 0;
  uint64_t assignedThrough = 0;
  uint64_t epoch = 0;
  bool paused = false;
  std::string leaseHolder;        // empty: no lease row yet
  uint64_t leaseEpoch = 0;
  double leaseExpiresInSeconds = 0;  // negative: expired
  // Ranges of outbox_scan_holes (ids the scan has kept open 5 s or more; the first few), and who
  // may be holding them (db::OpenTransactions::describe; empty when none are recorded).
  std::vector<std::pair<uint64_t, uint64_t>> recordedHoles;
  std::string heldBy;
};

// Asks a source's database, on a connection of its own or a pool's (docs/design.md,
// "Connections"), at most once per `maxAge`. While one
// thread asks, the others get the last answer rather than wait for the database (a health probe
// must not queue behind a slow query), except after invalidate(). Thread-safe: HTTP worker
// threads share it.
class SourceProbe {
 public:
  explicit SourceProbe(const SourceConfig& source, std::chrono::milliseconds maxAge = std::chrono::milliseconds(1000));
  // Over connections of `pools` (which outlives the probe), opened with connectParams().
  SourceProbe(const SourceConfig& source, db::ConnectionPools& pools,
              std::chrono::milliseconds maxAge = std::chrono::milliseconds(1000));
  static db::ConnectParams connectParams(const SourceConfig& source);
  SourceProbeResult get();
  // Drops the cached answer, so the next get() asks again (after an admin action).
  void invalidate();
  // The instances standing for the source now, each with the number of this database's sources
  // it leads (not cached). Empty when the candidate table is missing (migrate not run).
  Result<std::vector<Candidate>> candidates();

 private:
  SourceProbeResult query();  // REQUIRES(queryMu_)

  const SourceConfig& source_;
  std::chrono::milliseconds maxAge_;
  std::mutex queryMu_;   // one question to the database at a time; mu_ may be taken inside it
  db::Session session_;  // GUARDED_BY(queryMu_)
  std::mutex mu_;
  SourceProbeResult cached_;                        // GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point cachedAt_;  // GUARDED_BY(mu_); zero: ask again
  bool refreshing_ = false;                         // GUARDED_BY(mu_): a thread is asking
  uint64_t invalidations_ = 0;                      // GUARDED_BY(mu_): invalidate() calls
  uint64_t answeredInvalidations_ = 0;  // GUARDED_BY(mu_): invalidations_ when cached_ was asked
};

// Each source's probe, by the source's name.
using SourceProbes = std::map<std::string, std::unique_ptr<SourceProbe>>;

}  // namespace outbox

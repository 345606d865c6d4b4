#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/clock.h"
#include "metrics/source_metrics.h"
#include "relay/ports.h"
#include "relay/scanner.h"

namespace outbox {

// The database half of a batch — scan for committed rows (Scanner), stop before the first
// poison row, assign versions to the rows before it — run on a thread of its own, so that the
// next batch's database work overlaps with publishing and marking the previous one. One batch at
// a time.
//
// `store` is used only by the assigner's thread (a connection of its own); `publisher` only for
// poisonReason(), which must be thread-safe. Both, and `metrics`, must outlive the Assigner.
class Assigner {
 public:
  struct Batch {
    Status status;
    std::vector<OutboxRow> rows;  // assigned, in version order
    size_t read = 0;              // rows the new-row read returned (as many as asked: more may wait)
    std::optional<std::pair<uint64_t, std::string>> poison;  // (row id, reason)
  };

  Assigner(OutboxStore& store, Publisher& publisher, SourceMetrics& metrics);
  ~Assigner();
  Assigner(const Assigner&) = delete;
  Assigner& operator=(const Assigner&) = delete;

  // The scan starts over from `state` (its scan cursor and floor) before the next batch: after
  // reconcile, and whenever the database may differ from what the scanner knows. Only when !busy().
  void restart(const SourceState& state);
  // Starts a batch of up to `limit` rows numbered from assignedThrough + 1. Only when !busy().
  void start(int limit, uint64_t assignedThrough);
  bool busy() const { return busy_; }
  // Waits up to `timeout` for the batch; returns it once done (and the assigner is free again).
  std::optional<Batch> take(std::chrono::milliseconds timeout);
  // Waits for a started batch to finish and drops it (its rows keep their versions and are
  // published later from the assigned tail).
  void drain();

 private:
  void loop();
  Batch work(int limit, uint64_t assignedThrough);

  OutboxStore& store_;
  Publisher& publisher_;
  SourceMetrics& metrics_;
  SteadyClock clock_;
  Scanner scanner_;                   // the assigner's thread only
  std::optional<SourceState> resetFrom_;  // GUARDED_BY(mu_)
  std::optional<SourceState> resetState_;  // the assigner's thread only: what the scan resets from
  bool busy_ = false;  // owned by the caller's thread

  std::mutex mu_;
  std::condition_variable cv_;
  bool requested_ = false;          // GUARDED_BY(mu_)
  bool quit_ = false;               // GUARDED_BY(mu_)
  int limit_ = 0;                   // GUARDED_BY(mu_)
  uint64_t assignedThrough_ = 0;    // GUARDED_BY(mu_)
  std::optional<Batch> result_;     // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace outbox

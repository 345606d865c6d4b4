#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "relay/ports.h"

namespace outbox {

// The database half of a batch — read pending rows, stop before the first poison row, assign
// versions to the rows before it — run on a thread of its own, so that the next batch's
// database work overlaps with publishing and marking the previous one. One batch at a time.
//
// `store` is used only by the assigner's thread (a connection of its own); `publisher` only for
// poisonReason(), which must be thread-safe. Both must outlive the Assigner.
class Assigner {
 public:
  struct Batch {
    Status status;
    std::vector<OutboxRow> rows;  // assigned, in version order
    size_t read = 0;              // pending rows read (rows.size() plus the poison row and after)
    std::optional<std::pair<uint64_t, std::string>> poison;  // (row id, reason)
  };

  Assigner(OutboxStore& store, Publisher& publisher);
  ~Assigner();
  Assigner(const Assigner&) = delete;
  Assigner& operator=(const Assigner&) = delete;

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

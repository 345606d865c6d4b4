#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/stop_token.h"
#include "nats/jetstream.h"
#include "snapshot/document.h"

namespace outbox {

// The reference consumer: bootstraps from a snapshot, verifies it, follows the stream from
// stream.seq + 1, applies upserts and deletes idempotently (versions already applied are
// skipped), re-bootstraps on a version gap or a new epoch, keeps the checksum current from the
// deltas and compares it with ?summary=true when the watermarks meet. Single-threaded.
class Replica {
 public:
  struct Options {
    std::string baseUrl;   // e.g. http://127.0.0.1:8080
    std::string source;
    NatsConfig nats;  // url, login and TLS; jsDomain (the others are the bridge's, unused here)
    std::chrono::milliseconds verifyInterval{1000};
    int mismatchesBeforeRebootstrap = 3;  // a summary may already reflect unpublished changes
    std::function<void(const std::string&)> report;  // one line per state change
  };
  struct Counters {
    uint64_t bootstraps = 0;
    uint64_t rejectedSnapshots = 0;
    uint64_t gaps = 0;
    uint64_t epochChanges = 0;
    uint64_t applied = 0;
    uint64_t skippedDuplicates = 0;
    uint64_t verifications = 0;
    uint64_t mismatches = 0;
  };

  explicit Replica(Options options);
  ~Replica();

  // Fetches, checks and installs a snapshot and subscribes after it.
  Status bootstrap();
  // Applies what arrives within `wait`; re-bootstraps when needed; verifies when caught up.
  Status step(std::chrono::milliseconds wait);
  // bootstrap() then step() until stop, retrying failures with backoff.
  void run(StopSignal& stop);

  uint64_t epoch() const { return epoch_; }
  uint64_t appliedVersion() const { return applied_; }
  uint64_t checksum() const { return sum_; }
  size_t size() const { return records_.size(); }
  uint64_t lastVerifiedVersion() const { return lastVerified_; }
  const Counters& counters() const { return counters_; }
  const std::map<std::string, RecordValues>& records() const { return records_; }
  const std::vector<std::string>& columns() const { return columns_; }
  // The replica as a snapshot-shaped JSON document, records in key order.
  std::string dumpJson() const;

 private:
  Result<std::string> fetch(bool summary);
  Status applyMessage(const nats::StoredMessage& m, bool& needBootstrap);
  Status verify(bool& needBootstrap);
  Result<RecordValues> valuesOf(std::string_view payload);
  void say(const std::string& line);

  Options options_;
  std::unique_ptr<nats::Connection> nats_;
  std::unique_ptr<nats::JetStream> js_;
  std::unique_ptr<nats::Subscription> sub_;
  std::string streamName_;
  std::string key_;
  std::vector<std::string> columns_;
  std::vector<bool> numeric_;
  std::map<std::string, RecordValues> records_;
  uint64_t epoch_ = 0;
  uint64_t applied_ = 0;
  uint64_t sum_ = 0;
  uint64_t lastVerified_ = 0;
  uint64_t mismatchVersion_ = 0;
  int mismatchCount_ = 0;
  std::chrono::steady_clock::time_point lastVerifyAttempt_{};
  std::chrono::steady_clock::time_point lastProgressReport_{};
  uint64_t reportedVersion_ = 0;
  Counters counters_;
};

}  // namespace outbox

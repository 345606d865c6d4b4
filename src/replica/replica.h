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
#include "replica/store.h"
#include "replica/verifier.h"
#include "snapshot/document.h"

namespace outbox {

// The reference consumer: bootstraps from a snapshot, verifies it, follows the stream from
// stream.seq + 1, applies upserts and deletes idempotently (versions already applied are
// skipped), re-bootstraps on a version gap, a new epoch or a stream that can no longer give what
// comes next, keeps the checksum current from the deltas and compares it with ?summary=true every
// few minutes, at the summary's watermark (verifier.h). Single-threaded.
class Replica {
 public:
  struct Options {
    std::string baseUrl;   // e.g. http://127.0.0.1:8080
    std::string source;
    NatsConfig nats;  // url, login and TLS; jsDomain (the others are the bridge's, unused here)
    std::chrono::milliseconds verifyInterval{300'000};  // ±20%; 0: never
    size_t verifyHistory = 500;  // versions whose checksum is kept to compare a summary at
    int mismatchesBeforeRebootstrap = 3;  // distinct reads in a row: a summary may reflect unpublished changes
    std::function<void(const std::string&)> report;  // one line per state change
    // Where the replica and its inbox row are kept between runs (nullptr: in memory only, a new
    // process bootstraps); each change is applied there before it is in memory.
    std::shared_ptr<ReplicaStore> store;
  };
  struct Counters {
    uint64_t bootstraps = 0;
    uint64_t rejectedSnapshots = 0;
    uint64_t gaps = 0;
    uint64_t epochChanges = 0;
    uint64_t lostStreams = 0;  // the stream missing, or no longer holding what the replica follows
    uint64_t applied = 0;
    uint64_t skippedDuplicates = 0;
    uint64_t verifications = 0;
    uint64_t mismatches = 0;
  };

  explicit Replica(Options options);
  ~Replica();

  // Fetches, checks and installs a snapshot and subscribes after it (an error when the stream it
  // names cannot give its next sequence: step() follows it again, or bootstraps again).
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
  // Why a stream cannot give the sequence a replica needs next; `missing`: it does not exist.
  struct StreamProblem {
    bool missing = false;
    std::string why;
  };
  // A snapshot named a stream that did not exist: followed again with backoff, and the source
  // asked every kStall whether it names another (a snapshot per retry reads the table each time).
  struct Awaiting {
    std::string stream;
    std::chrono::steady_clock::time_point since;
  };
  static constexpr std::chrono::seconds kStall{30};

  Status connectNats();
  // replica_inbox.cpp: the replica as its store kept it, followed from its stream_seq + 1 (a
  // bootstrap when the store holds nothing).
  Status resume();
  InboxRow inboxRow() const;
  // What is in memory may not be what the store holds (a write failed, or another consumer moved
  // the row): read it again at the next step.
  Status forget(Status why);
  // replica_stream.cpp: docs/consumers.md section 3, "The stream itself".
  static std::optional<StreamProblem> problemOf(const std::optional<nats::StreamState>& found,
                                                const std::string& stream, uint64_t fromSeq);
  Result<std::optional<StreamProblem>> streamProblem(const std::string& stream, uint64_t fromSeq);
  Result<std::optional<StreamProblem>> follow();
  Status streamLost(const StreamProblem& problem);
  // GET of the snapshot, or with `summary` of ?summary=true: the body, and the summary's headers.
  struct Fetched {
    std::string body;
    std::string readAt;    // Outbox-Summary-Read-At
    std::string freshFor;  // Outbox-Summary-Fresh-For
  };
  Result<Fetched> fetch(bool summary);
  // replica_verify.cpp: docs/consumers.md section 4.
  Result<ServedSummary> fetchSummary();
  Status applyMessage(const nats::StoredMessage& m, bool& needBootstrap);
  Status verify(bool idle, bool& needBootstrap);
  // What the verifier said, in lines and counters; needBootstrap when the replica is wrong.
  void judged(const Verifier::Verdict& verdict, bool& needBootstrap);
  // Every kStall while nothing arrives: whether the stream can still give what comes next.
  Status watch(std::chrono::steady_clock::time_point now, bool& needBootstrap);
  VersionState state() const { return {applied_, sum_, records_.size()}; }
  Result<RecordValues> valuesOf(std::string_view payload);
  void say(const std::string& line);

  Options options_;
  std::unique_ptr<nats::Connection> nats_;
  std::unique_ptr<nats::JetStream> js_;
  std::unique_ptr<nats::Subscription> sub_;
  bool installed_ = false;  // a snapshot is installed: what follows comes from streamName_
  bool loaded_ = false;     // the store was read since the replica last forgot what it held
  uint64_t generation_ = 0;  // of the store's row
  std::string streamName_;
  uint64_t streamSeq_ = 0;  // of the last message taken from it (the snapshot's stream.seq before)
  std::optional<Awaiting> awaiting_;
  std::string key_;
  std::vector<std::string> columns_;
  std::vector<bool> numeric_;
  std::map<std::string, RecordValues> records_;
  uint64_t epoch_ = 0;
  uint64_t applied_ = 0;
  uint64_t sum_ = 0;
  uint64_t lastVerified_ = 0;
  Verifier verifier_;
  std::chrono::steady_clock::time_point lastWatch_{};
  std::chrono::steady_clock::time_point lastProgressReport_{};
  uint64_t reportedVersion_ = 0;
  Counters counters_;
};

}  // namespace outbox

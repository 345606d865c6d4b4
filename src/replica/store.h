#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "snapshot/document.h"

namespace outbox {

// Where a replica keeps what it has applied between runs (docs/consumers.md section 5): the
// source's one inbox row, changed in the same transaction as the change it records, so that a
// consumer killed at any moment applies no version twice and skips none.
struct InboxRow {
  uint64_t epoch = 0;
  uint64_t appliedVersion = 0;
  std::string streamName;
  uint64_t streamSeq = 0;  // of appliedVersion's message: resume from streamSeq + 1
  std::string key;         // the snapshot's key field
  std::vector<std::string> columns;  // in the snapshot's order (empty until known)
  std::vector<bool> numeric;         // per column: written as a JSON number
  uint64_t sum = 0;                  // the checksum: the records' hashes summed mod 2^64
  uint64_t recordCount = 0;
  uint64_t generation = 0;  // bootstraps of the source in the store: one meanwhile moves the row
};

using ReplicaRecords = std::map<std::string, RecordValues>;

class ReplicaStore {
 public:
  virtual ~ReplicaStore() = default;
  // The source's inbox row and its records; nullopt when nothing was bootstrapped yet.
  virtual Result<std::optional<InboxRow>> load(ReplicaRecords& records) = 0;
  // Replaces what the store holds of the source with a snapshot's records and `row`, at once;
  // returns the row as stored (its generation).
  virtual Result<InboxRow> replace(const InboxRow& row, const ReplicaRecords& records) = 0;
  // Applies one change (`values` nullopt: a delete of `key`) and moves the row from `from` to
  // `to`, at once; false, having changed nothing, when the stored row is no longer `from`
  // (another consumer of the source moved it).
  virtual Result<bool> apply(const InboxRow& from, const InboxRow& to, const std::string& key,
                             const std::optional<RecordValues>& values) = 0;
};

// A record as a JSON object in `columns` order (numbers as their literal, NULL as null): how
// --dump writes records.
std::string recordJson(const std::vector<std::string>& columns, const std::vector<bool>& numeric,
                       const RecordValues& values);

}  // namespace outbox

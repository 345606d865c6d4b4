// The replica and its store (docs/consumers.md section 5): resuming from the inbox row and the
// records it kept, and forgetting what is in memory when it may differ from them.
#include <chrono>

#include <fmt/format.h>

#include "common/json.h"
#include "replica/replica.h"
#include "snapshot/checksum.h"

namespace outbox {

std::string recordJson(const std::vector<std::string>& columns, const std::vector<bool>& numeric,
                       const RecordValues& values) {
  std::string out = "{";
  for (size_t i = 0; i < columns.size() && i < values.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.push_back('"');
    appendJsonEscaped(out, columns[i]);
    out += "\":";
    if (!values[i]) {
      out += "null";
    } else if (numeric[i]) {
      out += *values[i];
    } else {
      out.push_back('"');
      appendJsonEscaped(out, *values[i]);
      out.push_back('"');
    }
  }
  out.push_back('}');
  return out;
}

InboxRow Replica::inboxRow() const {
  return InboxRow{epoch_,   applied_, streamName_, streamSeq_,      key_,
                  columns_, numeric_, sum_,        records_.size(), generation_};
}

Status Replica::forget(Status why) {
  sub_.reset();
  installed_ = false;
  loaded_ = false;
  return why;
}

Status Replica::resume() {
  sub_.reset();
  ReplicaRecords records;
  auto loaded = options_.store->load(records);
  if (!loaded.isOk()) return loaded.status();
  loaded_ = true;
  if (!*loaded) return bootstrap();
  InboxRow& row = **loaded;
  // What the row says of the records against the records: a store changed by hand (or a bug)
  // would otherwise be followed, and found only at the next verification.
  uint64_t sum = 0;
  for (const auto& [key, values] : records) sum += recordHash(values);
  if (sum != row.sum || records.size() != row.recordCount) {
    say(fmt::format("the inbox's records ({}, checksum {}) are not what its row says ({}, checksum {}): "
                    "re-bootstrapping",
                    records.size(), formatChecksum(sum), row.recordCount, formatChecksum(row.sum)));
    return bootstrap();
  }
  records_ = std::move(records);
  installed_ = true;
  streamName_ = row.streamName;
  streamSeq_ = row.streamSeq;
  key_ = row.key;
  columns_ = row.columns;
  numeric_ = row.numeric;
  epoch_ = row.epoch;
  applied_ = row.appliedVersion;
  sum_ = row.sum;
  generation_ = row.generation;
  lastVerified_ = 0;  // not by this process: its history starts here
  verifier_.reset(state(), std::chrono::steady_clock::now());
  say(fmt::format("resumed from the inbox: epoch {}, version {}, {} records, checksum {}", epoch_, applied_,
                  records_.size(), formatChecksum(sum_)));
  auto problem = follow();
  if (!problem.isOk()) return problem.status();
  if (*problem) return streamLost(**problem);
  return Status::ok();
}

}  // namespace outbox

#pragma once

#include <optional>
#include <string>

#include "nats/jetstream.h"
#include "settle/settle_recovery.h"

namespace outbox {

// A stream read by direct gets, for recovery's searches (settle_recovery.h). `js` must outlive it.
class JetStreamReader final : public MessageReader {
 public:
  JetStreamReader(nats::JetStream& js, std::string stream) : js_(js), stream_(std::move(stream)) {}
  // A stream that does not exist is an error here (transient, as JetStream::streamState says).
  Result<Bounds> bounds() override;
  Result<std::optional<nats::StoredMessage>> at(uint64_t seq) override {
    return js_.getMessage(stream_, seq);
  }
  // One direct get (next_by_subj), whatever lies deleted before it; on a stream without direct
  // gets, the walk (a run of deleted messages longer than kMaxDeletedWalk stops it).
  Result<std::optional<nats::StoredMessage>> firstFrom(uint64_t seq, uint64_t end) override;
  // The message at the last sequence; when that one is deleted (a purge of one subject took the
  // tail), the last of each of the stream's subjects (one get each), the highest of them; when a
  // subject answers none, the walk (MessageReader::last).
  Result<std::optional<nats::StoredMessage>> last() override;

 private:
  nats::JetStream& js_;
  std::string stream_;
  std::optional<bool> direct_;  // whether the stream answers direct gets (known from bounds())
};

}  // namespace outbox

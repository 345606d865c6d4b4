#pragma once

#include <memory>
#include <vector>

#include "config/config.h"
#include "config/subject_template.h"
#include "nats/jetstream.h"
#include "relay/ports.h"

namespace outbox {

// The message a row becomes: subject, body and the headers of docs/consumers.md section 1. A row
// checked by findPoison brings its subject and moreHeaders; others have them worked out here.
nats::OutgoingMessage toMessage(const SourceConfig& source, const SubjectTemplate& subject, const OutboxRow& row,
                                uint64_t epoch, uint64_t expectedLastSeq, bool fenceOnPreviousVersion);

// The headers the bridge sets on the message of `row` numbered `version` (those of the `headers`
// column come on top).
std::vector<std::pair<const char*, std::string>> bridgeHeaders(const SourceConfig& source, const OutboxRow& row,
                                                               uint64_t version, uint64_t epoch,
                                                               uint64_t expectedLastSeq, bool fenceOnPreviousVersion);

// Makes or checks a stream of `source` (its main stream, or its settled stream): created with
// the source's duplicate_window, replicas and max_age when missing; one whose subjects are not
// `subject` is refused (permanent); one with other replicas is left as it is, with a warning the
// first time (`warnedReplicas`).
Status ensureSourceStream(nats::JetStream& js, const SourceConfig& source, const std::string& name,
                          const std::string& subject, bool& warnedReplicas);

// Publisher over a shared nats::Connection (which must outlive it), with its own JetStream
// context. Single-threaded apart from the ack queue inside nats::JetStream.
class JetStreamPublisher final : public Publisher {
 public:
  JetStreamPublisher(const SourceConfig& source, const NatsConfig& nats, nats::Connection& connection);

  Status prepare() override;
  Result<StreamTip> tip() override;
  Status publish(const OutboxRow& row, uint64_t epoch, uint64_t expectedLastSeq,
                 bool fenceOnPreviousVersion) override;
  void takeAcks(std::vector<VersionAck>& out) override;
  void waitForAcks(std::chrono::milliseconds timeout) override;
  void abandon() override;
  std::optional<std::string> poisonReason(OutboxRow& row) override;

 private:
  // A duplicate ack counts only if the stream still holds this Msg-Id at the acked sequence.
  void checkDuplicate(const std::string& msgId, VersionAck& ack);

  const SourceConfig& source_;
  SubjectTemplate subject_;
  const NatsConfig& nats_;
  nats::Connection& connection_;
  std::unique_ptr<nats::JetStream> js_;
  std::vector<nats::AckEvent> scratch_;
  bool warnedReplicas_ = false;  // a stream with other replicas than configured: said once
  bool warnedLatest_ = false;    // a latest stream set up otherwise: said once
  bool warnedLag_ = false;       // the latest stream behind: said once until it has caught up
};

}  // namespace outbox

// The replica and its stream: connecting, following from the sequence after the last one taken,
// and the check that the stream can still give it (docs/consumers.md section 3, "The stream
// itself"), which clients/typescript/src/subscription.ts makes too.
#include <fmt/format.h>

#include "replica/replica.h"
#include "snapshot/document.h"

namespace outbox {

Status Replica::connectNats() {
  if (nats_) return Status::ok();
  auto nc = nats::Connection::connect(options_.nats, "outbox-replica");
  if (!nc.isOk()) return nc.status();
  auto js = nats::JetStream::create(**nc, std::chrono::milliseconds(5000), 16, options_.nats.jsDomain);
  if (!js.isOk()) return js.status();
  nats_ = std::move(nc).value();
  js_ = std::move(js).value();
  return Status::ok();
}

// Whether `stream`, as `found` (nullopt: missing), can give sequence `fromSeq` and what follows,
// which a replica that took everything through fromSeq - 1 expects. It cannot when it is missing
// (deleted, or the source's stream renamed), when it begins after fromSeq (purged or expired: the
// messages from fromSeq on are gone, whether or not later ones come), or when it ends before
// fromSeq - 1 (recreated, or its tail lost: the sequences the replica followed are not this
// stream's). nats.c's ordered consumer sees none of these: it recreates itself on the missing or
// shorter stream for ever, and no message comes to show a gap.
std::optional<Replica::StreamProblem> Replica::problemOf(const std::optional<nats::StreamState>& found,
                                                         const std::string& stream, uint64_t fromSeq) {
  if (!found) return StreamProblem{true, fmt::format("stream {} does not exist (deleted, or renamed)", stream)};
  if (found->firstSeq > fromSeq) {
    return StreamProblem{false, fmt::format("stream {} begins at sequence {}: sequence {} was purged or expired",
                                            stream, found->firstSeq, fromSeq)};
  }
  if (found->lastSeq + 1 < fromSeq) {
    return StreamProblem{false, fmt::format("stream {} ends at sequence {}, before sequence {} that the replica "
                                            "followed: it was recreated",
                                            stream, found->lastSeq, fromSeq - 1)};
  }
  return std::nullopt;
}

Result<std::optional<Replica::StreamProblem>> Replica::streamProblem(const std::string& stream, uint64_t fromSeq) {
  OUTBOX_RETURN_IF_ERROR(connectNats());
  auto found = js_->findStream(stream);
  if (!found.isOk()) return found.status();
  return problemOf(*found, stream, fromSeq);
}

// Follows streamName_ from streamSeq_ + 1, or says why that stream cannot give it.
Result<std::optional<Replica::StreamProblem>> Replica::follow() {
  sub_.reset();
  OUTBOX_RETURN_IF_ERROR(connectNats());
  auto found = js_->findStream(streamName_);
  if (!found.isOk()) return found.status();
  if (auto problem = problemOf(*found, streamName_, streamSeq_ + 1)) return problem;
  if ((*found)->subjects.empty()) return Status::transient("stream " + streamName_ + " has no subjects");
  auto sub = js_->subscribe(streamName_, (*found)->subjects.front(), streamSeq_ + 1);
  if (!sub.isOk()) return sub.status();
  sub_ = std::move(sub).value();
  awaiting_.reset();
  return std::optional<StreamProblem>();
}

// The stream followed cannot give what comes next: a reason to bootstrap, as a gap is. When the
// snapshot itself named that stream and it is missing, the bridge creates it at its next
// publish: wait for it, and ask the source every kStall whether it names another.
Status Replica::streamLost(const StreamProblem& problem) {
  std::string why = problem.why;
  auto now = std::chrono::steady_clock::now();
  if (problem.missing && awaiting_ && awaiting_->stream == streamName_) {
    if (now - awaiting_->since < kStall) return Status::transient(why + ": waiting for the bridge to create it");
    auto summary = fetchSummary();
    if (!summary.isOk()) return summary.status();
    const SnapshotHeader& h = summary->header;
    if (h.streamName == streamName_ && h.epoch <= epoch_) {
      awaiting_->since = now;
      return Status::transient(why + ", and the source still names it: waiting for the bridge to create it");
    }
    if (h.streamName != streamName_) why += "; the source now publishes to stream " + h.streamName;
  }
  counters_.lostStreams++;
  say(why + ": re-bootstrapping");
  return bootstrap();
}

}  // namespace outbox

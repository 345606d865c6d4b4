// The relay's acks: what the stream acknowledged becomes published_through (contiguous versions
// only, AckTracker), a publish unanswered past ack_timeout ends the session, and settle() keeps
// what was stored when a session ends.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "relay/relay.h"

namespace outbox {

namespace {

int64_t wallMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Status Relay::checkAckDeadline() {
  // The deadline is per publish: acks of later versions do not excuse a lost one.
  if (inFlight_.empty() || clock_.now() - inFlight_.front().sentAt <= options_.ackTimeout) return Status::ok();
  metrics_.errorsPublish++;
  return Status::transient(fmt::format("the stream has not acknowledged version {} within {} ms ({} publishes in "
                                       "flight); reconciling",
                                       inFlight_.front().version, options_.ackTimeout.count(), inFlight_.size()));
}

std::string Relay::applyAcks() {
  acks_.clear();
  publisher_.takeAcks(acks_);
  std::string failure;
  for (const auto& ack : acks_) {
    if (ack.version <= tracker_.contiguousVersion() || ack.version >= nextVersion_) continue;
    if (ack.ok) {
      tracker_.ack(ack.version, ack.seq);
      continue;
    }
    failed_.insert(ack.version);
    if (failure.empty()) {
      (ack.fenced ? metrics_.errorsFenced : metrics_.errorsPublish)++;
      failure = fmt::format("publish of version {} failed ({}){}", ack.version, ack.error,
                            ack.fenced ? ": another writer, or the stream changed; reconciling" : "");
    }
  }
  return failure;
}

void Relay::retireAcknowledged() {
  if (inFlight_.empty() || inFlight_.front().version > tracker_.contiguousVersion()) return;
  const int64_t now = wallMicros();
  uint64_t published = 0;
  while (!inFlight_.empty() && inFlight_.front().version <= tracker_.contiguousVersion()) {
    metrics_.observeLatency(static_cast<double>(std::max<int64_t>(0, now - inFlight_.front().createdAtMicros)) / 1e6);
    inFlight_.pop_front();
    ++published;
  }
  metrics_.publishedRows += published;
  progressed_ = true;
}

std::string Relay::takeAcks() {
  std::string failure = applyAcks();
  retireAcknowledged();
  return failure;
}

Status Relay::processAcks() {
  std::string failure = takeAcks();
  OUTBOX_RETURN_IF_ERROR(mark(!failure.empty()));
  if (!failure.empty()) return Status::transient(failure);
  return Status::ok();
}

Status Relay::mark(bool force) {
  uint64_t version = tracker_.contiguousVersion();
  if (version <= state_.publishedThrough) return Status::ok();
  auto now = clock_.now();
  bool due = force || inFlight_.empty() || now - lastMark_ >= options_.markInterval ||
             version - state_.publishedThrough >= static_cast<uint64_t>(source_.batchSize);
  if (!due) return Status::ok();
  Status s = store_.markPublished(version, tracker_.contiguousSeq());
  if (!s.isOk()) {
    metrics_.errorsDatabase++;
    return s;
  }
  state_.publishedThrough = version;
  state_.publishedStreamSeq = tracker_.contiguousSeq();
  metrics_.publishedVersion = version;
  lastMark_ = now;
  return Status::ok();
}

void Relay::settle(std::chrono::milliseconds limit) {
  if (!ackStateValid_) return dropAckState();
  const auto deadline = clock_.now() + limit;
  // Until every publish in flight is answered: a failed one is never acked, so waiting for it to
  // be would hold the next session back by the whole limit.
  while (inFlight_.size() > tracker_.waiting() + failed_.size() && clock_.now() < deadline) {
    publisher_.waitForAcks(std::chrono::milliseconds(20));
    takeAcks();  // no mark until the end: with the database away, each would wait for a connect
  }
  if (Status s = mark(/*force=*/true); !s.isOk()) log_->warn("marking what the stream acknowledged failed: {}", s.message());
  dropAckState();
}

void Relay::dropAckState() {
  ackStateValid_ = false;
  inFlight_.clear();
  failed_.clear();
}

}  // namespace outbox

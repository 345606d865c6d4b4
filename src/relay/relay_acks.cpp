// The relay's acks: what the stream acknowledged (AckWindow) becomes published_through, a publish
// unanswered past ack_timeout ends the session, and settle() keeps what was stored when a session
// ends.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "common/deadline.h"
#include "relay/relay.h"

namespace outbox {

namespace {

int64_t wallMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Status Relay::checkAckDeadline() {
  auto overdue = window_.overdue(clock_.now(), options_.ackTimeout);
  if (!overdue) return Status::ok();
  metrics_.errorsPublish++;
  return Status::transient(fmt::format("the stream has not acknowledged version {} within {} ms ({} publishes in "
                                       "flight); reconciling",
                                       overdue->version, options_.ackTimeout.count(), window_.inFlight()));
}

Status Relay::takeAcks() {
  Status failed = count(window_.take(publisher_));
  if (options_.settleFeed != nullptr) feedAcked();
  OUTBOX_RETURN_IF_ERROR(mark(/*force=*/!failed.isOk()));
  return failed;
}

void Relay::feedAcked() {
  const uint64_t through = window_.contiguousVersion();
  if (sentRows_.empty() || sentRows_.front().version > through) return;
  while (!sentRows_.empty() && sentRows_.front().version <= through) {
    feeding_.push_back(SettleFeed::Row{std::move(sentRows_.front()), state_.epoch, {}});  // stamped by hand()
    sentRows_.pop_front();
  }
  options_.settleFeed->hand(std::move(feeding_));
  feeding_.clear();
}

Status Relay::count(const AckWindow::Taken& taken) {
  if (!taken.published.empty()) {
    const int64_t now = wallMicros();
    for (const AckWindow::Sent& sent : taken.published) {
      metrics_.observeLatency(static_cast<double>(std::max<int64_t>(0, now - sent.createdAtMicros)) / 1e6);
    }
    metrics_.publishedRows += taken.published.size();
    ackedThisSession_ = true;
  }
  if (!taken.failure) return Status::ok();
  const VersionAck& ack = *taken.failure;
  (ack.fenced ? metrics_.errorsFenced : metrics_.errorsPublish)++;
  return Status::transient(fmt::format("publish of version {} failed ({}){}", ack.version, ack.error,
                                       ack.fenced ? ": another writer, or the stream changed; reconciling" : ""));
}

Status Relay::mark(bool force) {
  const uint64_t version = window_.contiguousVersion();
  if (version <= state_.publishedThrough) {
    unmarkedSince_.reset();
    return Status::ok();
  }
  const auto now = clock_.now();
  if (!unmarkedSince_) unmarkedSince_ = now;
  if (!force && now - *unmarkedSince_ < options_.markInterval) {
    if (version > offeredMark_) store_.offerMark(PublishedMark{version, window_.contiguousSeq()});
    offeredMark_ = version;
    return Status::ok();
  }
  Status s = store_.markPublished(version, window_.contiguousSeq());
  if (!s.isOk()) {
    metrics_.errorsDatabase++;
    return s;
  }
  marked(PublishedMark{version, window_.contiguousSeq()});
  return Status::ok();
}

PublishedMark Relay::unmarked() const {
  if (!window_.isOpen() || window_.contiguousVersion() <= state_.publishedThrough) return {};
  return PublishedMark{window_.contiguousVersion(), window_.contiguousSeq()};
}

void Relay::marked(const PublishedMark& mark) {
  if (mark.version <= state_.publishedThrough) return;
  state_.publishedThrough = mark.version;
  state_.publishedStreamSeq = mark.seq;
  metrics_.publishedVersion = mark.version;
  // Acks taken since the batch started are still to mark: they keep the time the first unmarked
  // ack was taken (written a little early, never late).
  if (window_.contiguousVersion() <= mark.version) unmarkedSince_.reset();
}

void Relay::settle(std::chrono::milliseconds limit) {
  if (!window_.isOpen()) return window_.close();
  const auto deadline = deadlineAfter(clock_.now(), limit);
  while (!window_.allAnswered() && clock_.now() < deadline) {
    publisher_.waitForAcks(std::chrono::milliseconds(20));
    // No mark until the end: with the database away, each would wait for a connect.
    (void)count(window_.take(publisher_));
  }
  if (Status s = mark(/*force=*/true); !s.isOk()) {
    log_->warn("marking what the stream acknowledged failed: {}", s.message());
  }
  window_.close();
}

}  // namespace outbox

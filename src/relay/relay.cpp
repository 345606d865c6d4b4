#include "relay/relay.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/backoff.h"
#include "common/log.h"

namespace outbox {

Relay::Relay(const SourceConfig& source, OutboxStore& store, OutboxStore& assignStore, Publisher& publisher,
             LeaderLease* lease, StopSignal& stop, SourceMetrics& metrics, const Clock& clock, Options options)
    : source_(source),
      log_(sourceLogger(source.name)),
      store_(store),
      assignStore_(assignStore),
      publisher_(publisher),
      lease_(lease),
      stop_(stop),
      metrics_(metrics),
      clock_(clock),
      options_(options),
      scanner_(options.readStore != nullptr ? *options.readStore : assignStore, clock, log_),
      readAhead_(options.readStore != nullptr ? std::make_unique<Prefetcher<ScannedBatch>>() : nullptr),
      pacer_(source.pollInterval),
      progress_(log_) {
  options_.maxInFlight = std::max(options_.maxInFlight, source_.batchSize);
}

void Relay::run() {
  Backoff backoff(std::chrono::milliseconds(100), std::chrono::milliseconds(10'000));
  std::string lastProblem;
  while (!stop_.stopped()) {
    ackedThisSession_ = false;
    if (!awaitLeadership()) break;
    SessionEnd end = Status::ok();
    try { end = session(); } catch (const std::exception& e) { end = internalError(e); }  // as catchingWork
    metrics_.running = false;
    if (options_.settleFeed != nullptr) {
      // The rows still in flight are in the main stream or not: the next session's settle
      // recovery reads what it holds.
      options_.settleFeed->end();
      sentRows_.clear();
    }
    settle(stop_.stopped() ? std::min(options_.ackTimeout, std::chrono::milliseconds(2000)) : options_.ackTimeout);
    publisher_.abandon();
    if (stop_.stopped()) break;
    if (const auto* handOver = std::get_if<HandOver>(&end)) {
      // What was in flight is settled: give the lease up, staying a candidate.
      log_->info("handing the source over to {}, which leads fewer sources", handOver->to);
      lease_->handOver();
      standBy();
      backoff.reset();
      lastProblem.clear();
      continue;
    }
    const Status& s = std::get<Status>(end);
    if (ackedThisSession_) backoff.reset();
    if (s.isPermanent() && state_.paused) {
      if (s.message() != lastProblem) log_->info("{}", s.message());
      lastProblem = s.message();
      clock_.waitFor(stop_, options_.haltRecheck);
      continue;
    }
    if (s.isPermanent()) {
      metrics_.halted = true;
      if (s.message() != lastProblem) log_->error("halted: {}", s.message());
      lastProblem = s.message();
      clock_.waitFor(stop_, options_.haltRecheck);
      continue;
    }
    auto delay = backoff.next();
    if (s.message() != lastProblem || backoff.attempts() <= 1) {
      // A batch's read that no longer held (an operator's quarantine ahead of the scan) is no fault.
      log_->log(s.cause() == Cause::kScanAgain ? spdlog::level::info : spdlog::level::warn, "{}; retrying in {} ms",
                s.message(), delay.count());
    }
    lastProblem = s.message();
    clock_.waitFor(stop_, delay);
  }
  if (lease_ != nullptr) {
    lease_->release();  // a standby need not wait out the TTL
    standBy();
  }
  log_->info("relay stopped at published version {}", window_.contiguousVersion());
}

void Relay::standBy() {
  // What only the leader knows is the new leader's to say: a standby reporting its last values
  // would keep an alert on a source that another bridge has since resumed (max by source).
  metrics_.leader = false;
  leaderSaidFor_ = 0;
  metrics_.halted = metrics_.paused = false;
  metrics_.openHoles = 0;
  metrics_.oldestOpenHoleMillis = 0;
  metrics_.openHoleRanges = 0;
}

bool Relay::awaitLeadership() {
  if (lease_ == nullptr) return !stop_.stopped();
  std::string reported;
  while (!stop_.stopped()) {
    Status s = lease_->refreshNow();
    if (s.isOk() && lease_->isLeader() && !lease_->lighter().empty()) {
      // Leading between sessions (a paused or halted source): nothing in flight to settle.
      log_->info("handing the source over to {}, which leads fewer sources", lease_->lighter());
      lease_->handOver();
      standBy();
    }
    if (s.isOk() && lease_->isLeader()) {
      metrics_.leader = true;
      if (leaderSaidFor_ != lease_->leaseEpoch()) log_->info("leader (lease epoch {})", lease_->leaseEpoch());
      leaderSaidFor_ = lease_->leaseEpoch();
      return true;
    }
    standBy();
    std::string now = !s.isOk()                          ? s.message()
                      : !lease_->lighter().empty() && lease_->currentHolder().empty()
                          ? "standby: leaving the free lease to " + lease_->lighter() + ", which leads fewer sources"
                      : lease_->currentHolder().empty() ? "standby: the lease is free"
                                                        : "standby: the lease is held by " + lease_->currentHolder();
    if (now != reported) log_->info("{}", now);
    reported = now;
    clock_.waitFor(stop_, lease_->standbyWait());
  }
  return false;
}

Status Relay::checkLeadership() {
  if (lease_ == nullptr) return Status::ok();
  Status s = lease_->refreshIfDue();
  if (!s.isOk()) log_->warn("lease renewal failed: {}", s.message());
  if (!lease_->isLeader() || lease_->leaseEpoch() != sessionLeaseEpoch_) {
    standBy();
    return Status::transient(fmt::format("lost the lease (now held by {}): standing by", lease_->currentHolder()));
  }
  return Status::ok();
}

Relay::SessionEnd Relay::session() {
  OUTBOX_RETURN_IF_ERROR(beginSession());
  while (!stop_.stopped()) {
    OUTBOX_RETURN_IF_ERROR(checkLeadership());
    if (lease_ != nullptr && !lease_->lighter().empty()) return HandOver{lease_->lighter()};
    OUTBOX_RETURN_IF_ERROR(takeAcks());
    OUTBOX_RETURN_IF_ERROR(checkAckDeadline());
    progress_.tick(clock_.now(), metrics_.publishedRows.load(), state_.publishedThrough, state_.publishedStreamSeq);
    if (prefetcher_.busy()) {
      // Wait briefly for the batch being prepared, without letting acks pile up.
      auto ready = prefetcher_.take(std::chrono::milliseconds(window_.inFlight() == 0 ? 50 : 1));
      if (ready) OUTBOX_RETURN_IF_ERROR(onBatch(*ready));
    } else if (options_.wakeup != nullptr && options_.wakeup->rings().total() != answeredRings_.total() &&
               !pacer_.due(clock_.now())) {
      pacer_.rung(clock_.now());
    } else if (pacer_.due(clock_.now()) && roomFor(static_cast<size_t>(source_.batchSize))) {
      OUTBOX_RETURN_IF_ERROR(poll());
    } else {
      waitForWork();
    }
  }
  return Status::ok();
}

Status Relay::beginSession() {
  prefetcher_.drain();  // a batch from the last session keeps its versions: it is in the tail now
  // A batch read ahead is dropped unassigned: the first batch scans again (scanFromState_). Its caller,
  // the prefetch thread, is idle now.
  if (readAhead_) readAhead_->drain();
  guard_ = WriteGuard{};
  if (lease_ != nullptr) {
    sessionLeaseEpoch_ = lease_->leaseEpoch();
    guard_.lease = LeaseGuard{lease_->holder(), sessionLeaseEpoch_};
  }
  store_.setWriteGuard(guard_);
  assignStore_.setWriteGuard(guard_);
  if (options_.readStore != nullptr) options_.readStore->setWriteGuard(guard_);
  OUTBOX_RETURN_IF_ERROR(store_.connect());
  OUTBOX_RETURN_IF_ERROR(assignStore_.connect());
  if (options_.readStore != nullptr) OUTBOX_RETURN_IF_ERROR(options_.readStore->connect());
  OUTBOX_RETURN_IF_ERROR(publisher_.prepare());
  OUTBOX_RETURN_IF_ERROR(reconcile());
  scanFromState_ = true;  // the first batch rebuilds the scan: the assigned tail need not wait for it
  metrics_.running = true;
  unmarkedSince_.reset();
  offeredMark_ = 0;
  pacer_.begin(clock_.now());
  if (options_.settleFeed != nullptr) {
    sentRows_.clear();
    options_.settleFeed->begin();
  }
  return Status::ok();
}

void Relay::waitForWork() {
  // A quiet source that a doorbell or idle check watches may wait long for its next poll: the
  // lease is renewed on time all the same.
  auto wakeAt = lease_ != nullptr ? std::min(pacer_.next(), lease_->nextRefresh()) : pacer_.next();
  if (unmarkedSince_) wakeAt = std::min(wakeAt, *unmarkedSince_ + options_.markInterval);
  const auto untilPoll = std::chrono::ceil<std::chrono::milliseconds>(wakeAt - clock_.now());
  if (window_.inFlight() == 0) {
    const auto wait = std::max(untilPoll, std::chrono::milliseconds(0));
    if (options_.wakeup != nullptr) {
      clock_.waitFor(stop_, wait, *options_.wakeup, answeredRings_);
    } else {
      clock_.waitFor(stop_, wait);
    }
    return;
  }
  auto wait = roomFor(static_cast<size_t>(source_.batchSize)) ? untilPoll : std::chrono::milliseconds(50);
  publisher_.waitForAcks(std::clamp(wait, std::chrono::milliseconds(1), std::chrono::milliseconds(50)));
}

}  // namespace outbox

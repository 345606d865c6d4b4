#include "relay/relay.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/backoff.h"
#include "common/log.h"
#include "relay/poison.h"

namespace outbox {

namespace {

constexpr std::chrono::seconds kProgressInterval{30};

}  // namespace

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
      scanner_(assignStore, clock, log_) {
  options_.maxInFlight = std::max(options_.maxInFlight, source_.batchSize);
}

void Relay::run() {
  Backoff backoff(std::chrono::milliseconds(100), std::chrono::milliseconds(10'000));
  std::string lastProblem;
  while (!stop_.stopped()) {
    progressed_ = false;
    if (!awaitLeadership()) break;
    Status s = session();
    metrics_.running = false;
    settle(stop_.stopped() ? std::min(options_.ackTimeout, std::chrono::milliseconds(2000)) : options_.ackTimeout);
    publisher_.abandon();
    if (stop_.stopped()) break;
    if (std::exchange(handingOver_, false)) {
      // What was in flight is settled: give the lease up, staying a candidate.
      log_->info("{}", s.message());
      lease_->handOver();
      metrics_.leader = false;
      metrics_.halted = metrics_.paused = false;  // the new leader's to say
      backoff.reset();
      lastProblem.clear();
      continue;
    }
    if (progressed_) backoff.reset();
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
      log_->warn("{}; retrying in {} ms", s.message(), delay.count());
    }
    lastProblem = s.message();
    clock_.waitFor(stop_, delay);
  }
  if (lease_ != nullptr) {
    lease_->release();  // a standby need not wait out the TTL
    metrics_.leader = false;
  }
  log_->info("relay stopped at published version {}", tracker_.contiguousVersion());
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
      metrics_.halted = metrics_.paused = false;  // the new leader's to say
    }
    if (s.isOk() && lease_->isLeader()) {
      metrics_.leader = true;
      log_->info("leader (lease epoch {})", lease_->leaseEpoch());
      return true;
    }
    metrics_.leader = false;
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
    metrics_.leader = false;
    return Status::transient(fmt::format("lost the lease (now held by {}): standing by", lease_->currentHolder()));
  }
  if (!lease_->lighter().empty()) {
    handingOver_ = true;
    return Status::transient(fmt::format("handing the source over to {}, which leads fewer sources", lease_->lighter()));
  }
  return Status::ok();
}

Status Relay::session() {
  OUTBOX_RETURN_IF_ERROR(beginSession());
  while (!stop_.stopped()) {
    OUTBOX_RETURN_IF_ERROR(checkLeadership());
    OUTBOX_RETURN_IF_ERROR(processAcks());
    OUTBOX_RETURN_IF_ERROR(checkAckDeadline());
    logProgress();
    if (prefetcher_.busy()) {
      // Wait briefly for the batch being prepared, without letting acks pile up.
      auto ready = prefetcher_.take(inFlight_.empty() ? std::chrono::milliseconds(50) : std::chrono::milliseconds(1));
      if (ready) OUTBOX_RETURN_IF_ERROR(onBatch(*ready));
    } else if (clock_.now() >= nextPoll_ && roomFor(static_cast<size_t>(source_.batchSize))) {
      OUTBOX_RETURN_IF_ERROR(poll());
    } else {
      waitForWork();
    }
  }
  return Status::ok();
}

Status Relay::beginSession() {
  prefetcher_.drain();  // a batch from the last session keeps its versions: it is in the tail now
  guard_ = WriteGuard{};
  if (lease_ != nullptr) {
    sessionLeaseEpoch_ = lease_->leaseEpoch();
    guard_.lease = LeaseGuard{lease_->holder(), sessionLeaseEpoch_};
  }
  store_.setWriteGuard(guard_);
  assignStore_.setWriteGuard(guard_);
  OUTBOX_RETURN_IF_ERROR(store_.connect());
  OUTBOX_RETURN_IF_ERROR(assignStore_.connect());
  OUTBOX_RETURN_IF_ERROR(publisher_.prepare());
  OUTBOX_RETURN_IF_ERROR(reconcile());
  rescan_ = true;  // the first batch rebuilds the scan: the assigned tail need not wait for it
  metrics_.running = true;
  nextPoll_ = lastMark_ = lastRowsAt_ = clock_.now();
  return Status::ok();
}

Status Relay::poll() {
  if (nextVersion_ > state_.assignedThrough) {
    startBatch();
    return Status::ok();
  }
  OUTBOX_RETURN_IF_ERROR(publishTail());
  nextPoll_ = clock_.now();  // the rest of the tail, or new rows, next
  return Status::ok();
}

void Relay::startBatch() {
  pollStarted_ = clock_.now();
  std::optional<SourceState> from;  // the cursor and floor the database held at reconcile
  if (std::exchange(rescan_, false)) from = state_;
  prefetcher_.start([this, from = std::move(from), limit = source_.batchSize, through = state_.assignedThrough] {
    if (from) {
      if (Status s = scanner_.reset(*from); !s.isOk()) {
        Batch failed;
        failed.status = s;
        return failed;
      }
    }
    return prepareBatch(scanner_, assignStore_, publisher_, metrics_, limit, through);
  });
}

void Relay::waitForWork() {
  const auto untilPoll = std::chrono::ceil<std::chrono::milliseconds>(nextPoll_ - clock_.now());
  if (inFlight_.empty()) {
    clock_.waitFor(stop_, std::max(untilPoll, std::chrono::milliseconds(0)));
    return;
  }
  auto wait = roomFor(static_cast<size_t>(source_.batchSize)) ? untilPoll : std::chrono::milliseconds(50);
  publisher_.waitForAcks(std::clamp(wait, std::chrono::milliseconds(1), std::chrono::milliseconds(50)));
}

void Relay::logProgress() {
  auto now = clock_.now();
  if (now - lastProgressLog_ < kProgressInterval) return;
  uint64_t rows = metrics_.publishedRows.load();
  if (rows != loggedPublishedRows_ && lastProgressLog_ != Clock::TimePoint{}) {
    log_->info("published {} rows in the last {} s; through version {} (seq {})", rows - loggedPublishedRows_,
               std::chrono::duration_cast<std::chrono::seconds>(now - lastProgressLog_).count(),
               state_.publishedThrough, state_.publishedStreamSeq);
  }
  loggedPublishedRows_ = rows;
  lastProgressLog_ = now;
}

std::chrono::milliseconds Relay::nextPollDelay(bool rowsCame) {
  // The wait grows with the time since rows last came: a producer that pauses for a moment (a
  // slow commit, a GC) finds the relay still polling every few ms; one that stopped costs a poll
  // per poll_interval after a few seconds.
  auto now = clock_.now();
  if (rowsCame) lastRowsAt_ = now;
  auto sinceRows = std::chrono::duration_cast<std::chrono::milliseconds>(now - lastRowsAt_);
  const auto longest = std::chrono::duration_cast<std::chrono::milliseconds>(source_.pollInterval);
  return std::min(std::max(kFlowingPoll, sinceRows / 8), longest);
}

bool Relay::roomFor(size_t rows) const {
  return inFlight_.size() + rows <= static_cast<size_t>(options_.maxInFlight);
}

Status Relay::publishTail() {
  auto rows = store_.readAssigned(nextVersion_, state_.assignedThrough, source_.batchSize);
  if (!rows.isOk()) {
    metrics_.errorsDatabase++;
    return rows.status();
  }
  for (size_t i = 0; i <= rows->size(); ++i) {
    if (i == rows->size() ? rows->empty() : (*rows)[i].version != nextVersion_ + i) {
      return haltWith(fmt::format("version {} is missing from {} (pruned?), so the stream cannot be repaired; run "
                                  "'outbox-bridge epoch bump'",
                                  nextVersion_ + i, source_.outboxTable));
    }
  }
  return publishRows(*rows);
}

Status Relay::onBatch(Batch& batch) {
  if (!batch.status.isOk()) {
    metrics_.errorsDatabase++;
    return batch.status;
  }
  metrics_.scans++;
  state_.assignedThrough += batch.rows.size();
  metrics_.assignedVersion = state_.assignedThrough;
  auto now = clock_.now();
  bool full = batch.read == static_cast<size_t>(source_.batchSize) && !batch.poison;
  // Polls follow the flow: while rows come, the next poll follows at once (a full batch) or within
  // milliseconds; the wait grows to poll_interval as rows stop coming (nextPollDelay). Waits count
  // from when a poll started, so the time a batch takes is not added to the wait of a row
  // committed just after its read.
  nextPoll_ = full || batch.poison ? now : pollStarted_ + nextPollDelay(batch.read > 0);
  // More is waiting: start the next batch's database work first, so it overlaps with this
  // batch's publishing.
  if (full && roomFor(batch.rows.size() + static_cast<size_t>(source_.batchSize))) startBatch();
  OUTBOX_RETURN_IF_ERROR(publishRows(batch.rows));
  if (!batch.poison) return Status::ok();
  metrics_.poisonRows++;
  std::string reason = poisonHaltReason(batch.poison->first, batch.poison->second);
  if (source_.onPoison == OnPoison::kQuarantine) {
    log_->warn("quarantining {}", reason);
    Status s = store_.quarantine(batch.poison->first, reason);
    // Refused: the row has a version after all, which only an operator can sort out.
    return s.isRejected() ? Status::permanent(s.message()) : s;
  }
  log_->error("{}; fix the row or run 'outbox-bridge quarantine --source {} --id {}'", reason, source_.name,
              batch.poison->first);
  return haltWith(reason, HaltedRow{batch.poison->first, std::nullopt});
}

Status Relay::publishRows(const std::vector<OutboxRow>& rows) {
  const auto sentAt = clock_.now();  // one read per batch: the deadline is ack_timeout, not microseconds
  for (const auto& row : rows) {
    Status s = publisher_.publish(row, state_.epoch, expectedSeq_, /*fenceOnPreviousVersion=*/!firstPublish_);
    if (!s.isOk()) {
      metrics_.errorsPublish++;
      // Checked before its version was assigned, but the server may take less now (max_payload).
      if (auto why = publisher_.poisonReason(row)) {
        metrics_.poisonRows++;
        std::string reason = unpublishableHaltReason(row.version, row.id, *why);
        log_->error("{}", reason);
        return haltWith(reason, HaltedRow{row.id, row.version});
      }
      return s;
    }
    firstPublish_ = false;
    ++expectedSeq_;
    ++nextVersion_;
    inFlight_.push_back({row.version, row.createdAtMicros, sentAt});
  }
  return Status::ok();
}

}  // namespace outbox

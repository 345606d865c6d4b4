#include "relay/relay.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/backoff.h"
#include "common/log.h"
#include "relay/poison.h"

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
    progressed_ = false;
    if (!awaitLeadership()) break;
    SessionEnd end = session();
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
    standBy();
  }
  log_->info("relay stopped at published version {}", window_.contiguousVersion());
}

void Relay::standBy() {
  // What only the leader knows is the new leader's to say: a standby reporting its last values
  // would keep an alert on a source that another bridge has since resumed (max by source).
  metrics_.leader = false;
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
      log_->info("leader (lease epoch {})", lease_->leaseEpoch());
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
    } else if (options_.wakeup != nullptr && options_.wakeup->rings().total() != seenRings_.total() &&
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
  // A batch read ahead is dropped unassigned: the first batch scans again (rescan_). Its caller,
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
  rescan_ = true;  // the first batch rebuilds the scan: the assigned tail need not wait for it
  metrics_.running = true;
  unmarkedSince_.reset();
  offered_ = 0;
  pacer_.begin(clock_.now());
  if (options_.settleFeed != nullptr) {
    sentRows_.clear();
    options_.settleFeed->begin();
  }
  return Status::ok();
}

Status Relay::poll() {
  if (window_.nextVersion() > state_.assignedThrough) {
    startBatch();
    return Status::ok();
  }
  OUTBOX_RETURN_IF_ERROR(publishTail());
  pacer_.pollAt(clock_.now());  // the rest of the tail, or new rows, next
  return Status::ok();
}

void Relay::countWakeup() {
  Wakeup::Rings rings = seenRings_;
  if (options_.wakeup != nullptr) {
    rings = options_.wakeup->rings();
    metrics_.doorbell = options_.wakeup->doorbell.load();
  }
  // Without a ring, the idle timer or the flow; a ringer that rang may come first in the labels'
  // order. Only rings of commits that wrote rows are rows to wait for (PollPacer::started).
  WokeBy woke = pacer_.cause() == PollPacer::Cause::kIdle ? WokeBy::kPoll : WokeBy::kFlow;
  uint64_t rowRings = 0;
  for (const Wakeup::Ringer& ringer : Wakeup::kRingers) {
    const uint64_t rung = rings[ringer.by] - seenRings_[ringer.by];
    if (rung == 0) continue;
    woke = std::min(woke, ringer.wakes);
    if (ringer.bringsRows) rowRings += rung;
  }
  metrics_.wokeBy(woke)++;
  seenRings_ = rings;
  pacer_.started(clock_.now(), rowRings);
}

void Relay::startBatch() {
  countWakeup();
  std::optional<SourceState> from;  // the cursor and floor the database held at reconcile
  if (std::exchange(rescan_, false)) from = state_;
  prefetcher_.start([this, from = std::move(from), limit = source_.batchSize, through = state_.assignedThrough,
                      published = unmarked()] {
    if (from) {  // nothing was read ahead: beginSession drained it
      if (Status s = scanner_.reset(*from); !s.isOk()) {
        Batch failed;
        failed.status = s;
        return failed;
      }
    }
    if (!readAhead_) return prepareBatch(scanner_, assignStore_, publisher_, metrics_, limit, through, published);
    ScannedBatch scanned = readAhead_->busy() ? readAhead_->wait() : readBatch(scanner_, publisher_, limit);
    // More is waiting: read the next batch while this one is assigned. It is assigned only after
    // this one was (its assign expects this one's assigned_through), and dropped if this one fails.
    // Not beside open holes: their reads would return this batch's rows again (Scanner::mayReadAhead).
    if (scanned.full(limit) && scanner_.mayReadAhead()) {
      readAhead_->start([this, limit] { return readBatch(scanner_, publisher_, limit); });
    }
    return assignBatch(std::move(scanned), assignStore_, metrics_, through, published);
  });
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
      clock_.waitFor(stop_, wait, *options_.wakeup, seenRings_);
    } else {
      clock_.waitFor(stop_, wait);
    }
    return;
  }
  auto wait = roomFor(static_cast<size_t>(source_.batchSize)) ? untilPoll : std::chrono::milliseconds(50);
  publisher_.waitForAcks(std::clamp(wait, std::chrono::milliseconds(1), std::chrono::milliseconds(50)));
}

bool Relay::roomFor(size_t rows) const {
  return window_.inFlight() + rows <= static_cast<size_t>(options_.maxInFlight);
}

Status Relay::publishTail() {
  const uint64_t from = window_.nextVersion();
  auto rows = store_.readAssigned(from, state_.assignedThrough, source_.batchSize);
  if (!rows.isOk()) {
    metrics_.errorsDatabase++;
    return rows.status();
  }
  for (size_t i = 0; i <= rows->size(); ++i) {
    if (i == rows->size() ? rows->empty() : (*rows)[i].version != from + i) {
      return haltWith(fmt::format("version {} is missing from {} (pruned?), so the stream cannot be repaired; run "
                                  "'outbox-bridge epoch bump'",
                                  from + i, source_.outboxTable));
    }
  }
  return publishRows(std::move(rows).value());
}

Status Relay::onBatch(Batch& batch) {
  if (!batch.status.isOk()) {
    metrics_.errorsDatabase++;
    return batch.status;
  }
  metrics_.scans++;
  marked(batch.marked);
  state_.assignedThrough += batch.rows.size();
  metrics_.assignedVersion = state_.assignedThrough;
  auto now = clock_.now();
  bool full = batch.read == static_cast<size_t>(source_.batchSize) && !batch.poison;
  // Polls follow the flow: at once after a full batch, within milliseconds while rows come.
  PollPacer::Watch watch;
  if (options_.wakeup != nullptr) {
    options_.wakeup->readThrough = batch.cursor;  // 0 when unknown: the idle check rings
    watch = {options_.wakeup->doorbell.load(), options_.wakeup->idleChecked.load()};
  }
  // A late row answers its commit's ring as a new one does.
  pacer_.batchArrived(now, full || batch.poison, std::max(batch.read, batch.rows.size()), batch.holesOpen, watch);
  if (options_.wakeup != nullptr) options_.wakeup->ringsUnanswered = pacer_.ringsGivenUp();
  // More is waiting: start the next batch's database work first, so it overlaps with this
  // batch's publishing.
  if (full && roomFor(batch.rows.size() + static_cast<size_t>(source_.batchSize))) startBatch();
  OUTBOX_RETURN_IF_ERROR(publishRows(std::move(batch.rows)));
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

Status Relay::publishRows(std::vector<OutboxRow> rows) {
  const auto sentAt = clock_.now();  // one read per batch: the deadline is ack_timeout, not microseconds
  for (auto& row : rows) {
    Status s = publisher_.publish(row, state_.epoch, expectedSeq_, /*fenceOnPreviousVersion=*/!firstPublish_);
    if (!s.isOk()) {
      metrics_.errorsPublish++;
      // Checked before its version was assigned, but the server may take less now (max_payload).
      OutboxRow checked = row;
      if (auto why = publisher_.poisonReason(checked)) {
        metrics_.poisonRows++;
        std::string reason = unpublishableHaltReason(row.version, row.id, *why);
        log_->error("{}", reason);
        return haltWith(reason, HaltedRow{row.id, row.version});
      }
      return s;
    }
    firstPublish_ = false;
    ++expectedSeq_;
    window_.sent(row, sentAt);
    if (options_.settleFeed != nullptr) sentRows_.push_back(std::move(row));
  }
  return Status::ok();
}

}  // namespace outbox

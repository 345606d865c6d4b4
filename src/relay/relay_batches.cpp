// The relay's batch path (docs/design.md, "The relay loop"; the life of a batch in batch.h): a poll
// starts the next batch on the prefetch thread (countWakeup says what woke it), onBatch publishes
// what it brought, and publishTail resends the assigned tail after reconcile. The session around it
// is in relay.cpp, the acks in relay_acks.cpp.
#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "relay/poison.h"
#include "relay/relay.h"

namespace outbox {

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
  Wakeup::Rings rings = answeredRings_;
  if (options_.wakeup != nullptr) {
    rings = options_.wakeup->rings();
    metrics_.doorbell = options_.wakeup->doorbell.load();
  }
  // Without a ring, the idle timer or the flow; a ringer that rang may come first in the labels'
  // order. Only rings of commits that wrote rows are rows to wait for (PollPacer::started).
  WokeBy woke = pacer_.cause() == PollPacer::Cause::kIdle ? WokeBy::kPoll : WokeBy::kFlow;
  uint64_t rowRings = 0;
  for (const Wakeup::Ringer& ringer : Wakeup::kRingers) {
    const uint64_t rung = rings[ringer.by] - answeredRings_[ringer.by];
    if (rung == 0) continue;
    woke = std::min(woke, ringer.wakes);
    if (ringer.bringsRows) rowRings += rung;
  }
  metrics_.wokeBy(woke)++;
  answeredRings_ = rings;
  pacer_.started(clock_.now(), rowRings);
}

void Relay::startBatch() {
  countWakeup();
  std::optional<SourceState> from;  // the cursor and floor the database held at reconcile
  if (std::exchange(scanFromState_, false)) from = state_;
  prefetcher_.start([this, from = std::move(from), limit = source_.batchSize, through = state_.assignedThrough,
                      published = unmarked()] { return catchingWork<Batch>([&] {
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
      readAhead_->start(
          [this, limit] { return catchingWork<ScannedBatch>([&] { return readBatch(scanner_, publisher_, limit); }); });
    }
    return assignBatch(std::move(scanned), assignStore_, metrics_, through, published);
  }); });
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
    if (batch.status.cause() != Cause::kScanAgain) metrics_.errorsDatabase++;
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
    Status s = publisher_.publish(row, state_.epoch, expectedSeq_, /*fenceOnPreviousVersion=*/!nothingSentYet_);
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
    nothingSentYet_ = false;
    ++expectedSeq_;
    window_.sent(row, sentAt);
    if (options_.settleFeed != nullptr) sentRows_.push_back(std::move(row));
  }
  return Status::ok();
}

}  // namespace outbox

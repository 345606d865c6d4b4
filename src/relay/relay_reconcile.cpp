// The relay's reconcile with the stream (docs/design.md, "Reconcile") and its halts: where a
// session starts publishing, and when a halted source may go on.
#include <fmt/format.h>

#include "relay/poison.h"
#include "relay/relay.h"
#include "relay/resume_point.h"

namespace outbox {

Status Relay::reconcile() {
  window_.close();
  auto loaded = store_.loadState();
  if (!loaded.isOk()) return loaded.status();
  state_ = *loaded;
  // From here on, every write of this session is refused once an epoch bump moves past it.
  guard_.epoch = state_.epoch;
  store_.setWriteGuard(guard_);
  assignStore_.setWriteGuard(guard_);
  // A bump its finish refused halts the source until an operator bumps again (which clears it).
  if (state_.bumpFromEpoch && state_.haltedReason.empty()) OUTBOX_RETURN_IF_ERROR(finishEpochBump());
  metrics_.halted = !state_.haltedReason.empty();
  metrics_.paused = state_.paused;
  metrics_.epoch = state_.epoch;
  metrics_.assignedVersion = state_.assignedThrough;
  metrics_.publishedVersion = state_.publishedThrough;
  if (!state_.haltedReason.empty()) OUTBOX_RETURN_IF_ERROR(recheckHalt());
  if (state_.paused) return Status::permanent("paused by an operator: publishing nothing until resumed");

  auto tipResult = publisher_.tip();
  if (!tipResult.isOk()) return tipResult.status();
  const StreamTip tip = *tipResult;
  auto resume = findResumePoint(state_, tip, source_.stream);
  if (!resume.isOk()) {
    if (resume.status().isPermanent()) return haltWith(resume.status().message());
    return resume.status();
  }
  if (resume->staleTail) {
    // Stored after the bump's finish read the stream: their rows keep those versions.
    const StaleTail tail = *resume->staleTail;
    auto restored = store_.adoptStaleTail(tail);
    if (!restored.isOk()) return restored.status();
    log_->info("reconcile: stream sequences {}..{} hold versions {}..{} of an older epoch, stored by a leader the "
               "bump fenced after the bump's finish read the stream: {} rows keep those versions; epoch {} begins "
               "after sequence {}, and the versions it had assigned are handed out again",
               tail.afterSeq + 1, tail.throughSeq, tail.firstVersion, tail.lastVersion, *restored, state_.epoch,
               tail.throughSeq);
    auto reloaded = store_.loadState();
    if (!reloaded.isOk()) return reloaded.status();
    state_ = *reloaded;
    metrics_.assignedVersion = state_.assignedThrough;
    resume = findResumePoint(state_, tip, source_.stream);
    if (!resume.isOk()) return resume.status().isPermanent() ? haltWith(resume.status().message()) : resume.status();
  }
  const uint64_t streamVersion = resume->version;
  const uint64_t streamVersionSeq = resume->seq;

  if (streamVersion != state_.publishedThrough || streamVersionSeq != state_.publishedStreamSeq) {
    if (streamVersion > state_.publishedThrough) {
      log_->info("reconcile: the stream holds versions through {} (marked {}): advancing the marks", streamVersion,
                 state_.publishedThrough);
    } else if (streamVersion < state_.publishedThrough) {
      log_->warn("reconcile: stream {} holds versions only through {} but {} were published: "
                 "publishing {}..{} again from the outbox table",
                 source_.stream, streamVersion, state_.publishedThrough, streamVersion + 1, state_.assignedThrough);
    }
    OUTBOX_RETURN_IF_ERROR(store_.setPublished(streamVersion, streamVersionSeq));
    state_.publishedThrough = streamVersion;
    state_.publishedStreamSeq = streamVersionSeq;
  }
  window_.open(streamVersion, streamVersionSeq);
  nothingSentYet_ = true;
  expectedSeq_ = tip.lastSeq;
  metrics_.publishedVersion = streamVersion;
  log_->info("in step with stream {}: epoch {}, published through {} (seq {}), assigned through {}", source_.stream,
             state_.epoch, streamVersion, tip.lastSeq, state_.assignedThrough);
  return Status::ok();
}

Status Relay::finishEpochBump() {
  // The last session's publishes are settled (or abandoned after ack_timeout), and this process
  // is the stream's only writer: the tip read now is where the old epoch ends. Reading it here,
  // not when the operator asked, is what keeps a version the stream stored meanwhile from being
  // taken from its row and published again (issue 19).
  const uint64_t from = *state_.bumpFromEpoch;
  auto tip = publisher_.tip();
  if (!tip.isOk()) return tip.status();
  if (tip->version && tip->epoch >= state_.epoch) {
    // Someone else's message, stored between the bump and now: only an operator can tell.
    return haltWith(fmt::format("stream {} holds epoch {}, not below the new epoch {} (another writer?): run "
                                "'outbox-bridge epoch bump' again",
                                source_.stream, tip->epoch, state_.epoch));
  }
  if (Status done = store_.completeEpochBump(*tip); !done.isOk()) {
    // A permanent failure (a table or a grant missing: an upgrade without `migrate`) halts with
    // its reason, where an operator looks; a second bump clears it and the leader finishes.
    if (!done.isPermanent()) return done;
    return haltWith(fmt::format("could not finish the epoch bump to epoch {}: {}; once that is fixed, run "
                                "'outbox-bridge epoch bump' again",
                                state_.epoch, done.message()));
  }
  auto loaded = store_.loadState();
  if (!loaded.isOk()) return loaded.status();
  state_ = *loaded;
  log_->info("epoch {} begins (bumped from epoch {}): versions continue after {}, the stream after sequence {}",
             state_.epoch, from, state_.epochVersionsAfter, state_.epochStreamSeq);
  return Status::ok();
}

Status Relay::recheckHalt() {
  const Status stillHalted = Status::permanent(state_.haltedReason);
  if (!state_.haltedRow) return stillHalted;  // only an operator can resolve it
  const HaltedRow halted = *state_.haltedRow;
  Result<std::vector<OutboxRow>> row = std::vector<OutboxRow>{};
  if (!halted.version) {
    auto scanned = store_.readRanges({IdRange{halted.id, halted.id}}, 1);
    if (!scanned.isOk()) return scanned.status();
    // Quarantined, deleted or fixed: the scan takes it from here.
    if (!scanned->empty() && !scanned->front().quarantined) row = std::vector<OutboxRow>{scanned->front().row};
  } else {
    row = store_.readAssigned(*halted.version, *halted.version, 1);
    if (row.isOk() && row->empty()) return stillHalted;  // an epoch bump clears this halt itself
  }
  if (!row.isOk()) return row.status();
  if (!row->empty() && publisher_.poisonReason(row->front())) return stillHalted;
  log_->info("the row the source halted on can be published now (fixed, quarantined, or the server takes it): "
             "resuming");
  OUTBOX_RETURN_IF_ERROR(store_.clearHalt());
  state_.haltedReason.clear();
  state_.haltedRow.reset();
  metrics_.halted = false;
  return Status::ok();
}

Status Relay::haltWith(const std::string& reason, std::optional<HaltedRow> row) {
  metrics_.halted = true;
  OUTBOX_RETURN_IF_ERROR(store_.halt(reason, row));
  return Status::permanent(reason);
}

}  // namespace outbox

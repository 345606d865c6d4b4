#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "relay/ports.h"

namespace outbox {

// Where publishing resumes after reconcile (docs/design.md, "Reconcile"): the stream holds every
// version through `version`, and the next message it stores gets sequence `seq` + 1. reconcile()
// writes the pair as published_through / published_stream_seq.
//
// The pair keeps one rule that makes the rest computable: every sequence after published_stream_seq
// holds (or held, before a purge or max_age) the next version of this epoch, because the bridge is
// the stream's only writer. So a stream whose last sequence L is at or past the marks (P at S) lost
// nothing the marks count: the version at L is P + (L - S), whether or not those messages are still
// stored, and nothing is published again. A stream whose last sequence went below S lost messages
// (deleted and recreated, or its unsynced tail lost in a crash): publishing resumes after the newest
// surviving version of this epoch, or, when none survives, after the lowest version the lost part
// can have started at.
struct ResumePoint {
  uint64_t version = 0;
  uint64_t seq = 0;
  // Set when the epoch begins later than `epoch bump` recorded (outbox_epoch_history.stream_seq):
  // the leader the bump fenced stored its last old-epoch messages after the bump read the stream.
  // `version` and `seq` are then the marks once those messages are adopted
  // (OutboxStore::adoptStaleTail).
  std::optional<StaleTail> staleTail;
};

// A permanent Status (the halt reason, for an operator) when the stream and the database disagree
// in a way only an epoch bump resolves: the stream is ahead of the database, holds a newer epoch,
// or holds messages the marks cannot account for.
Result<ResumePoint> findResumePoint(const SourceState& state, const StreamTip& tip, const std::string& stream);

// What `epoch bump` does (docs/design.md, "Reconcile"), given the source's state, the stream's tip
// and the highest version in the table.
struct BumpPlan {
  uint64_t epoch = 0;    // the new epoch: above the database's and the stream's
  uint64_t highest = 0;  // the new epoch's versions start above this: every version ever used
  uint64_t kept = 0;     // versions above this lose their rows' assignment (published again)
};
// `kept` is what the stream certainly holds — by the rules reconcile uses (findResumePoint), or,
// where those halt, everything assigned when the stream is ahead of the database (a restore),
// else the marks — so a row whose version the stream may lack is published again: a duplicate
// at worst, never a lost row. `highest` covers messages that have since expired (the version at
// the stream's last sequence is at least P + (L - S)).
BumpPlan planEpochBump(const SourceState& state, const StreamTip& tip, uint64_t maxVersionInTable);

}  // namespace outbox

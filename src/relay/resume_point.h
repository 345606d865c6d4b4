#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "relay/ports.h"

namespace outbox {

// Where publishing resumes after reconcile (ARCHITECTURE.md section 4): the stream holds every
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
  std::optional<uint64_t> epochStartSeq;
};

// A permanent Status (the halt reason, for an operator) when the stream and the database disagree
// in a way only an epoch bump resolves: the stream is ahead of the database, holds a newer epoch,
// or holds messages the marks cannot account for.
Result<ResumePoint> findResumePoint(const SourceState& state, const StreamTip& tip, const std::string& stream);

// What `epoch bump` keeps of the versions assigned in the current epoch: those certainly in the
// stream — through published_through (marks come only from acks) and, when the newest stored
// message is of this epoch, through its version (each message is fenced on the one before, so
// the stream holds every version before it). Rows assigned above are versioned again in the new
// epoch, which costs a duplicate at worst; keeping a version the stream lacks would lose its row.
uint64_t versionsKeptByBump(const SourceState& state, const StreamTip& tip);

}  // namespace outbox

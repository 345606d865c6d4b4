#include "relay/resume_point.h"

#include <algorithm>

#include <fmt/format.h>

namespace outbox {

namespace {

Status aheadOfDatabase(const std::string& stream, uint64_t version, uint64_t assignedThrough) {
  return Status::permanent(
      fmt::format("the stream is ahead of the database: version {} is in stream {} but "
                  "assigned_through is {} (the database was restored from a backup, or failed over to a "
                  "replica that had not caught up?); publishing "
                  "nothing until 'outbox-bridge epoch bump'",
                  version, stream, assignedThrough));
}

}  // namespace

Result<ResumePoint> findResumePoint(const SourceState& state, const StreamTip& tip, const std::string& stream) {
  const uint64_t P = state.publishedThrough, S = state.publishedStreamSeq, A = state.assignedThrough;
  const uint64_t L = tip.lastSeq;
  if (tip.version && tip.epoch > state.epoch) {
    return Status::permanent(
        fmt::format("the stream holds epoch {} but the database is at epoch {}: the database was "
                    "restored from a backup or failed over to a lagging replica? run 'outbox-bridge epoch bump'",
                    tip.epoch, state.epoch));
  }
  const bool thisEpoch = tip.version && tip.epoch == state.epoch;

  if (L >= S) {
    // Right after an epoch bump, before the new epoch has published anything, a stored old-epoch
    // message past S, of a version the bump already moved past, is one of the last of the leader
    // the bump fenced (stored after the bump read the stream). The epoch begins after it. (None
    // can follow a message of the new epoch: every publish but a session's first also fences on
    // the previous version's Msg-Id, which no other writer's message can match.) Had those
    // messages expired, they could not be told from the epoch's own: that halts below, and a
    // second bump resolves it.
    // Sequences S+1..L hold one version each, contiguous: the one at tip.seq says which.
    if (L > S && state.epoch > 1 && P == state.epochVersionsAfter && S == state.epochStreamSeq && tip.version &&
        tip.seq > S && tip.epoch < state.epoch && *tip.version <= state.epochVersionsAfter &&
        *tip.version >= tip.seq - S) {
      return ResumePoint{P, L, StaleTail{S, L, *tip.version - (tip.seq - S - 1), *tip.version + (L - tip.seq)}};
    }
    // The same sequences with none of them stored any more (deleted, expired, or more deleted
    // at the end than the tip probe walks back over): the fenced leader's last messages or this
    // epoch's first, unmarked, cannot be told apart — counted as this epoch's, rows of the first
    // would be published twice and rows the new epoch assigned meanwhile never (review of issue
    // 19). Halt: a second bump keeps only the marks (a duplicate at worst, never a loss).
    if (L > S && state.epoch > 1 && P == state.epochVersionsAfter && S == state.epochStreamSeq &&
        (!tip.version || tip.seq <= S)) {
      return Status::permanent(fmt::format(
          "stream {} moved past where epoch {} began (sequence {}) to sequence {}, but no message after it survives "
          "to say whose they were (deleted or expired): the last messages of the leader the epoch bump fenced, or "
          "this epoch's first; publishing nothing until 'outbox-bridge epoch bump'",
          stream, state.epoch, S, L));
    }
    // Nothing the marks count was lost. A stored message past the marks must be the version the
    // rule says; anything else was written by someone else.
    if (tip.version && tip.seq > S) {
      if (!thisEpoch) {
        return Status::permanent(fmt::format(
            "stream {} holds a message of epoch {} at sequence {}, after published_stream_seq {} of epoch {}: another "
            "writer, or a leader that kept publishing through an epoch bump; run 'outbox-bridge epoch bump'",
            stream, tip.epoch, tip.seq, S, state.epoch));
      }
      if (*tip.version != P + (tip.seq - S)) {
        return Status::permanent(fmt::format(
            "stream {} holds version {} at sequence {}, but published_through {} at sequence {} says it must be "
            "version {} (another writer?); run 'outbox-bridge epoch bump'",
            stream, *tip.version, tip.seq, P, S, P + (tip.seq - S)));
      }
    }
    const uint64_t version = P + (L - S);  // the sequences after S, stored or since purged/expired
    if (version > A) return aheadOfDatabase(stream, version, A);
    return ResumePoint{version, L};
  }

  // L < S: the stream lost messages the marks counted. Resume after the newest version of this
  // epoch it still holds; the next message follows L.
  if (thisEpoch) {
    if (*tip.version > A) return aheadOfDatabase(stream, *tip.version, A);
    return ResumePoint{*tip.version, L};
  }
  // Nothing of this epoch survives. If the stream still reaches into this epoch (L at or past
  // where the epoch began), only its tail was lost: the version at L is at least P - (S - L),
  // since each sequence holds at most one more version than the one before. Otherwise the stream
  // was recreated: publish the whole epoch again.
  uint64_t from = state.epochVersionsAfter;
  if (L >= state.epochStreamSeq && P >= S - L && P - (S - L) > from) from = P - (S - L);
  return ResumePoint{std::min(from, A), L};
}

BumpPlan planEpochBump(const SourceState& state, const StreamTip& tip, uint64_t maxVersionInTable) {
  const uint64_t P = state.publishedThrough, S = state.publishedStreamSeq, A = state.assignedThrough;
  const uint64_t L = tip.lastSeq;
  const uint64_t atLastSeq = L >= S ? P + (L - S) : 0;  // a lower bound of the version at L
  BumpPlan plan;
  plan.epoch = std::max(state.epoch, tip.version ? tip.epoch : 0) + 1;
  plan.highest = std::max<uint64_t>({tip.version.value_or(0), maxVersionInTable, A, P, atLastSeq});
  if (auto resume = findResumePoint(state, tip, ""); resume.isOk()) {
    plan.kept = std::min(resume->version, A);
  } else if ((tip.version && tip.epoch == state.epoch && *tip.version >= A) || atLastSeq >= A) {
    plan.kept = A;  // the stream is ahead of the database: it holds everything assigned
  } else {
    plan.kept = std::min(P, A);  // only the marks are certain
  }
  return plan;
}

}  // namespace outbox

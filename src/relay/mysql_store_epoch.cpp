// MysqlOutboxStore's halts, quarantines and epochs: a stale tail given back, a halt set and
// cleared, a row quarantined, an epoch bumped and its bump finished (mysql_store.cpp has the
// session and the state, mysql_store_assign.cpp the assign, mysql_store_read.cpp the scan's reads).
#include "relay/mysql_store.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/log.h"
#include "relay/resume_point.h"

namespace outbox {

namespace {
// The assignments that clear a halt (outbox_source_state alias s).
constexpr const char* kHaltCleared = "s.halted_reason = NULL, s.halted_row_id = NULL, s.halted_version = NULL";
}  // namespace

Result<uint64_t> MysqlOutboxStore::adoptStaleTail(const StaleTail& tail) {
  if (guard_.epoch == 0) return Status::permanent("adoptStaleTail needs the epoch in the write guard");
  uint64_t restored = 0;
  Status s = session_->transaction([&](db::Connection& conn) -> Status {
    OUTBOX_RETURN_IF_ERROR(lockState(conn, "adopting the old epoch's last messages"));
    // Still as reconcile found it: the epoch has published nothing and begins at tail.afterSeq.
    auto rows = conn.query(fmt::format(
        "SELECT published_through, published_stream_seq, {} FROM outbox_source_state s WHERE source = {}",
        epochStartColumns("s.epoch"), sourceLiteral_));
    if (!rows.isOk()) return rows.status();
    if (!rows->next()) return Status::transient("outbox_source_state has no row for source " + source_.name);
    const uint64_t versionsAfter = rows->u64("epoch_versions_after");
    if (rows->u64("published_through") != versionsAfter || rows->u64("published_stream_seq") != tail.afterSeq ||
        rows->u64("epoch_stream_seq") != tail.afterSeq) {
      return Status::transient("the epoch's start or marks moved while reconciling; reconciling again");
    }
    // No message of this epoch is in the stream (none of an older one could follow it), so none of
    // the versions it assigned is: they are dropped, and handed out again after the rows below
    // have theirs back, densely and in id order, by the scan.
    auto lowest =
        conn.queryU64(fmt::format("SELECT MIN(outbox_id) FROM {} WHERE version > {}", versions_, versionsAfter));
    if (!lowest.isOk()) return lowest.status();
    OUTBOX_RETURN_IF_ERROR(conn.exec(fmt::format("DELETE FROM {} WHERE version > {}", versions_, versionsAfter)));
    auto given = giveBackStaleTail(conn, tail);
    if (!given.isOk()) return given.status();
    restored = *given;
    std::string floor;
    if (lowest->has_value()) floor = fmt::format(", scan_floor = LEAST(COALESCE(scan_floor, {0}), {0})", **lowest - 1);
    OUTBOX_RETURN_IF_ERROR(conn.exec(fmt::format(
        "UPDATE outbox_source_state SET assigned_through = {}, published_stream_seq = {}{} WHERE source = {}",
        versionsAfter, tail.throughSeq, floor, sourceLiteral_)));
    return conn.exec(fmt::format("UPDATE outbox_epoch_history SET stream_seq = {} WHERE source = {} AND epoch = {}",
                                 tail.throughSeq, sourceLiteral_, guard_.epoch));
  });
  if (!s.isOk()) return s;
  return restored;
}

Result<uint64_t> MysqlOutboxStore::giveBackStaleTail(db::Connection& conn, const StaleTail& tail) {
  const std::string which = fmt::format("source = {} AND version BETWEEN {} AND {}", sourceLiteral_, tail.firstVersion,
                                        tail.lastVersion);
  auto restored = conn.execCount(
      fmt::format("INSERT INTO {} (version, outbox_id) SELECT version, outbox_id FROM outbox_bump_removed WHERE {}",
                  versions_, which));
  if (!restored.isOk()) return restored.status();
  // A row quarantined after the finish took its version (it had none then) is in the stream all
  // the same: its quarantine holds nothing back any more, and would keep prune from it.
  auto lifted = conn.execCount(fmt::format(
      "DELETE q FROM outbox_quarantine q JOIN outbox_bump_removed r ON r.source = q.source AND r.outbox_id = "
      "q.outbox_id WHERE r.source = {} AND r.version BETWEEN {} AND {}",
      sourceLiteral_, tail.firstVersion, tail.lastVersion));
  if (!lifted.isOk()) return lifted.status();
  if (*lifted > 0) {
    sourceLogger(source_.name)
        ->warn("{} row(s) quarantined after the epoch bump took their versions are in the stream (the fenced "
               "leader's messages, stored after the bump): their quarantine is lifted",
               *lifted);
  }
  OUTBOX_RETURN_IF_ERROR(conn.exec("DELETE FROM outbox_bump_removed WHERE " + which));
  return *restored;
}

Status MysqlOutboxStore::halt(const std::string& reason, std::optional<HaltedRow> row) {
  auto orNull = [](std::optional<uint64_t> v) { return v ? std::to_string(*v) : std::string("NULL"); };
  return session_->run([&](db::Connection& conn) {
    return guardedStateWrite(
        conn,
        fmt::format("s.halted_reason = {}, s.halted_row_id = {}, s.halted_version = {}",
                    conn.quote(reason.substr(0, 1000)), orNull(row ? std::optional(row->id) : std::nullopt),
                    orNull(row ? row->version : std::nullopt)),
        "", "halting the source");
  });
}

Status MysqlOutboxStore::clearHalt() { return guardedStateWrite(kHaltCleared, "", "clearing the halt"); }

Status MysqlOutboxStore::quarantine(uint64_t outboxId, const std::string& reason) {
  return session_->transaction([&](db::Connection& conn) -> Status {
    // The state row first, as the assign does: one of the two waits for the other (and the
    // relay's own quarantine of a poison row is checked against its lease and epoch).
    OUTBOX_RETURN_IF_ERROR(lockState(conn, "quarantining a row"));
    // Read after the lock: a row committed by now is seen.
    auto exists = conn.queryU64(fmt::format("SELECT id FROM {} WHERE id = {}", table_, outboxId));
    if (!exists.isOk()) return exists.status();
    if (!exists->has_value()) {
      return Status::rejected(
          fmt::format("{} has no committed row {} (not inserted yet, rolled back or pruned): only a "
                      "row that exists and has no version can be quarantined",
                      source_.outboxTable, outboxId));
    }
    auto version =
        conn.queryU64(fmt::format("SELECT version FROM {} WHERE outbox_id = {} FOR UPDATE", versions_, outboxId));
    if (!version.isOk()) return version.status();
    if (version->has_value()) {
      return Status::rejected(fmt::format("row {} already has version {}: only unpublished rows can be quarantined",
                                           outboxId, **version));
    }
    return conn.exec(fmt::format(
        "INSERT INTO outbox_quarantine (source, outbox_id, reason) VALUES ({}, {}, {}) "
        "ON DUPLICATE KEY UPDATE reason = VALUES(reason)",
        sourceLiteral_, outboxId, conn.quote(reason.substr(0, 1000))));
  });
}

Result<SourceState> MysqlOutboxStore::epochBump(const StreamTip& tip, const std::string& reason) {
  SourceState result;
  Status s = session_->transaction([&](db::Connection& conn) -> Status {
    auto rows = conn.query(fmt::format(
        "SELECT epoch, assigned_through, published_through, published_stream_seq, bump_from_epoch "
        "FROM outbox_source_state WHERE source = {} FOR UPDATE",
        sourceLiteral_));
    if (!rows.isOk()) return rows.status();
    if (!rows->next()) return Status::permanent("no state row for source " + source_.name + " (run migrate)");
    const uint64_t epoch = rows->u64("epoch");
    // A bump still waiting for the leader keeps the epoch it moves on from.
    const uint64_t from = rows->optU64("bump_from_epoch").value_or(epoch);
    result.epoch = std::max(epoch, tip.version ? tip.epoch : 0) + 1;
    result.assignedThrough = rows->u64("assigned_through");
    result.publishedThrough = rows->u64("published_through");
    result.publishedStreamSeq = rows->u64("published_stream_seq");
    result.bumpFromEpoch = from;
    OUTBOX_RETURN_IF_ERROR(conn.exec(fmt::format(
        "UPDATE outbox_source_state SET epoch = {}, bump_from_epoch = {}, {} WHERE source = {}", result.epoch, from,
        "halted_reason = NULL, halted_row_id = NULL, halted_version = NULL", sourceLiteral_)));
    // versions_after and stream_seq are the leader's to write when it finishes the bump; until
    // then they say where the old epoch stood.
    return conn.exec(fmt::format(
        "INSERT INTO outbox_epoch_history (source, epoch, reason, versions_after, stream_seq) "
        "VALUES ({}, {}, {}, {}, {})",
        sourceLiteral_, result.epoch, conn.quote(reason.substr(0, 1000)), result.assignedThrough, tip.lastSeq));
  });
  if (!s.isOk()) return s;
  return result;
}

Status MysqlOutboxStore::completeEpochBump(const StreamTip& tip) {
  return session_->transaction([&](db::Connection& conn) -> Status {
    // The lease and this session's epoch hold, and the row is ours until commit.
    OUTBOX_RETURN_IF_ERROR(lockState(conn, "finishing the epoch bump"));
    auto rows = conn.query(fmt::format(
        "SELECT epoch, bump_from_epoch, assigned_through, published_through, published_stream_seq, {} "
        "FROM outbox_source_state s WHERE source = {} FOR UPDATE",
        epochStartColumns("s.bump_from_epoch"), sourceLiteral_));
    if (!rows.isOk()) return rows.status();
    if (!rows->next() || rows->isNull("bump_from_epoch")) return Status::ok();  // none pending (finished already)
    const uint64_t epoch = rows->u64("epoch");
    if (tip.version && tip.epoch >= epoch) {
      return Status::permanent(fmt::format("stream {} holds epoch {}, not below the new epoch {}: run 'outbox-bridge "
                                           "epoch bump' again",
                                           source_.stream, tip.epoch, epoch));
    }
    // The old epoch as it stood: the plan is the one a bump made at this moment would make.
    SourceState old;
    old.epoch = rows->u64("bump_from_epoch");
    old.assignedThrough = rows->u64("assigned_through");
    old.publishedThrough = rows->u64("published_through");
    old.publishedStreamSeq = rows->u64("published_stream_seq");
    old.epochVersionsAfter = rows->u64("epoch_versions_after");
    old.epochStreamSeq = rows->u64("epoch_stream_seq");
    auto maxInTable = conn.queryU64(fmt::format("SELECT MAX(version) FROM {}", versions_));
    if (!maxInTable.isOk()) return maxInTable.status();
    const BumpPlan plan = planEpochBump(old, tip, maxInTable->value_or(0));
    // Versions taken from rows by earlier finishes stay given back-able while an older epoch's
    // chain may still land: only until the old epoch has a message of its own in the stream.
    const bool oldEpochPublished = old.publishedThrough > old.epochVersionsAfter ||
                                   (tip.version && tip.epoch == old.epoch && tip.seq > old.epochStreamSeq);
    if (oldEpochPublished) {
      OUTBOX_RETURN_IF_ERROR(conn.exec("DELETE FROM outbox_bump_removed WHERE source = " + sourceLiteral_));
    }
    // Assigned but not in the stream: published again under fresh versions, unless the leader this
    // bump fences stores them after all (adoptStaleTail gives them back then). The scan's floor
    // goes below those rows, so the next scan finds them again.
    auto lowest = conn.queryU64(fmt::format("SELECT MIN(outbox_id) FROM {} WHERE version > {}", versions_, plan.kept));
    if (!lowest.isOk()) return lowest.status();
    OUTBOX_RETURN_IF_ERROR(conn.exec(fmt::format(
        "INSERT INTO outbox_bump_removed (source, version, outbox_id) SELECT {}, version, outbox_id FROM {} "
        "WHERE version > {}",
        sourceLiteral_, versions_, plan.kept)));
    OUTBOX_RETURN_IF_ERROR(conn.exec(fmt::format("DELETE FROM {} WHERE version > {}", versions_, plan.kept)));
    // A second bump before the first one's epoch published: an older epoch's last messages stored
    // past where the old epoch began are given back as reconcile would (their versions are at or
    // below plan.kept, which keeps them).
    if (auto resume = findResumePoint(old, tip, source_.stream); resume.isOk() && resume->staleTail) {
      auto given = giveBackStaleTail(conn, *resume->staleTail);
      if (!given.isOk()) return given.status();
    }
    std::string floor;
    if (lowest->has_value()) {
      floor = fmt::format(", scan_floor = LEAST(COALESCE(scan_floor, {0}), {0})", **lowest - 1);
    }
    OUTBOX_RETURN_IF_ERROR(conn.exec(fmt::format(
        "UPDATE outbox_source_state SET bump_from_epoch = NULL, assigned_through = {0}, published_through = {0}, "
        "published_stream_seq = {1}{2} WHERE source = {3}",
        plan.highest, tip.lastSeq, floor, sourceLiteral_)));
    return conn.exec(fmt::format(
        "UPDATE outbox_epoch_history SET versions_after = {}, stream_seq = {} WHERE source = {} AND epoch = {}",
        plan.highest, tip.lastSeq, sourceLiteral_, epoch));
  });
}

}  // namespace outbox

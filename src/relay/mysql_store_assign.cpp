// MysqlOutboxStore's writes of a batch (docs/design.md, "The relay loop" and "Marks"): the
// versions and the scan's record in one transaction (assign), the scan's record alone (saveScan),
// the pinned holes, and the published marks a batch does not carry. The state row's reads, the
// write guard and the connections are in mysql_store.cpp.
#include <iterator>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "relay/mysql_store.h"

namespace outbox {

namespace {
// The published marks a scan's write carries, each moved forward on its own: within an epoch
// (which the write guard fixes) a later version always has a later stream sequence, so the two
// maxima are one pair, whichever of two writes racing (a ride and a mark of the relay thread)
// commits last. Each column is moved on its own, so that neither assignment reads the other.
std::string publishedAssignments(const PublishedMark& published) {
  if (published.version == 0) return "";
  return fmt::format(", s.published_through = GREATEST(s.published_through, {}), s.published_stream_seq = "
                     "GREATEST(s.published_stream_seq, {})",
                     published.version, published.seq);
}
}  // namespace

Status MysqlOutboxStore::saveScan(const ScanMark& mark) {
  const std::string assignments = fmt::format("s.scan_cursor = {}, s.scan_floor = {}{}", mark.cursor, mark.floor,
                                              publishedAssignments(mark.published));
  Status s = mark.pin.empty() && mark.unpin.empty()
                 ? guardedStateWrite(assignments, "", "recording the scan")
                 : session_->transaction([&](db::Connection& conn) -> Status {
                     OUTBOX_RETURN_IF_ERROR(guardedStateWrite(conn, assignments, "", "recording the scan"));
                     return recordPins(conn, mark);
                   });
  if (s.isOk() && marks_ != nullptr && mark.published.version != 0) {
    marks_->carried(source_.name, mark.published.version);
  }
  return s;
}

Status MysqlOutboxStore::recordPins(db::Connection& conn, const ScanMark& mark) {
  // Deletes first: a range pinned again after it was unpinned keeps its first id.
  if (!mark.unpin.empty()) {
    std::string firsts;
    for (uint64_t first : mark.unpin) firsts += (firsts.empty() ? "" : ",") + std::to_string(first);
    OUTBOX_RETURN_IF_ERROR(conn.exec(
        fmt::format("DELETE FROM outbox_scan_holes WHERE source = {} AND first_id IN ({})", sourceLiteral_, firsts)));
  }
  if (mark.pin.empty()) return Status::ok();
  std::string values;
  for (const IdRange& r : mark.pin) {
    values += fmt::format("{}({}, {}, {})", values.empty() ? "" : ",", sourceLiteral_, r.first, r.last);
  }
  return conn.exec(fmt::format(
      "INSERT INTO outbox_scan_holes (source, first_id, last_id) VALUES {} ON DUPLICATE KEY UPDATE last_id = "
      "GREATEST(last_id, VALUES(last_id))",
      values));
}

Status MysqlOutboxStore::lostClaim(db::Connection& conn, uint64_t expectedAssignedThrough) {
  // Which of the claim's conditions failed, read in its transaction (a rare path): the log then
  // says what happened, not a list of what might have.
  std::vector<std::string> why;
  auto rows = conn.query(fmt::format(
      "SELECT s.epoch, s.assigned_through, s.halted_reason IS NOT NULL AS halted, s.paused, l.holder_id, "
      "l.lease_epoch, TIMESTAMPDIFF(MICROSECOND, NOW(6), l.expires_at) DIV 1000 AS expires_in_ms FROM "
      "outbox_source_state s LEFT JOIN outbox_bridge_lease l ON l.source = s.source WHERE s.source = {}",
      sourceLiteral_));
  if (rows.isOk() && rows->next()) {
    if (guard_.epoch != 0 && rows->u64("epoch") != guard_.epoch) {
      why.push_back(fmt::format("an epoch bump moved the source to epoch {} (this session's is {})",
                                rows->u64("epoch"), guard_.epoch));
    }
    if (rows->u64("assigned_through") != expectedAssignedThrough) {
      why.push_back(fmt::format("assigned_through is {}, not {} as this session last wrote it",
                                rows->u64("assigned_through"), expectedAssignedThrough));
    }
    if (rows->u64("halted") != 0) why.emplace_back("the source is halted");
    if (rows->u64("paused") != 0) why.emplace_back("the source is paused");
    if (guard_.lease) {
      const LeaseGuard& lease = *guard_.lease;
      if (rows->isNull("holder_id")) {
        why.emplace_back("the source has no lease row");
      } else if (rows->text("holder_id") != lease.holder || rows->u64("lease_epoch") != lease.leaseEpoch) {
        why.push_back(fmt::format("the lease is {}'s at lease epoch {} (this session's: {}'s at {})",
                                  rows->text("holder_id"), rows->text("lease_epoch"), lease.holder, lease.leaseEpoch));
      } else if (!rows->isNull("expires_in_ms") && rows->text("expires_in_ms").front() == '-') {
        why.push_back(fmt::format("the lease expired {} ms ago", rows->text("expires_in_ms").substr(1)));
      }
    }
  }
  if (why.empty()) why.emplace_back("none of its conditions fails now (they held no longer when it ran)");
  return Status::transient(fmt::format("the batch's claim matched no state row: {}", fmt::join(why, "; ")));
}

Status MysqlOutboxStore::assign(std::vector<OutboxRow>& rows, uint64_t expectedAssignedThrough, const ScanMark& mark) {
  if (rows.empty()) return saveScan(mark);
  // The versions follow id order. The outbox rows are not touched.
  const bool folded = rows.size() <= kFoldedCheckRows;
  std::string pairs, ids;
  pairs.reserve(rows.size() * 24);
  ids.reserve(rows.size() * 12);
  uint64_t v = expectedAssignedThrough;
  for (const auto& r : rows) {
    const bool first = ids.empty();
    ++v;
    if (folded && first) {
      fmt::format_to(std::back_inserter(pairs), "SELECT {} AS version, {} AS outbox_id", v, r.id);
    } else if (folded) {
      fmt::format_to(std::back_inserter(pairs), " UNION ALL SELECT {}, {}", v, r.id);
    } else {
      fmt::format_to(std::back_inserter(pairs), "{}({},{})", first ? "" : ",", v, r.id);
    }
    fmt::format_to(std::back_inserter(ids), "{}{}", first ? "" : ",", r.id);
  }
  // A quarantine takes the state row's lock first too, so it committed before the claim below or
  // waits for this transaction: a locking read after the claim sees what it wrote (a plain one at
  // READ COMMITTED or a snapshot may not). One of the two wins, never both. A large batch reads
  // the quarantine, then inserts one VALUES list; a small one (a trickle's row) checks in its
  // INSERT ... SELECT, which reads the quarantine with shared locks too (and no earlier read of
  // the transaction fixed a snapshot): all of it or none of it is inserted.
  // Rows with consecutive ids (a backlog's batch) are all the ids between the first and the last:
  // the list would add nothing but a thousand values to parse.
  const bool consecutive = rows.back().id - rows.front().id + 1 == rows.size();
  const std::string quarantined = fmt::format(
      "outbox_quarantine WHERE source = {} AND outbox_id BETWEEN {} AND {}{}", sourceLiteral_, rows.front().id,
      rows.back().id, consecutive ? "" : fmt::format(" AND outbox_id IN ({})", ids));
  // One row (a trickle's batch) selects its pair FROM DUAL: a derived table of one row cost MariaDB
  // 80 us more a row to plan and fill (docs/design.md, "Cost per row").
  std::string insert;
  if (!folded) {
    insert = fmt::format("INSERT INTO {} (version, outbox_id) VALUES {}", versions_, pairs);
  } else if (rows.size() == 1) {
    insert = fmt::format(
        "INSERT INTO {} (version, outbox_id) SELECT {}, {} FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM {})", versions_,
        expectedAssignedThrough + 1, rows.front().id, quarantined);
  } else {
    insert = fmt::format("INSERT INTO {} (version, outbox_id) SELECT * FROM ({}) v WHERE NOT EXISTS (SELECT 1 FROM {})",
                         versions_, pairs, quarantined);
  }
  Status s = session_->transaction(
      [&](db::Connection& conn) -> Status {
        const std::string claim = guardedStateUpdate(
            conn,
            fmt::format("s.assigned_through = s.assigned_through + {}, s.scan_cursor = {}, s.scan_floor = {}{}",
                        rows.size(), mark.cursor, mark.floor, publishedAssignments(mark.published)),
            fmt::format("s.assigned_through = {} AND s.halted_reason IS NULL AND s.paused = 0",
                        expectedAssignedThrough));
        auto refuseQuarantined = [&]() -> Status {
          auto row = conn.queryU64(fmt::format("SELECT MIN(outbox_id) FROM {} LOCK IN SHARE MODE", quarantined));
          if (!row.isOk()) return row.status();
          if (!row->has_value()) return Status::ok();
          // Quarantined after the read, or ahead of it by an operator in this session (a read above
          // the highest quarantined id leaves the quarantine out, readNew).
          return Status::transient(
                     fmt::format("row {} was quarantined, ahead of the scan or since its read: scanning again", **row))
              .because(Cause::kScanAgain);
        };
        Result<uint64_t> inserted = uint64_t{0};
        bool sentAsOne = false;
        Status refusedAsOne;  // several statements in one, refused (maybe: ok when not)
        if (folded && !oneStatementAtATime_) {
          // The claim and the INSERT in one round trip (a trickle's batch), the transaction begun by
          // the claim on a connection lent for transactions (autocommit off: no START TRANSACTION,
          // a statement a batch less), else by a START TRANSACTION sent with them. An INSERT after a
          // claim that matched nothing is undone by the rollback that follows: the state row's lock
          // orders it after the writer that moved the row, whose versions it can then only collide with.
          const size_t first = conn.autocommit() ? 1 : 0;  // the claim's place among the statements
          db::Connection::Counts counts = conn.execCounts(
              fmt::format("{}{}; {}", first == 1 ? "START TRANSACTION; " : "", claim, insert));
          if (counts.matched.empty() && !counts.status.isTransient()) {
            // Nothing ran, and not for a lost connection, a lock or a deadlock: the server, or a
            // proxy before it (ProxySQL can be set to), will not take several statements in one, or
            // the claim, sent first, was refused for a reason of its own. This batch goes one
            // statement at a time; a claim then answered, batch after batch, says it was the former
            // (below).
            refusedAsOne = counts.status;
          } else if (counts.matched.size() < first + 1) {
            return counts.status.isOk() ? Status::permanent("the assign's statements were not all answered")
                                        : counts.status;
          } else {
            sentAsOne = true;
            refusedAsOneInARow_ = 0;
            if (counts.matched[first] != 1) return lostClaim(conn, expectedAssignedThrough);
            if (counts.matched.size() > first + 1) {
              inserted = counts.matched[first + 1];
            } else {
              inserted = counts.status.isOk() ? Status::permanent("the assign's INSERT was not answered") : counts.status;
            }
          }
        }
        if (!sentAsOne) {
          // Begun by the session, or by the claim on a connection with autocommit off; else here
          // (the claim must not commit alone).
          if (conn.autocommit() && !conn.inTransaction()) OUTBOX_RETURN_IF_ERROR(conn.begin());
          auto claimed = conn.execCount(claim);
          if (!claimed.isOk()) return claimed.status();
          if (!refusedAsOne.isOk() && ++refusedAsOneInARow_ == kRefusalsBeforeOneAtATime) {
            spdlog::warn("source {}: the database would not take several statements in one ({}): the assign sends "
                         "them one at a time",
                         source_.name, refusedAsOne.message());
            oneStatementAtATime_ = true;
          }
          if (*claimed != 1) return lostClaim(conn, expectedAssignedThrough);
          if (!folded) OUTBOX_RETURN_IF_ERROR(refuseQuarantined());
          inserted = conn.execCount(insert);
        }
        if (!inserted.isOk() && mark.leanRead && inserted.status().cause() == Cause::kDuplicateKey) {
          // Read without the versions (readNew): a row of the batch may have one (scan again), or
          // the state row and the versions disagree (a version taken twice: the error stands).
          auto versioned =
              conn.queryU64(fmt::format("SELECT COUNT(*) FROM {} WHERE outbox_id IN ({})", versions_, ids));
          if (versioned.isOk() && versioned->value_or(0) > 0) {
            return Status::transient(fmt::format("{} row(s) of the batch have a version already; scanning again",
                                                 versioned->value_or(0)))
                .because(Cause::kScanAgain);
          }
        }
        if (!inserted.isOk()) return inserted.status();
        if (*inserted != rows.size()) {
          OUTBOX_RETURN_IF_ERROR(refuseQuarantined());  // names the row
          return Status::transient(fmt::format("{} of {} versions inserted; scanning again", *inserted, rows.size()))
              .because(Cause::kScanAgain);
        }
        return recordPins(conn, mark);
      },
      folded && !oneStatementAtATime_ ? db::Session::Begin::kByFn : db::Session::Begin::kBySession);
  if (!s.isOk()) {
    // The next read is a whole one (readNew): this store's, and a scan's on another store reads
    // in the next session (a failed batch ends the session; setWriteGuard resets it there).
    leanThrough_.reset();
    return s;
  }
  if (marks_ != nullptr && mark.published.version != 0) marks_->carried(source_.name, mark.published.version);
  v = expectedAssignedThrough;
  for (auto& r : rows) r.version = ++v;
  return Status::ok();
}

void MysqlOutboxStore::offerMark(const PublishedMark& mark) {
  if (marks_ != nullptr) marks_->offer(source_.name, guard_, mark);
}

Status MysqlOutboxStore::markPublished(uint64_t version, uint64_t seq) {
  if (marks_ != nullptr && guard_.lease) {
    marks_->offer(source_.name, guard_, PublishedMark{version, seq});
    if (marks_->write(source_.name).isOk()) return Status::ok();
    // Another source's row may be what failed it (a lock held long): this source's mark alone.
  }
  Status s = session_->run([&](db::Connection& conn) {
    return conn.exec(
        guardedStateUpdate(conn, fmt::format("s.published_through = {}, s.published_stream_seq = {}", version, seq),
                           fmt::format("s.published_through < {}", version)));
  });
  if (s.isOk() && marks_ != nullptr) marks_->carried(source_.name, version);
  return s;
}

Status MysqlOutboxStore::setPublished(uint64_t version, uint64_t seq) {
  return guardedStateWrite(fmt::format("s.published_through = {}, s.published_stream_seq = {}", version, seq), "",
                           "setting the published marks");
}

}  // namespace outbox

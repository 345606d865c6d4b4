// MysqlOutboxStore's reads of the open holes (docs/design.md, "Contract v2" and "Holes that
// cannot be proven closed"): the late rows they hold, and the locking probes that find them dead.
#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "relay/id_ranges_sql.h"
#include "relay/mysql_store.h"

namespace outbox {

using sql::inRanges;
using sql::kUnresolved;
using sql::without;

namespace {
// A probe looks at no more than this many uncommitted rows in one statement (a transaction holding more
// keeps the rest of its ranges open until a later probe).
constexpr size_t kProbeRows = 100'000;
// Locking probes one unheld() may spend on halving statements that met a held row, and on ids
// between two held rows.
constexpr int kLockProbeBudget = 64;
// Ids between two held rows are probed one by one when there are at most this many.
constexpr uint64_t kPointProbeMost = 4;
}  // namespace

Result<std::vector<ScannedRow>> MysqlOutboxStore::readRanges(const std::vector<IdRange>& ranges, int limit) {
  if (ranges.empty() || limit <= 0) return std::vector<ScannedRow>{};
  std::vector<IdRange> exact, spans;
  for (const IdRange& r : ranges) (r.span ? spans : exact).push_back(r);
  // A span's rows with a version are published ones: only the others are read (a range scan of
  // its rows, each looked up in the versions' unique key). The exact ranges and the spans are
  // parts of one statement, each in id order: in one WHERE each row of a span is held against
  // every exact range (500 of them made it ten times dearer), and an outer ORDER BY would sort
  // the two through a temporary table. The parts are merged here.
  // Each part holds at most a statement chunk's ranges: past MariaDB's optimizer_max_sel_arg_weight
  // (32,000) ranges in one WHERE, its plan falls to a scan of the whole index (40,000 one-id holes:
  // 17 s a poll, against 0.6 s as 40 parts).
  std::vector<std::string> parts;
  for (const auto& chunk : statementChunks(exact)) parts.push_back(scannedRowsQuery(inRanges("o.id", chunk)));
  for (const auto& chunk : statementChunks(spans)) {
    parts.push_back(scannedRowsQuery(fmt::format("{} AND {}", inRanges("o.id", chunk), kUnresolved)));
  }
  std::string sql;
  for (const std::string& part : parts) {
    sql += fmt::format("{}({} LIMIT {})", sql.empty() ? "" : " UNION ALL ", part, limit);
  }
  auto rows = queryRows(sql);
  if (!rows.isOk()) return rows.status();
  std::vector<ScannedRow> out = scannedRows(*rows);
  // Runs in id order (disjoint ranges): the first `limit` of them, in id order.
  std::sort(out.begin(), out.end(), [](const ScannedRow& a, const ScannedRow& b) { return a.row.id < b.row.id; });
  if (out.size() > static_cast<size_t>(limit)) out.resize(static_cast<size_t>(limit));
  return out;
}

Result<std::vector<IdRange>> MysqlOutboxStore::unheld(const std::vector<IdRange>& ranges) {
  std::vector<IdRange> out, exact, spans;
  for (const IdRange& r : ranges) (r.span ? spans : exact).push_back(r);
  int budget = kLockProbeBudget;
  OUTBOX_RETURN_IF_ERROR(probeSpans(spans, budget, out));
  for (const auto& chunk : statementChunks(exact)) {
    if (budget <= 0) break;
    // First a plain read at READ UNCOMMITTED (no locks) of the ids that hold a row, committed or
    // not: those stay open without a probe.
    auto rows = queryRows(
        fmt::format("SELECT id FROM {} WHERE {} ORDER BY id LIMIT {}", table_, inRanges("id", chunk), kProbeRows),
        "READ UNCOMMITTED");
    if (!rows.isOk()) return rows.status();
    std::vector<uint64_t> present;
    const size_t id = rows->index("id");
    while (rows->next()) present.push_back(rows->u64(id));
    // Then the locking probe (docs/design.md, "Contract v2") of the ranges between them: it also
    // finds a row an open transaction has deleted and may still restore (ROLLBACK TO SAVEPOINT),
    // which the read above does not show. A locking range read at READ COMMITTED also locks the row
    // just past the range in the direction it reads, so a range with a held row above it is read
    // downwards, one with a held row below it upwards, and one between two held rows waits for one
    // of them to end (docs/design.md).
    auto held = [&](uint64_t id) { return std::binary_search(present.begin(), present.end(), id); };
    std::vector<IdRange> up, down, between;
    for (IdRange r : without(chunk, present)) {
      if (present.size() == kProbeRows) {  // past the last id read, unknown: stays open
        if (r.first > present.back()) break;
        r.last = std::min(r.last, present.back());
      }
      const bool heldAbove = held(r.last + 1);
      const bool heldBelow = r.first > 0 && held(r.first - 1);
      if (heldAbove && heldBelow) {
        // A lookup of one id (`id = N`) locks no neighbour: a few ids are probed one by one.
        if (r.size() <= kPointProbeMost) {
          for (uint64_t id = r.first; id <= r.last; ++id) between.push_back(IdRange{id, id});
        }
        continue;
      }
      (heldAbove ? down : up).push_back(r);
    }
    OUTBOX_RETURN_IF_ERROR(probeDead(up, /*downwards=*/false, budget, out));
    OUTBOX_RETURN_IF_ERROR(probeDead(down, /*downwards=*/true, budget, out));
    for (const IdRange& id : between) {
      if (budget-- <= 0) break;
      auto nothing = lockFree(rangesProbe({id}, /*downwards=*/false));
      if (!nothing.isOk()) return nothing.status();
      if (*nothing) out.push_back(id);
    }
  }
  std::sort(out.begin(), out.end(), [](const IdRange& a, const IdRange& b) { return a.first < b.first; });
  return out;
}

Status MysqlOutboxStore::probeDead(const std::vector<IdRange>& ranges, bool downwards, int& budget,
                                   std::vector<IdRange>& dead) {
  for (const auto& some : statementChunks(ranges)) {
    // A statement that meets a held row leaves all its ranges open: halves are tried while the
    // budget lasts, so one held row costs a few statements, and thousands cost no more.
    std::function<Status(const std::vector<IdRange>&)> probe = [&](const std::vector<IdRange>& part) -> Status {
      if (budget <= 0) return Status::ok();
      --budget;
      auto nothing = lockFree(rangesProbe(part, downwards));
      if (!nothing.isOk()) return nothing.status();
      if (*nothing) {
        dead.insert(dead.end(), part.begin(), part.end());
        return Status::ok();
      }
      if (part.size() == 1) return Status::ok();
      const auto half = part.begin() + static_cast<long>(part.size() / 2);
      OUTBOX_RETURN_IF_ERROR(probe(std::vector<IdRange>(part.begin(), half)));
      return probe(std::vector<IdRange>(half, part.end()));
    };
    OUTBOX_RETURN_IF_ERROR(probe(some));
  }
  return Status::ok();
}

Status MysqlOutboxStore::probeSpans(const std::vector<IdRange>& spans, int& budget, std::vector<IdRange>& dead) {
  // Section 3a's probe over a span: a locking read at READ COMMITTED of its rows with no version
  // and no quarantine. It locks (and so meets the lock of) every row of the span it passes, held
  // by an open transaction, deleted by one that may restore it, or committed; it returns the
  // committed ones without a version (late rows: the span lives until they are versioned). No
  // row and no lock error: none of its open ids can ever hold a row. Like a range probe it also
  // locks the row just past the span in the direction it reads, so a span that meets a lock is
  // read the other way, then halved while the budget lasts: an open transaction's row inside a
  // span of a million published rows keeps a few ids around it open, not the span.
  std::function<Status(IdRange)> probe = [&](IdRange span) -> Status {
    for (bool downwards : {false, true}) {
      if (budget <= 0) return Status::ok();
      --budget;
      auto nothing = lockFree(fmt::format(
          "SELECT o.id FROM {} o LEFT JOIN {} v ON v.outbox_id = o.id LEFT JOIN outbox_quarantine q ON q.source = {} "
          "AND q.outbox_id = o.id WHERE o.id BETWEEN {} AND {} AND {} ORDER BY o.id {} LIMIT 1",
          table_, versions_, sourceLiteral_, span.first, span.last, kUnresolved, downwards ? "DESC" : "ASC"));
      if (!nothing.isOk()) return nothing.status();
      if (*nothing) {
        dead.push_back(span);
        return Status::ok();
      }
    }
    if (span.size() == 1) return Status::ok();
    const uint64_t middle = span.first + (span.last - span.first) / 2;
    OUTBOX_RETURN_IF_ERROR(probe(IdRange{span.first, middle, true}));
    return probe(IdRange{middle + 1, span.last, true});
  };
  for (const IdRange& span : spans) OUTBOX_RETURN_IF_ERROR(probe(span));
  return Status::ok();
}

Result<bool> MysqlOutboxStore::spanClear(const IdRange& span) {
  int budget = 2;  // upwards, then downwards (the row just past its end may be locked): never halved
  std::vector<IdRange> clear;
  OUTBOX_RETURN_IF_ERROR(probeSpans({span}, budget, clear));
  return clear.size() == 1 && clear.front() == span;
}

std::string MysqlOutboxStore::rangesProbe(const std::vector<IdRange>& ranges, bool downwards) const {
  return fmt::format("SELECT id FROM {} WHERE {} ORDER BY id {}", table_, inRanges("id", ranges),
                     downwards ? "DESC" : "ASC");
}

Result<bool> MysqlOutboxStore::lockFree(const std::string& select) {
  return session_->run([&](db::Connection& conn) -> Result<bool> {
    OUTBOX_RETURN_IF_ERROR(conn.exec("SET TRANSACTION ISOLATION LEVEL READ COMMITTED"));
    OUTBOX_RETURN_IF_ERROR(conn.begin());
    auto rows = conn.query(select + (mysql_ ? " FOR SHARE NOWAIT" : " LOCK IN SHARE MODE NOWAIT"));
    if (!rows.isOk()) {
      conn.rollback();
      // A deadlock too: the probe's shared lock on a row it read can be what a holder waits for.
      // (MariaDB reports a NOWAIT conflict as a lock wait timeout, MySQL as ER_LOCK_NOWAIT.)
      if (rows.status().isLockConflict()) return false;
      return rows.status();
    }
    const bool nothing = !rows->next();
    OUTBOX_RETURN_IF_ERROR(conn.commit());
    return nothing;
  });
}

}  // namespace outbox

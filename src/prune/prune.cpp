#include "prune/prune.h"

#include <algorithm>

#include <fmt/format.h>

#include "db/connection.h"

namespace outbox {

uint64_t pruneStep(uint64_t last, std::chrono::duration<double, std::milli> took, uint64_t most) {
  const double ratio = kPruneTransactionTarget.count() / std::max(took.count(), 1.0);
  // Halve at most when slow, grow by half at most when fast: one odd transaction (a checkpoint,
  // a neighbour's burst) should not swing the size far either way.
  const double next = static_cast<double>(last) * std::clamp(ratio, 0.5, 1.5);
  return std::clamp<uint64_t>(static_cast<uint64_t>(next), std::min<uint64_t>(100, most), most);
}

Result<PruneReport> pruneSource(const SourceConfig& source, const PruneOptions& options) {
  auto begin = std::chrono::steady_clock::now();
  auto opened = db::Connection::open(db::paramsFrom(source.dsn));
  if (!opened.isOk()) return opened.status();
  db::Connection& conn = **opened;
  const std::string table = "`" + source.outboxTable + "`";
  const std::string versions = "`" + source.outboxTable + "_versions`";
  PruneReport report;

  OUTBOX_RETURN_IF_ERROR(conn.exec("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"));
  const std::string lockName =
      conn.quote(fmt::format("outbox-prune:{}.{}", source.dsn.database, source.name).substr(0, 64));
  auto locked = conn.queryU64(fmt::format("SELECT GET_LOCK({}, {})", lockName, options.lockWait.count()));
  if (!locked.isOk()) return locked.status();
  if (locked->value_or(0) != 1) {
    report.skipped = true;
    return report;
  }

  auto state = conn.queryU64(fmt::format("SELECT published_through FROM outbox_source_state WHERE source = {}",
                                         conn.quote(source.name)));
  if (!state.isOk()) return state.status();
  if (!state->has_value()) {
    return Status::permanent(fmt::format("source {} has no state row (run migrate)", source.name));
  }
  report.publishedThrough = **state;
  const std::string cutoff = fmt::format("NOW(6) - INTERVAL {} MICROSECOND", options.keep.count() * 1000);

  // The range to walk: from the lowest version in the table to the highest published one that
  // is old enough. Plain reads: no locks.
  auto bounds = conn.query(fmt::format(
      "SELECT (SELECT MIN(version) FROM {0}) AS lowest, "
      "(SELECT v.version FROM {0} v JOIN {1} o ON o.id = v.outbox_id WHERE v.version <= {2} AND o.created_at < {3} "
      " ORDER BY v.version DESC LIMIT 1) AS highest, {3} AS cutoff",
      versions, table, report.publishedThrough, cutoff));
  if (!bounds.isOk()) return bounds.status();
  bounds->next();
  const uint64_t low = bounds->optU64("lowest").value_or(0);
  const uint64_t high = bounds->optU64("highest").value_or(0);
  const std::string fixedCutoff = conn.quote(bounds->text("cutoff"));  // the same cutoff for every batch

  if (high >= low && high > 0) {
    if (options.dryRun) {
      auto count = conn.queryU64(fmt::format(
          "SELECT COUNT(*) FROM {} v JOIN {} o ON o.id = v.outbox_id WHERE v.version BETWEEN {} AND {} AND "
          "o.created_at < {}",
          versions, table, low, high, fixedCutoff));
      if (!count.isOk()) return count.status();
      report.deleted = count->value_or(0);
    } else {
      const uint64_t most = static_cast<uint64_t>(std::max(1, options.batch));
      uint64_t step = std::min<uint64_t>(1000, most);  // a first guess; pruneStep sizes the rest
      auto lastProgress = std::chrono::steady_clock::now();
      for (uint64_t from = low; from <= high;) {
        const uint64_t to = std::min(high, from + step - 1);
        auto started = std::chrono::steady_clock::now();
        // Each row with its version, in one statement: the count is of both tables' rows. The
        // mark is read again by each: a reconcile may have lowered it since (a stream that lost
        // its tail), and the rows above it are needed to publish that tail again.
        auto deleted = conn.execCount(fmt::format(
            "DELETE o, v FROM {} v STRAIGHT_JOIN {} o ON o.id = v.outbox_id WHERE v.version BETWEEN {} AND {} AND "
            "v.version <= (SELECT published_through FROM outbox_source_state WHERE source = {}) AND o.created_at < {}",
            versions, table, from, to, conn.quote(source.name), fixedCutoff));
        if (!deleted.isOk()) return deleted.status();
        *deleted /= 2;
        auto now = std::chrono::steady_clock::now();
        const std::chrono::duration<double, std::milli> took = now - started;
        report.longestTransactionMs = std::max(report.longestTransactionMs, took.count());
        report.deleted += *deleted;
        step = pruneStep(to - from + 1, took, most);
        from = to + 1;
        if (options.progress && now - lastProgress > std::chrono::milliseconds(500)) {
          options.progress(report.deleted);
          lastProgress = now;
        }
      }
    }
  }

  auto oldest = conn.query(fmt::format(
      "SELECT o.id, v.version, o.created_at FROM {} o LEFT JOIN {} v ON v.outbox_id = o.id ORDER BY o.id LIMIT 1",
      table, versions));
  if (!oldest.isOk()) return oldest.status();
  if (oldest->next()) {
    report.oldestKept = fmt::format("id {}, version {}, created_at {}", oldest->text("id"),
                                    oldest->optText("version").value_or("none yet"), oldest->text("created_at"));
  } else {
    report.oldestKept = "none";
  }
  (void)conn.exec(fmt::format("DO RELEASE_LOCK({})", lockName));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return report;
}

}  // namespace outbox

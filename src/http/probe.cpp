#include "http/probe.h"

#include <algorithm>

#include <fmt/format.h>

#include "db/open_transactions.h"

namespace outbox {

namespace {
// Rows above scan_floor examined per scrape: counting a huge backlog exactly on every scrape would
// cost more than it tells.
constexpr uint64_t kPendingScanRows = 1'000'000;
}

db::ConnectParams SourceProbe::connectParams(const SourceConfig& source) {
  db::ConnectParams params = db::paramsFrom(source.dsn);
  params.connectTimeout = std::chrono::seconds(2);
  params.readTimeout = std::chrono::seconds(5);
  return params;
}

SourceProbe::SourceProbe(const SourceConfig& source, std::chrono::milliseconds maxAge)
    : source_(source), maxAge_(maxAge), session_(connectParams(source)) {}

SourceProbe::SourceProbe(const SourceConfig& source, db::ConnectionPools& pools, std::chrono::milliseconds maxAge)
    : source_(source),
      maxAge_(maxAge),
      session_(pools.forServer(connectParams(source)), source.dsn.database) {}

SourceProbeResult SourceProbe::get() {
  {
    std::lock_guard lock(mu_);
    auto now = std::chrono::steady_clock::now();
    const bool cached = cachedAt_.time_since_epoch().count() != 0;
    if (cached && now - cachedAt_ < maxAge_) return cached_;
    // Another thread is asking the database: the last answer will do meanwhile, unless an admin
    // action made it wrong.
    if (cached && refreshing_ && invalidations_ == answeredInvalidations_) return cached_;
    refreshing_ = true;
  }
  std::lock_guard queryLock(queryMu_);
  uint64_t invalidations = 0;
  {
    std::lock_guard lock(mu_);
    invalidations = invalidations_;
  }
  const auto askedAt = std::chrono::steady_clock::now();
  SourceProbeResult fresh = query();
  std::lock_guard lock(mu_);
  cached_ = fresh;
  // An answer that an invalidate() overtook is not fresh: the next get() asks again.
  cachedAt_ = invalidations == invalidations_ ? askedAt : std::chrono::steady_clock::time_point{};
  answeredInvalidations_ = invalidations;
  refreshing_ = false;
  return fresh;
}

void SourceProbe::invalidate() {
  std::lock_guard lock(mu_);
  cachedAt_ = {};
  ++invalidations_;
}

Result<std::vector<Candidate>> SourceProbe::candidates() {
  std::lock_guard lock(queryMu_);
  return session_.run([&](db::Connection& c) -> Result<std::vector<Candidate>> {
    auto rows = c.query(fmt::format(
        "SELECT c.holder_id, (SELECT COUNT(*) FROM outbox_bridge_lease l WHERE l.holder_id = c.holder_id AND "
        "l.expires_at > NOW(6)) AS leads FROM outbox_bridge_candidate c WHERE c.source = {} AND c.expires_at > NOW(6) "
        "ORDER BY c.holder_id",
        c.quote(source_.name)));
    std::vector<Candidate> out;
    if (!rows.isOk()) {
      return rows.status().cause() == Cause::kMissingTable ? Result<std::vector<Candidate>>(out) : rows.status();
    }
    const size_t holder = rows->index("holder_id"), leads = rows->index("leads");
    while (rows->next()) {
      out.push_back(Candidate{std::string(rows->text(holder)), static_cast<int64_t>(rows->u64(leads))});
    }
    return out;
  });
}

SourceProbeResult SourceProbe::query() {
  SourceProbeResult r;
  db::Session::Hold hold(session_);  // one connection for the answer's reads
  auto conn = session_.connection();
  if (!conn.isOk()) {
    r.error = fmt::format("database of source {} is not reachable", source_.name);
    return r;
  }
  const std::string table = "`" + source_.outboxTable + "`";
  const std::string versions = "`" + source_.outboxTable + "_versions`";
  const std::string source = (*conn)->quote(source_.name);
  // Not yet in the stream: rows assigned a version above published_through, and rows without a
  // version above scan_floor (a poison row, a late row, rows the scan has not reached), counted
  // over at most kPendingScanRows rows so a floor held back by a long transaction costs a scrape
  // little. The oldest of them is the first of either kind.
  auto state = session_.run([&](db::Connection& c) { return c.query(fmt::format(
      "SELECT s.epoch, s.assigned_through, s.published_through, s.halted_reason, "
      "COALESCE(s.scan_floor, 0) AS floor_id, "
      "(SELECT TIMESTAMPDIFF(MICROSECOND, o.created_at, NOW(6)) FROM {0} v JOIN {1} o ON o.id = v.outbox_id "
      " WHERE v.version = s.published_through + 1) AS oldest_assigned_micros, "
      "s.paused, l.holder_id, l.lease_epoch, TIMESTAMPDIFF(MICROSECOND, NOW(6), l.expires_at) AS expires_micros, "
      "s.halted_row_id "
      "FROM outbox_source_state s LEFT JOIN outbox_bridge_lease l ON l.source = s.source WHERE s.source = {2}",
      versions, table, source)); });
  if (!state.isOk()) {
    r.error = state.status().isTransient()
                  ? fmt::format("database of source {} is not reachable", source_.name)
                  : fmt::format("the tables of source {} are missing (run migrate)", source_.name);
    return r;
  }
  r.reachable = true;
  if (!state->next()) {
    r.error = fmt::format("source {} has no state row yet (run migrate)", source_.name);
    r.reachable = false;
    return r;
  }
  r.epoch = state->u64("epoch");
  r.assignedThrough = state->u64("assigned_through");
  r.publishedThrough = state->u64("published_through");
  r.haltedReason = std::string(state->text("halted_reason"));
  const uint64_t floor = state->u64("floor_id");
  const uint64_t oldestAssigned = state->u64("oldest_assigned_micros");  // NULL reads as 0
  r.paused = state->u64("paused") != 0;
  r.leaseHolder = std::string(state->text("holder_id"));
  r.leaseEpoch = state->u64("lease_epoch");
  if (auto expires = state->optText("expires_micros")) {
    r.leaseExpiresInSeconds = std::strtod(std::string(*expires).c_str(), nullptr) / 1e6;
  }
  r.haltedRowId = state->optU64("halted_row_id");
  auto pending = session_.run([&](db::Connection& c) { return c.query(fmt::format(
      "SELECT COUNT(*) AS pending_rows, "
      "COALESCE(MAX(TIMESTAMPDIFF(MICROSECOND, p.created_at, NOW(6))), 0) AS oldest_micros FROM "
      "(SELECT o.id, o.created_at, v.version FROM {0} o LEFT JOIN {1} v ON v.outbox_id = o.id WHERE o.id > {2} "
      " ORDER BY o.id LIMIT {3}) p "
      "WHERE p.version IS NULL AND NOT EXISTS (SELECT 1 FROM outbox_quarantine q WHERE q.source = {4} AND "
      "q.outbox_id = p.id)",
      table, versions, floor, kPendingScanRows, source)); });
  if (!pending.isOk() || !pending->next()) {
    r.error = fmt::format("database of source {} is not reachable", source_.name);
    r.reachable = false;
    return r;
  }
  // Holes kept open for a while (none on a healthy source): which, and who may hold them. The
  // table is missing before migrate 008: nothing to say then.
  auto holes = session_.run([&](db::Connection& c) {
    return c.query(fmt::format(
        "SELECT first_id, last_id FROM outbox_scan_holes WHERE source = {} ORDER BY first_id LIMIT 10", source));
  });
  if (holes.isOk()) {
    const size_t first = holes->index("first_id"), last = holes->index("last_id");
    while (holes->next()) r.recordedHoles.emplace_back(holes->u64(first), holes->u64(last));
  }
  if (!r.recordedHoles.empty()) {
    auto open = session_.run([&](db::Connection& c) { return db::openTransactions(c, std::chrono::seconds(5), 5); });
    r.heldBy = open.isOk() ? open->describe() : std::string();
    if (r.heldBy.empty()) {
      r.heldBy = "no transaction open 5 s or more: a statement that began before the ids were found";
    }
  }
  uint64_t assignedNotPublished = r.assignedThrough > r.publishedThrough ? r.assignedThrough - r.publishedThrough : 0;
  r.pendingRows = pending->u64("pending_rows") + assignedNotPublished;
  r.oldestPendingSeconds = static_cast<double>(std::max(pending->u64("oldest_micros"), oldestAssigned)) / 1e6;
  return r;
}

}  // namespace outbox

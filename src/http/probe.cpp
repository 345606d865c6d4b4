#include "http/probe.h"

#include <algorithm>

#include <fmt/format.h>

namespace outbox {

namespace {
// Counting a huge backlog exactly on every scrape would cost more than it tells.
constexpr uint64_t kPendingCountCap = 10'000'000;
}

SourceProbeResult SourceProbe::get() {
  std::lock_guard lock(mu_);
  auto now = std::chrono::steady_clock::now();
  if (cachedAt_.time_since_epoch().count() != 0 && now - cachedAt_ < maxAge_) return cached_;
  cached_ = query();
  cachedAt_ = now;
  return cached_;
}

void SourceProbe::invalidate() {
  std::lock_guard lock(mu_);
  cachedAt_ = {};
}

SourceProbeResult SourceProbe::query() {
  SourceProbeResult r;
  if (!conn_) {
    db::ConnectParams params = db::paramsFrom(source_.dsn);
    params.connectTimeout = std::chrono::seconds(2);
    params.readTimeout = std::chrono::seconds(5);
    auto opened = db::Connection::open(params);
    if (!opened.isOk()) {
      r.error = fmt::format("database of source {} is not reachable", source_.name);
      return r;
    }
    conn_ = std::move(opened).value();
  }
  const std::string table = "`" + source_.outboxTable + "`";
  const std::string source = conn_->quote(source_.name);
  // Not yet in the stream: rows with no version (but not quarantined), and rows assigned a
  // version above published_through. The oldest of them is the first of either kind.
  auto state = conn_->query(fmt::format(
      "SELECT s.epoch, s.assigned_through, s.published_through, s.halted_reason, "
      "(SELECT COUNT(*) FROM (SELECT 1 FROM {0} FORCE INDEX (idx_pending) WHERE version IS NULL LIMIT {1}) p), "
      "(SELECT COUNT(*) FROM outbox_quarantine WHERE source = {2}), "
      "(SELECT TIMESTAMPDIFF(MICROSECOND, created_at, NOW(6)) FROM {0} FORCE INDEX (idx_pending) WHERE version IS NULL "
      " AND NOT EXISTS (SELECT 1 FROM outbox_quarantine q WHERE q.source = {2} AND q.outbox_id = {0}.id) "
      " ORDER BY id LIMIT 1), "
      "(SELECT TIMESTAMPDIFF(MICROSECOND, created_at, NOW(6)) FROM {0} WHERE version = s.published_through + 1), "
      "s.paused, l.holder_id, l.lease_epoch, TIMESTAMPDIFF(MICROSECOND, NOW(6), l.expires_at) "
      "FROM outbox_source_state s LEFT JOIN outbox_bridge_lease l ON l.source = s.source WHERE s.source = {2}",
      table, kPendingCountCap, source));
  if (!state.isOk()) {
    conn_.reset();
    r.error = state.status().isTransient() ? fmt::format("database of source {} is not reachable", source_.name)
                                           : fmt::format("the tables of source {} are missing (run migrate)", source_.name);
    return r;
  }
  r.reachable = true;
  if (!state->next()) {
    r.error = fmt::format("source {} has no state row yet (run migrate)", source_.name);
    r.reachable = false;
    return r;
  }
  r.epoch = state->u64(0);
  r.assignedThrough = state->u64(1);
  r.publishedThrough = state->u64(2);
  r.haltedReason = std::string(state->text(3));
  uint64_t pending = state->u64(4), quarantined = state->u64(5);
  uint64_t assignedNotPublished = r.assignedThrough > r.publishedThrough ? r.assignedThrough - r.publishedThrough : 0;
  r.pendingRows = (pending > quarantined ? pending - quarantined : 0) + assignedNotPublished;
  uint64_t oldestMicros = std::max(state->u64(6), state->u64(7));  // NULL reads as 0
  r.oldestPendingSeconds = static_cast<double>(oldestMicros) / 1e6;
  r.paused = state->u64(8) != 0;
  r.leaseHolder = std::string(state->text(9));
  r.leaseEpoch = state->u64(10);
  if (auto expires = state->optText(11)) r.leaseExpiresInSeconds = std::strtod(std::string(*expires).c_str(), nullptr) / 1e6;
  return r;
}

}  // namespace outbox

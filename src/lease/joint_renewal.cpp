#include "lease/joint_renewal.h"

#include <algorithm>
#include <map>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/log.h"
#include "lease/lease.h"

namespace outbox {

namespace {
constexpr uint64_t kSweepEvery = 64;  // rounds between sweeps of candidacies dead for an hour
}

JointRenewal::JointRenewal(db::ConnectionPool& pool, std::string database, std::chrono::milliseconds fresh,
                           std::chrono::milliseconds gather)
    : session_(pool, std::move(database)), fresh_(fresh), gather_(gather) {}

uint64_t JointRenewal::rounds() const {
  std::lock_guard lock(mu_);
  return rounds_;
}

uint64_t JointRenewal::renewed() const {
  std::lock_guard lock(mu_);
  return renewed_;
}

Result<bool> JointRenewal::renew(const std::string& source, const std::string& holder, uint64_t leaseEpoch,
                                 std::chrono::milliseconds ttl) {
  Member me{source, holder, leaseEpoch, ttl};
  std::unique_lock lock(mu_);
  // The candidate table missing or not granted: every round would fail; the sources renew alone
  // (as renewHeld does without it) until a later look finds it.
  if (offUntil_ && std::chrono::steady_clock::now() < *offUntil_) return false;
  gathering_.push_back(&me);
  if (gatherOpen_) {
    // A round is gathering: the one that opened it runs it, and says.
    cv_.wait(lock, [&] { return me.done; });
    return me.result;
  }
  gatherOpen_ = true;
  lock.unlock();
  std::this_thread::sleep_for(gather_);
  lock.lock();
  std::vector<Member*> batch = std::move(gathering_);
  gathering_.clear();
  gatherOpen_ = false;
  lock.unlock();
  std::string sweep;  // the round's sources, when it is its turn to sweep dead candidacies
  try {
    runRound(batch, sweep);
  } catch (...) {
    // A bug (a column the result lacks: db::Rows::index). Nobody is left waiting: the members ask
    // on their own, and the line says why every renewal of the round failed.
    spdlog::error("lease: a joint renewal round failed (a bug: please report it): {}", currentExceptionMessage());
    for (Member* m : batch) m->result = false;
  }
  lock.lock();
  ++rounds_;
  for (Member* m : batch) {
    if (m->result.isOk() && *m->result) ++renewed_;
    m->done = true;
  }
  cv_.notify_all();
  lock.unlock();
  // After the members went on: a lock the DELETE waits for holds up nobody's heartbeat.
  if (!sweep.empty()) {
    std::lock_guard sessionLock(sessionMu_);
    (void)session_.run([&](db::Connection& conn) {
      return conn.exec(fmt::format(
          "DELETE FROM outbox_bridge_candidate WHERE source IN ({}) AND expires_at < NOW(6) - INTERVAL 1 HOUR", sweep));
    });
  }
  return me.result;
}

void JointRenewal::runRound(std::vector<Member*>& batch, std::string& sweep) {
  for (Member* m : batch) m->result = false;
  std::lock_guard sessionLock(sessionMu_);
  Status s = session_.run([&](db::Connection& conn) { return roundStatements(conn, batch, sweep); });
  // A failed round vouches for nobody: each asks on its own, and learns there what is wrong.
  if (!s.isOk()) {
    for (Member* m : batch) m->result = false;
    if (s.cause() == Cause::kMissingTable || s.cause() == Cause::kAccessDenied) {
      std::lock_guard lock(mu_);
      offUntil_ = std::chrono::steady_clock::now() + kOffFor;
    }
  }
}

Status JointRenewal::roundStatements(db::Connection& conn, std::vector<Member*>& batch, std::string& sweep) {
  const std::string& holder = batch.front()->holder;
  const std::chrono::milliseconds ttl = batch.front()->ttl;
  std::vector<Member*> members;
  std::string sources, asked;
  for (Member* m : batch) {
    if (m->holder != holder || m->ttl != ttl) continue;  // not this round's: its own round trip
    members.push_back(m);
    sources += (sources.empty() ? "" : ", ") + conn.quote(m->source);
    asked += fmt::format("{}({}, {})", asked.empty() ? "" : ", ", conn.quote(m->source), m->leaseEpoch);
  }
  const std::string me = conn.quote(holder);
  const int64_t ttlMicros = ttl.count() * 1000;
  // Every source's candidates as MysqlLeaseStore::candidates reads them for one: the others renewed
  // lately, and ourselves, each with the number of this database's other sources it leads —
  // ourselves only where the lease is still ours at the epoch held and our candidacy lives, so a
  // source that lost either is left out of the UPDATE rather than spoil its count for the rest.
  auto rows = conn.query(fmt::format(
      "SELECT c.source, c.holder_id, c.stood_since <= NOW(6) - INTERVAL {1} MICROSECOND AS settled, (SELECT COUNT(*) "
      "FROM outbox_bridge_lease l WHERE l.holder_id = c.holder_id AND l.source <> c.source AND l.expires_at > NOW(6)) "
      "AS leads FROM outbox_bridge_candidate c WHERE c.source IN ({0}) AND c.holder_id <> {2} AND "
      "c.expires_at > NOW(6) AND c.renewed_at > NOW(6) - INTERVAL {3} MICROSECOND "
      "UNION ALL SELECT s.source, {2}, 1, (SELECT COUNT(*) FROM outbox_bridge_lease l WHERE l.holder_id = {2} AND "
      "l.source <> s.source AND l.expires_at > NOW(6)) FROM outbox_bridge_lease s JOIN outbox_bridge_candidate o ON "
      "o.source = s.source AND o.holder_id = s.holder_id WHERE s.holder_id = {2} AND (s.source, s.lease_epoch) IN "
      "({4}) AND o.expires_at >= NOW(6)",
      sources, ttlMicros, me, fresh_.count() * 1000, asked));
  if (!rows.isOk()) return rows.status();
  std::map<std::string, std::vector<Candidate>> candidates;
  const size_t sourceAt = rows->index("source"), holderAt = rows->index("holder_id");
  const size_t settledAt = rows->index("settled"), leadsAt = rows->index("leads");
  while (rows->next()) {
    candidates[std::string(rows->text(sourceAt))].push_back(Candidate{
        std::string(rows->text(holderAt)), static_cast<int64_t>(rows->u64(leadsAt)), rows->u64(settledAt) != 0});
  }
  // Those with nobody lighter, as tryAcquire decides for a standing leader.
  std::vector<Member*> steady;
  std::string held;
  for (Member* m : members) {
    const auto& all = candidates[m->source];
    if (std::none_of(all.begin(), all.end(), [&](const Candidate& c) { return c.holder == holder; })) continue;
    std::vector<Candidate> settled;
    for (const auto& c : all) {
      if (c.settled || c.holder == holder) settled.push_back(c);
    }
    if (lighterCandidate(all, holder) || lighterCandidate(settled, holder)) continue;
    steady.push_back(m);
    held += fmt::format("{}({}, {})", held.empty() ? "" : ", ", conn.quote(m->source), m->leaseEpoch);
  }
  if (steady.empty()) return Status::ok();
  // Exactly the leases we hold (holder and epoch) and our live candidacies, one commit. Each
  // source matched counts its two rows (the connection's CLIENT_FOUND_ROWS: rows matched, each
  // table's, changed or not; the keys make the join one to one): anything less, and the round
  // cannot tell whose failed.
  auto renewedRows = conn.execCount(fmt::format(
      "UPDATE outbox_bridge_lease l JOIN outbox_bridge_candidate c ON c.source = l.source AND c.holder_id = "
      "l.holder_id SET l.expires_at = NOW(6) + INTERVAL {0} MICROSECOND, c.renewed_at = NOW(6), c.expires_at = "
      "NOW(6) + INTERVAL {0} MICROSECOND WHERE l.holder_id = {1} AND c.expires_at >= NOW(6) AND "
      "(l.source, l.lease_epoch) IN ({2})",
      ttlMicros, me, held));
  if (!renewedRows.isOk()) return renewedRows.status();
  if (*renewedRows != 2 * steady.size()) return Status::ok();
  for (Member* m : steady) m->result = true;
  std::lock_guard lock(mu_);
  if (rounds_ % kSweepEvery == 0) sweep = sources;
  return Status::ok();
}

}  // namespace outbox

#include "lease/mysql_lease_store.h"

#include <algorithm>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "common/log.h"

namespace outbox {

namespace {

constexpr uint64_t kSweepEvery = 64;  // lease round trips between sweeps of dead candidates

}  // namespace

std::chrono::milliseconds MysqlLeaseStore::freshFor(const LeaseConfig& lease) {
  // A live instance renews each candidacy at least every heartbeat; one silent for two is taken
  // for dead. Shorter than TTL - heartbeat, so it counts as dead before its leases can be taken
  // (never under a second).
  return std::max(std::chrono::milliseconds(1000),
                  std::min(2 * lease.heartbeat + std::chrono::milliseconds(1000), lease.ttl - lease.heartbeat));
}

db::ConnectParams MysqlLeaseStore::connectParams(const SourceConfig& source) {
  db::ConnectParams params = db::paramsFrom(source.dsn);
  params.readTimeout = std::chrono::seconds(5);  // a lease round trip must not outlast the lease
  return params;
}

db::ConnectionPool::Setup MysqlLeaseStore::connectionSetup(std::chrono::seconds lockWait) {
  return [lockWait](db::Connection& conn) {
    // Lease times in UTC, whatever the server's zone (docs/design.md, "Leases and the clock").
    return conn.exec(fmt::format("SET SESSION innodb_lock_wait_timeout = {}, SESSION time_zone = '+00:00'",
                                 std::max<int64_t>(1, lockWait.count())));
  };
}

MysqlLeaseStore::MysqlLeaseStore(const SourceConfig& source, std::chrono::seconds lockWait,
                                 const LeaseConfig& lease)
    : source_(source), session_(connectParams(source), connectionSetup(lockWait)), fresh_(freshFor(lease)) {}

MysqlLeaseStore::MysqlLeaseStore(const SourceConfig& source, db::ConnectionPool& pool, const LeaseConfig& lease,
                                 JointRenewal* joint)
    : source_(source), session_(pool, source.dsn.database), joint_(joint), fresh_(freshFor(lease)) {}

std::optional<std::vector<Candidate>> MysqlLeaseStore::unbalanced(const Status& failed) {
  const Cause cause = failed.cause();
  if (cause == Cause::kMissingTable || cause == Cause::kAccessDenied) {
    if (!std::exchange(warnedUnbalanced_, true)) {
      sourceLogger(source_.name)
          ->warn("sources are not spread over bridge instances: {} ({}; the lease works as before)", failed.message(),
                 cause == Cause::kMissingTable
                     ? "run `outbox-bridge migrate`"
                     : "GRANT SELECT, INSERT, UPDATE, DELETE ON outbox_bridge_candidate to the bridge");
    }
    return std::vector<Candidate>{};
  }
  // Another instance's statement holds the rows a moment: balance next time, lead now.
  if (failed.isLockConflict()) return std::vector<Candidate>{};
  return std::nullopt;  // the connection broke: the lease statements would fail too
}

Status MysqlLeaseStore::stand(db::Connection& conn, const std::string& holder, std::chrono::milliseconds ttl,
                              bool standing) {
  const std::string source = conn.quote(source_.name);
  // stood_since restarts when the row had expired (the instance was away, or stood down).
  Status s = conn.exec(
      standing
          ? fmt::format("INSERT INTO outbox_bridge_candidate (source, holder_id, stood_since, renewed_at, expires_at) "
                        "VALUES ({0}, {1}, NOW(6), NOW(6), NOW(6) + INTERVAL {2} MICROSECOND) ON DUPLICATE KEY "
                        "UPDATE stood_since = IF(expires_at < NOW(6), VALUES(stood_since), stood_since), "
                        "renewed_at = VALUES(renewed_at), expires_at = VALUES(expires_at)",
                        source, conn.quote(holder), ttl.count() * 1000)
          : fmt::format("DELETE FROM outbox_bridge_candidate WHERE source = {} AND holder_id = {}", source,
                        conn.quote(holder)));
  if (!s.isOk() && unbalanced(s)) return Status::ok();
  if (!s.isOk()) return s;
  sweepIfDue(conn);
  return Status::ok();
}

void MysqlLeaseStore::sweepIfDue(db::Connection& conn) {
  // Candidates that died an hour ago or more are gone for good (their holder ids never come back):
  // deleted now and then, not on every round trip, so as not to lock the source's candidate rows
  // that often.
  if (roundTrips_++ % kSweepEvery == 0) {
    (void)conn.exec(fmt::format(
        "DELETE FROM outbox_bridge_candidate WHERE source = {} AND expires_at < NOW(6) - INTERVAL 1 HOUR",
        conn.quote(source_.name)));
  }
}

Result<bool> MysqlLeaseStore::renewHeld(db::Connection& conn, const std::string& holder,
                                        std::chrono::milliseconds ttl) {
  const std::string source = conn.quote(source_.name);
  const std::string me = conn.quote(holder);
  const int64_t ttlMicros = ttl.count() * 1000;
  // The lease and our live candidacy for the source in one statement, one commit: a quiet
  // source's heartbeat is a commit, and commits are most of what it costs the database.
  auto both = conn.execCount(fmt::format(
      "UPDATE outbox_bridge_lease l JOIN outbox_bridge_candidate c ON c.source = l.source AND c.holder_id = "
      "l.holder_id SET l.expires_at = NOW(6) + INTERVAL {0} MICROSECOND, c.renewed_at = NOW(6), c.expires_at = "
      "NOW(6) + INTERVAL {0} MICROSECOND WHERE l.source = {1} AND l.holder_id = {2} AND l.lease_epoch = {3} AND "
      "c.expires_at >= NOW(6)",
      ttlMicros, source, me, held_->leaseEpoch));
  if (both.isOk() && *both > 0) {
    ++jointRenewals_;
    sweepIfDue(conn);
    return true;
  }
  // The candidate table cannot be used, or a lock held it a moment (unbalanced: balancing does
  // without), or our candidacy lapsed: the lease alone, then stand as in the full round trip.
  // Nothing matched because the lease was taken: the UPDATE below matches nothing either.
  if (!both.isOk() && !unbalanced(both.status())) return both.status();
  auto renewed = conn.execCount(fmt::format(
      "UPDATE outbox_bridge_lease SET expires_at = NOW(6) + INTERVAL {} MICROSECOND WHERE source = {} AND "
      "holder_id = {} AND lease_epoch = {}",
      ttlMicros, source, me, held_->leaseEpoch));
  if (!renewed.isOk()) return renewed.status();
  if (*renewed == 0) return false;
  OUTBOX_RETURN_IF_ERROR(stand(conn, holder, ttl, true));
  return true;
}

Result<std::vector<Candidate>> MysqlLeaseStore::candidates(db::Connection& conn, const std::string& holder,
                                                           std::chrono::milliseconds ttl) {
  const std::string source = conn.quote(source_.name);
  // The other candidates renewed lately (one that died a moment ago, its row not yet expired, must
  // not be handed a source nor left a free lease), and ourselves, each with the number of this
  // database's other sources it leads now.
  auto rows = conn.query(fmt::format(
      "SELECT x.holder_id, (SELECT COUNT(*) FROM outbox_bridge_lease l WHERE l.holder_id = x.holder_id "
      "AND l.source <> {0} AND l.expires_at > NOW(6)) AS leads, x.settled FROM ("
      "SELECT holder_id, stood_since <= NOW(6) - INTERVAL {1} MICROSECOND AS settled FROM outbox_bridge_candidate "
      "WHERE source = {0} AND holder_id <> {2} AND expires_at > NOW(6) AND renewed_at > NOW(6) - INTERVAL {3} "
      "MICROSECOND UNION ALL SELECT {2}, 1) x",
      source, ttl.count() * 1000, conn.quote(holder), fresh_.count() * 1000));
  if (!rows.isOk()) {
    if (auto none = unbalanced(rows.status())) return *none;
    return rows.status();
  }
  std::vector<Candidate> out;
  const size_t holderAt = rows->index("holder_id"), leadsAt = rows->index("leads"), settledAt = rows->index("settled");
  while (rows->next()) {
    out.push_back(Candidate{std::string(rows->text(holderAt)), static_cast<int64_t>(rows->u64(leadsAt)),
                            rows->u64(settledAt) != 0});
  }
  return out;
}

Result<bool> MysqlLeaseStore::handingOver(db::Connection& conn, const std::string& holder,
                                          std::chrono::milliseconds ttl) {
  auto pending = conn.queryU64(fmt::format(
      "SELECT COUNT(*) FROM outbox_bridge_lease WHERE holder_id = {} AND source <> {} AND expires_at <= NOW(6) "
      "AND expires_at > NOW(6) - INTERVAL {} MICROSECOND",
      conn.quote(holder), conn.quote(source_.name), ttl.count() * 1000));
  if (!pending.isOk()) return pending.status();
  return pending->value_or(0) > 0;
}

LeaseGrant MysqlLeaseStore::heldGrant(const std::string& holder, std::chrono::milliseconds ttl) const {
  LeaseGrant grant;
  grant.leader = true;
  grant.holder = holder;
  grant.leaseEpoch = held_->leaseEpoch;
  grant.expiresIn = ttl;
  return grant;
}

Result<LeaseGrant> MysqlLeaseStore::tryAcquire(const std::string& holder, std::chrono::milliseconds ttl,
                                               bool standing) {
  if (joint_ != nullptr && standing && held_ && held_->holder == holder) {
    // A steady leader's heartbeat, with the database's others in one round; what the round cannot
    // vouch for takes the full round trip below.
    auto joined = joint_->renew(source_.name, holder, held_->leaseEpoch, ttl);
    if (joined.isOk() && *joined) {
      ++jointRenewals_;
      return heldGrant(holder, ttl);
    }
  }
  return session_.run([&](db::Connection& conn) -> Result<LeaseGrant> {
    std::string source = conn.quote(source_.name);
    std::string me = conn.quote(holder);
    int64_t ttlMicros = ttl.count() * 1000;
    if (!standing) OUTBOX_RETURN_IF_ERROR(stand(conn, holder, ttl, false));
    auto all = candidates(conn, holder, ttl);
    if (!all.isOk()) return all.status();
    // Not standing, we count as the heaviest: any candidate that can publish is lighter.
    for (auto& c : *all) {
      if (c.holder == holder && !standing) c.leads = std::numeric_limits<int64_t>::max();
    }
    // A free lease is left to any lighter candidate; a source we lead is handed only to one that
    // has stood a TTL (an instance just started, or back from a flap, might not stay) — unless we
    // cannot publish it ourselves.
    std::vector<Candidate> settled;
    for (const auto& c : *all) {
      if (c.settled || c.holder == holder || !standing) settled.push_back(c);
    }
    const std::optional<Candidate> leaveTo = lighterCandidate(*all, holder);
    std::optional<Candidate> handTo = lighterCandidate(settled, holder);
    if (standing && !leaveTo && !handTo && held_ && held_->holder == holder) {
      // Still ours, nobody lighter: renew exactly the lease we hold (same holder, same epoch).
      auto renewed = renewHeld(conn, holder, ttl);
      if (!renewed.isOk()) return renewed.status();
      if (*renewed) return heldGrant(holder, ttl);
      held_.reset();  // taken meanwhile (we were frozen past the TTL): the full round trip says by whom
    }
    auto current = [&]() -> Result<LeaseGrant> {
      auto rows = conn.query(fmt::format(
          "SELECT holder_id, lease_epoch, TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at) AS expires_in_micros "
          "FROM outbox_bridge_lease WHERE source = {}",
          source));
      if (!rows.isOk()) return rows.status();
      LeaseGrant grant;
      if (!rows->next()) {
        if (leaveTo) grant.lighter = leaveTo->holder;
        return grant;
      }
      grant.expiresIn = std::chrono::milliseconds(rows->i64("expires_in_micros") / 1000);
      if (grant.expiresIn.count() > 0) grant.holder = std::string(rows->text("holder_id"));
      grant.leaseEpoch = rows->u64("lease_epoch");
      grant.leader = grant.holder == holder;
      if (grant.leader ? handTo.has_value() : leaveTo.has_value()) {
        grant.lighter = (grant.leader ? handTo : leaveTo)->holder;
      }
      if (!grant.holder.empty() && !grant.leader) {
        // Whether the holder should hand the source to us: then we ask again soon, not in a heartbeat.
        std::vector<Candidate> seen = settled;
        if (std::none_of(seen.begin(), seen.end(), [&](const Candidate& c) { return c.holder == grant.holder; })) {
          seen.push_back(Candidate{grant.holder, std::numeric_limits<int64_t>::max()});  // it stood down
        }
        auto to = lighterCandidate(seen, grant.holder);
        grant.handOverExpected = to && to->holder == holder;
      }
      return grant;
    };
    if (leaveTo || handTo) {
      // Someone is lighter: whether we lead the source now decides what that means.
      auto now = current();
      if (!now.isOk()) return now;
      if (!now->leader && leaveTo) {
        // Not ours to take (free or not): stand, and leave it.
        if (standing) OUTBOX_RETURN_IF_ERROR(stand(conn, holder, ttl, true));
        return now;
      }
      if (now->leader && handTo && standing) {
        // One hand-over at a time: while one we gave up is not taken yet, keep this one. (Counting
        // ourselves lighter at once, every other source of ours would see the same gap and go too.)
        auto busy = handingOver(conn, holder, ttl);
        if (!busy.isOk()) return busy.status();
        if (*busy) handTo.reset();
      }
    }
    // The update list runs left to right and later items see earlier assignments: holder_id is
    // decided from the old row, and expires_at then follows the new holder_id.
    OUTBOX_RETURN_IF_ERROR(conn.exec(fmt::format(
        "INSERT INTO outbox_bridge_lease (source, holder_id, lease_epoch, acquired_at, expires_at) "
        "VALUES ({0}, {1}, 1, NOW(6), NOW(6) + INTERVAL {2} MICROSECOND) ON DUPLICATE KEY UPDATE "
        "lease_epoch = IF(holder_id <> VALUES(holder_id) AND expires_at < NOW(6), lease_epoch + 1, lease_epoch), "
        "acquired_at = IF(holder_id <> VALUES(holder_id) AND expires_at < NOW(6), NOW(6), acquired_at), "
        "holder_id = IF(holder_id = VALUES(holder_id) OR expires_at < NOW(6), VALUES(holder_id), holder_id), "
        "expires_at = IF(holder_id = VALUES(holder_id), VALUES(expires_at), expires_at)",
        source, me, ttlMicros)));
    // Only now, the lease statement having worked, do we stand: an instance that cannot take a
    // lease (a grant missing on outbox_bridge_lease) is never handed one.
    if (standing) OUTBOX_RETURN_IF_ERROR(stand(conn, holder, ttl, true));
    auto grant = current();
    if (grant.isOk() && grant->holder.empty() && grant->leaseEpoch == 0) return Status::transient("lease row vanished");
    if (grant.isOk() && grant->leader) {
      held_ = Held{holder, grant->leaseEpoch};
    } else {
      held_.reset();
    }
    return grant;
  });
}

Status MysqlLeaseStore::release(const std::string& holder) {
  held_.reset();
  return session_.run([&](db::Connection& conn) {
    return conn.exec(
        fmt::format("UPDATE outbox_bridge_lease SET expires_at = NOW(6) WHERE source = {} AND holder_id = {}",
                    conn.quote(source_.name), conn.quote(holder)));
  });
}

Status MysqlLeaseStore::withdraw(const std::string& holder) {
  return session_.run([&](db::Connection& conn) {
    Status s = conn.exec(fmt::format("DELETE FROM outbox_bridge_candidate WHERE source = {} AND holder_id = {}",
                                     conn.quote(source_.name), conn.quote(holder)));
    return s.cause() == Cause::kMissingTable || s.cause() == Cause::kAccessDenied ? Status::ok() : s;
  });
}

}  // namespace outbox

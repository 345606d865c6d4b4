#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "db/session.h"
#include "lease/joint_renewal.h"
#include "lease/lease.h"

namespace outbox {

// LeaseStore over a connection of its own, or over a pool's (docs/design.md, "Connections").
// Not thread-safe.
class MysqlLeaseStore final : public LeaseStore {
 public:
  // A lease round trip waits at most `lockWait` for a row lock (a frozen holder's transaction).
  MysqlLeaseStore(const SourceConfig& source, std::chrono::seconds lockWait, const LeaseConfig& lease);
  // Over `pool`, opened with connectParams() of a source of the server and connectionSetup();
  // a steady leader's heartbeat joins `joint` (the database's; may be null), made with freshFor().
  MysqlLeaseStore(const SourceConfig& source, db::ConnectionPool& pool, const LeaseConfig& lease,
                  JointRenewal* joint = nullptr);
  // A candidate renewed longer ago than this is taken for dead.
  static std::chrono::milliseconds freshFor(const LeaseConfig& lease);
  static db::ConnectParams connectParams(const SourceConfig& source);
  static db::ConnectionPool::Setup connectionSetup(std::chrono::seconds lockWait);

  Result<LeaseGrant> tryAcquire(const std::string& holder, std::chrono::milliseconds ttl, bool standing) override;
  Status release(const std::string& holder) override;
  Status withdraw(const std::string& holder) override;
  // Renewals done in one statement (the lease and the candidacy together), so far.
  uint64_t jointRenewals() const { return jointRenewals_; }

 private:
  // Renews our candidacy for a TTL (or, not standing, deletes it). A failure on the candidate
  // table that balancing can do without (see unbalanced) is no failure.
  Status stand(db::Connection& conn, const std::string& holder, std::chrono::milliseconds ttl, bool standing);
  // The candidates renewed lately, and ourselves, each with the number of this database's other
  // sources it leads and whether it has stood a TTL. Only ourselves when the candidate table cannot
  // be used (schema file 006 not applied, no grant on it: warned once; a lock held a moment): the
  // lease works as before, unbalanced.
  Result<std::vector<Candidate>> candidates(db::Connection& conn, const std::string& holder,
                                            std::chrono::milliseconds ttl);
  // The empty list balancing falls back to after `failed` on the candidate table, or nullopt when
  // the connection itself broke.
  std::optional<std::vector<Candidate>> unbalanced(const Status& failed);
  // Deletes candidacies dead for an hour, every kSweepEvery round trips.
  void sweepIfDue(db::Connection& conn);
  // Renews the lease held_ names (same holder and epoch) and our candidacy for a TTL; false when
  // the lease is not that one any more.
  Result<bool> renewHeld(db::Connection& conn, const std::string& holder, std::chrono::milliseconds ttl);
  // The answer for the lease held_ names, just renewed for `ttl`.
  LeaseGrant heldGrant(const std::string& holder, std::chrono::milliseconds ttl) const;
  // Whether a lease we gave up less than a TTL ago has not been taken yet.
  Result<bool> handingOver(db::Connection& conn, const std::string& holder, std::chrono::milliseconds ttl);

  const SourceConfig& source_;
  db::Session session_;
  JointRenewal* joint_ = nullptr;
  std::chrono::milliseconds fresh_;  // a candidate renewed longer ago than this is taken for dead
  bool warnedUnbalanced_ = false;
  uint64_t roundTrips_ = 0;
  uint64_t jointRenewals_ = 0;
  // The lease the last round trip found ours: holder and lease epoch. While nobody is lighter, its
  // renewal is one UPDATE of exactly that holder and epoch and of our candidacy (issue 20: 50 quiet
  // sources' heartbeats are most of what they cost the database); any other answer takes the full
  // round trip.
  struct Held {
    std::string holder;
    uint64_t leaseEpoch = 0;
  };
  std::optional<Held> held_;
};

}  // namespace outbox

#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "config/config.h"
#include "db/session.h"
#include "lease/lease.h"

namespace outbox {

// LeaseStore over a connection of its own. Not thread-safe.
class MysqlLeaseStore final : public LeaseStore {
 public:
  // A lease round trip waits at most `lockWait` for a row lock (a frozen holder's transaction).
  MysqlLeaseStore(const SourceConfig& source, std::chrono::seconds lockWait);

  Result<LeaseGrant> tryAcquire(const std::string& holder, std::chrono::milliseconds ttl) override;
  Status release(const std::string& holder) override;
  Status withdraw(const std::string& holder) override;

 private:
  // Renews our candidacy and reads the other candidates' loads; empty when the database has no
  // candidate table yet (schema file 006 not applied: the lease works, unbalanced).
  Result<std::vector<Candidate>> candidates(db::Connection& conn, const std::string& holder,
                                            std::chrono::milliseconds ttl);

  const SourceConfig& source_;
  db::Session session_;
  bool warnedUnbalanced_ = false;
  uint64_t roundTrips_ = 0;
};

}  // namespace outbox

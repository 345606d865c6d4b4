#pragma once

#include <chrono>
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

 private:
  const SourceConfig& source_;
  db::Session session_;
};

}  // namespace outbox

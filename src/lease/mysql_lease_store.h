#pragma once

#include <memory>
#include <string>

#include "config/config.h"
#include "db/connection.h"
#include "lease/lease.h"

namespace outbox {

// LeaseStore over a connection of its own. Not thread-safe.
class MysqlLeaseStore final : public LeaseStore {
 public:
  // A lease round trip waits at most `lockWait` for a row lock (a frozen holder's transaction).
  MysqlLeaseStore(const SourceConfig& source, std::chrono::seconds lockWait) : source_(source), lockWait_(lockWait) {}
  Result<LeaseGrant> tryAcquire(const std::string& holder, std::chrono::milliseconds ttl) override;
  Status release(const std::string& holder) override;

 private:
  Status ensureConnected();
  const SourceConfig& source_;
  std::chrono::seconds lockWait_;
  std::unique_ptr<db::Connection> conn_;
};

}  // namespace outbox

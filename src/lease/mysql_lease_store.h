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
  explicit MysqlLeaseStore(const SourceConfig& source) : source_(source) {}
  Result<LeaseGrant> tryAcquire(const std::string& holder, std::chrono::milliseconds ttl) override;
  Status release(const std::string& holder) override;

 private:
  Status ensureConnected();
  const SourceConfig& source_;
  std::unique_ptr<db::Connection> conn_;
};

}  // namespace outbox

#include "lease/mysql_lease_store.h"

#include <algorithm>

#include <fmt/format.h>

namespace outbox {

namespace {

db::ConnectParams leaseParams(const SourceConfig& source) {
  db::ConnectParams params = db::paramsFrom(source.dsn);
  params.readTimeout = std::chrono::seconds(5);  // a lease round trip must not outlast the lease
  return params;
}

}  // namespace

MysqlLeaseStore::MysqlLeaseStore(const SourceConfig& source, std::chrono::seconds lockWait)
    : source_(source), session_(leaseParams(source), [lockWait](db::Connection& conn) {
        return conn.exec(fmt::format("SET SESSION innodb_lock_wait_timeout = {}", std::max<int64_t>(1, lockWait.count())));
      }) {}

Result<LeaseGrant> MysqlLeaseStore::tryAcquire(const std::string& holder, std::chrono::milliseconds ttl) {
  return session_.run([&](db::Connection& conn) -> Result<LeaseGrant> {
    std::string source = conn.quote(source_.name);
    std::string me = conn.quote(holder);
    int64_t ttlMicros = ttl.count() * 1000;
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
    auto rows = conn.query(fmt::format("SELECT holder_id, lease_epoch FROM outbox_bridge_lease WHERE source = {}", source));
    if (!rows.isOk()) return rows.status();
    if (!rows->next()) return Status::transient("lease row vanished");
    LeaseGrant grant;
    grant.holder = std::string(rows->text(0));
    grant.leaseEpoch = rows->u64(1);
    grant.leader = grant.holder == holder;
    return grant;
  });
}

Status MysqlLeaseStore::release(const std::string& holder) {
  return session_.run([&](db::Connection& conn) {
    return conn.exec(fmt::format("UPDATE outbox_bridge_lease SET expires_at = NOW(6) WHERE source = {} AND holder_id = {}",
                                 conn.quote(source_.name), conn.quote(holder)));
  });
}

}  // namespace outbox

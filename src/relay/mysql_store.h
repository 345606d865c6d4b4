#pragma once

#include <memory>
#include <string>

#include "config/config.h"
#include "db/connection.h"
#include "relay/ports.h"

namespace outbox {

// OutboxStore over one MySQL/MariaDB connection. Not thread-safe.
class MysqlOutboxStore final : public OutboxStore {
 public:
  // `idleTransactionTimeout` (MariaDB's idle_transaction_timeout, 0: server default): a process
  // frozen in the middle of a transaction (SIGSTOP, a VM stall) must not hold its row locks —
  // and so block the instance that takes over — for longer than this.
  explicit MysqlOutboxStore(const SourceConfig& source, std::chrono::seconds idleTransactionTimeout = {});

  void setLeaseGuard(std::optional<LeaseGuard> guard) override { guard_ = std::move(guard); }
  Status connect() override;
  Result<SourceState> loadState() override;
  Result<std::vector<OutboxRow>> readPending(int limit) override;
  Result<std::vector<OutboxRow>> readAssigned(uint64_t fromVersion, uint64_t throughVersion, int limit) override;
  Status assign(std::vector<OutboxRow>& rows, uint64_t expectedAssignedThrough) override;
  Status markPublished(uint64_t version, uint64_t seq) override;
  Status setPublished(uint64_t version, uint64_t seq) override;
  Status halt(const std::string& reason) override;
  Status clearHalt() override;
  Status quarantine(uint64_t outboxId, const std::string& reason) override;

  // `outbox-bridge epoch bump`: in one transaction, epoch + 1, assigned and published through
  // the highest version ever seen (in the stream or the table), versions of rows assigned but
  // not published cleared so they are published again under new versions, halt cleared, and
  // the reason recorded in outbox_epoch_history. Returns the new state.
  Result<SourceState> epochBump(uint64_t highestStreamVersion, uint64_t streamLastSeq, const std::string& reason);

  // Operator actions (CLI and admin API).
  // Every instance honours the flag.
  Status setPaused(bool paused);
  // Quarantines an unpublished row and, when the source is halted on that very row, clears the
  // halt. Returns whether it cleared one. A row that already has a version: permanent error.
  Result<bool> quarantineAndResume(uint64_t outboxId, const std::string& reason);

 private:
  Status ensureConnected();
  Result<std::vector<OutboxRow>> readRows(const std::string& sql);
  // Runs `fn` in a transaction; rolls back and drops a broken connection on failure.
  template <typename Fn>
  Status inTransaction(Fn&& fn);
  // "UPDATE outbox_source_state s [JOIN outbox_bridge_lease ...] SET <assignments> WHERE
  // s.source = ... AND <condition>", with the lease check when a guard is set.
  std::string guardedStateUpdate(const std::string& assignments, const std::string& condition);

  const SourceConfig& source_;
  std::chrono::seconds idleTransactionTimeout_;
  std::string table_;        // quoted identifier
  std::string sourceLiteral_;
  std::unique_ptr<db::Connection> conn_;
  std::optional<LeaseGuard> guard_;
};

}  // namespace outbox

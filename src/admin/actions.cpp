#include "admin/actions.h"

#include <fmt/format.h>

#include "db/connection.h"
#include "nats/jetstream.h"
#include "relay/jetstream_publisher.h"
#include "relay/mysql_store.h"

namespace outbox::admin {

Status setPaused(const SourceConfig& source, bool paused) {
  auto conn = db::Connection::open(db::paramsFrom(source.dsn));
  if (!conn.isOk()) return conn.status();
  // A source configured but never run has no state row yet: it starts paused.
  return (*conn)->exec(fmt::format(
      "INSERT INTO outbox_source_state (source, paused) VALUES ({0}, {1}) ON DUPLICATE KEY UPDATE paused = {1}",
      (*conn)->quote(source.name), paused ? 1 : 0));
}

Result<bool> quarantine(const SourceConfig& source, uint64_t outboxId, const std::string& reason) {
  MysqlOutboxStore store(source);
  OUTBOX_RETURN_IF_ERROR(store.connect());
  OUTBOX_RETURN_IF_ERROR(store.quarantine(outboxId, reason));
  auto state = store.loadState();
  if (!state.isOk()) return state.status();
  // Only a halt on this row before it got a version; one with a version needs an epoch bump.
  if (state->haltedRow != HaltedRow{outboxId, std::nullopt}) return false;
  OUTBOX_RETURN_IF_ERROR(store.clearHalt());
  return true;
}

Result<SourceState> bumpEpoch(const SourceConfig& source, const NatsConfig& nats, const std::string& reason) {
  // The highest version the stream ever held must be known, or a version could be reused.
  auto nc = nats::Connection::connect(nats);
  if (!nc.isOk()) return Status::transient("epoch bump needs nats-server: " + nc.status().message());
  JetStreamPublisher publisher(source, nats, **nc);
  OUTBOX_RETURN_IF_ERROR(publisher.prepare());
  auto tip = publisher.tip();
  if (!tip.isOk()) return tip.status();
  MysqlOutboxStore store(source);
  OUTBOX_RETURN_IF_ERROR(store.connect());
  return store.epochBump(*tip, reason);
}

}  // namespace outbox::admin

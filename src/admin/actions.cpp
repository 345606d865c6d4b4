#include "admin/actions.h"

#include <charconv>
#include <thread>

#include <fmt/format.h>

#include "common/deadline.h"
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

std::optional<uint64_t> parseRowId(std::string_view text) {
  uint64_t id = 0;
  // Decimal only: no sign, no leading zero (as every number flag; "010" is not 10 or 8).
  if (text.empty() || text.front() == '+' || (text.size() > 1 && text.front() == '0')) return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || end != text.data() + text.size() || id == 0) return std::nullopt;
  return id;
}

Status checkReason(std::string_view reason) {
  if (reason.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return Status::rejected("a reason is required (it is kept with the change)");
  }
  if (reason.size() > kMaxReason) {
    return Status::rejected(
        fmt::format("the reason is {} characters long; at most {} are kept", reason.size(), kMaxReason));
  }
  return Status::ok();
}

Result<bool> quarantine(const SourceConfig& source, uint64_t outboxId, const std::string& reason) {
  OUTBOX_RETURN_IF_ERROR(checkReason(reason));
  if (outboxId == 0) return Status::rejected("outbox row ids start at 1");
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

Result<SourceState> bumpEpoch(const SourceConfig& source, const NatsConfig& nats, const std::string& reason,
                              std::chrono::milliseconds wait) {
  OUTBOX_RETURN_IF_ERROR(checkReason(reason));
  // The highest version the stream ever held must be known, or a version could be reused.
  auto nc = nats::Connection::connect(nats);
  if (!nc.isOk()) return Status::transient("epoch bump needs nats-server: " + nc.status().message());
  JetStreamPublisher publisher(source, nats, **nc);
  OUTBOX_RETURN_IF_ERROR(publisher.prepare());
  auto tip = publisher.tip();
  if (!tip.isOk()) return tip.status();
  MysqlOutboxStore store(source);
  OUTBOX_RETURN_IF_ERROR(store.connect());
  auto bumped = store.epochBump(*tip, reason);
  if (!bumped.isOk()) return bumped.status();
  const auto deadline = deadlineAfter(wait);  // saturates: a wait of centuries does not wrap
  for (;;) {
    auto state = store.loadState();
    if (!state.isOk() || !state->bumpFromEpoch || state->epoch != bumped->epoch || !state->haltedReason.empty() ||
        std::chrono::steady_clock::now() >= deadline) {
      return state.isOk() ? state : bumped;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace outbox::admin

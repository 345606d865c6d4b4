#pragma once

// What operators do to a source — pause, resume, quarantine a row, start a new epoch — in one
// place: the CLI's subcommands and the admin API's routes call these and nothing else. Each call
// opens its own connections, so any thread may make one.
//
// Errors: kRejected — refused as asked, nothing changed (quarantining a row that already has a
// version); kTransient — the database or nats-server could not be reached or gave up (retry);
// kPermanent — the source cannot take it as it stands (no state row: run migrate).

#include <cstdint>
#include <string>

#include "common/status.h"
#include "config/config.h"
#include "relay/ports.h"

namespace outbox::admin {

// Every instance honours the flag: a paused source publishes nothing until resumed.
Status setPaused(const SourceConfig& source, bool paused);

// Sets unpublished row `outboxId` aside: it never gets a version. When the source is halted on
// that very row the halt is cleared too. Returns whether it cleared one.
Result<bool> quarantine(const SourceConfig& source, uint64_t outboxId, const std::string& reason);

// A new epoch (ARCHITECTURE.md section 4): reads the stream's tip through nats-server, then in one
// transaction moves past every version ever used, clears the halt and records `reason` in
// outbox_epoch_history. A leader still publishing is fenced. Returns the new state.
Result<SourceState> bumpEpoch(const SourceConfig& source, const NatsConfig& nats, const std::string& reason);

}  // namespace outbox::admin

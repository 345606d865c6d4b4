#pragma once

// What operators do to a source — pause, resume, quarantine a row, start a new epoch — in one
// place: the CLI's subcommands and the admin API's routes call these and nothing else. Each call
// opens its own connections, so any thread may make one.
//
// Errors: kRejected — refused as asked, nothing changed (quarantining a row that already has a
// version); kTransient — the database or nats-server could not be reached or gave up (retry);
// kPermanent — the source cannot take it as it stands (no state row: run migrate).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "config/config.h"
#include "relay/ports.h"

namespace outbox::admin {

// Every instance honours the flag: a paused source publishes nothing until resumed.
Status setPaused(const SourceConfig& source, bool paused);

// An outbox row id as an operator writes it: decimal digits only, 1 to 2^64-1 (no sign, no
// leading zero, no wrapping); nullopt otherwise.
std::optional<uint64_t> parseRowId(std::string_view text);

// What an operator's reason must be: 1 to kMaxReason characters, not only blanks (it is kept in
// the database and the log). kRejected, saying why, otherwise.
inline constexpr size_t kMaxReason = 1000;
Status checkReason(std::string_view reason);

// Sets unpublished row `outboxId` aside: it never gets a version. When the source is halted on
// that very row the halt is cleared too. Returns whether it cleared one. kRejected: the row is
// not committed (not yet, rolled back, pruned), already has a version, or the reason is empty or
// too long. An assign in progress finishes first (then the row has a version), or waits.
Result<bool> quarantine(const SourceConfig& source, uint64_t outboxId, const std::string& reason);

// A new epoch (docs/design.md, "Reconcile"): reads the stream's tip through nats-server (for the
// epochs it holds), then in one transaction records the new epoch, clears the halt and records
// `reason` in outbox_epoch_history. A leader still publishing is fenced from then on; the leader
// (this one, or the next to take the lease) finishes the bump once its publishes are settled:
// it moves past every version ever used and clears the versions the stream lacks. Waits up to
// `wait` for that, or for the leader to refuse it (the source halted); the state returned says
// which happened (bumpFromEpoch unset: finished; set with a halted_reason: refused).
Result<SourceState> bumpEpoch(const SourceConfig& source, const NatsConfig& nats, const std::string& reason,
                              std::chrono::milliseconds wait);

}  // namespace outbox::admin

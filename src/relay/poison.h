#pragma once

#include <optional>
#include <string>

#include "config/config.h"
#include "relay/ports.h"

namespace outbox {

// Why `row` cannot be published as is (ARCHITECTURE.md section 7), or nullopt when it can:
// payload not valid JSON, an upsert without payload, an unknown op, an entity_type that is not a
// subject token, a header value with a line break, or a message over `maxPayload` bytes.
std::optional<std::string> findPoison(const SourceConfig& source, const OutboxRow& row, size_t maxPayload);

}  // namespace outbox

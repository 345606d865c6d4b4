#pragma once

#include <optional>
#include <string>

#include "config/config.h"
#include "config/subject_template.h"
#include "relay/ports.h"

namespace outbox {

// Why `row` cannot be published as is (README, "Operating it", poison rows), or nullopt when it
// can: payload not valid JSON, an upsert without payload, an unknown op, an entity_type that is not a
// subject token, an entity_key that is empty, begins or ends with a blank, holds a control
// character other than tab or is not valid UTF-8, `headers` that cannot travel (row_headers.h),
// a subject over kMaxSubjectBytes, or a message over `maxPayload` bytes. A row that can be
// published gets its subject and moreHeaders filled (toMessage uses them).
std::optional<std::string> findPoison(const SourceConfig& source, const SubjectTemplate& subject, OutboxRow& row,
                                      size_t maxPayload);

// The halted_reason of a source stopped by poison row `id`: "poison row id=<id>: <why>".
std::string poisonHaltReason(uint64_t id, const std::string& why);

// The halted_reason of a source stopped on row `id`, assigned `version` when it could still be
// published, that the server refuses now (its max_payload shrank):
// "unpublishable version <version> (row id=<id>): <why>; ...what to do".
std::string unpublishableHaltReason(uint64_t version, uint64_t id, const std::string& why);

}  // namespace outbox

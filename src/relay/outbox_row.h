#pragma once

// An outbox row as the relay carries it, from the scan's read to its publish.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace outbox {

struct OutboxRow {
  uint64_t id = 0;
  std::string entityType;
  std::string entityKey;
  std::string op;
  std::optional<std::string> payload;
  int64_t createdAtMicros = 0;  // the database clock, microseconds since the epoch
  uint64_t version = 0;         // 0 until assigned
  std::optional<std::string> headers;  // the `headers` JSON column: more message headers (row_headers.h)
  // Worked out when the row is checked (Publisher::poisonReason) and kept for its publish: the
  // subject rendered and the `headers` column parsed. Empty for a row read otherwise.
  std::string subject;
  std::vector<std::pair<std::string, std::string>> moreHeaders;
};

}  // namespace outbox

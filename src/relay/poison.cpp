#include "relay/poison.h"

#include <algorithm>

#include <fmt/format.h>
#include <simdjson.h>

#include "common/utf8.h"
#include "relay/jetstream_publisher.h"
#include "relay/row_headers.h"

namespace outbox {

std::optional<std::string> findPoison(const SourceConfig& source, const SubjectTemplate& subject, OutboxRow& row,
                                      size_t maxPayload) {
  if (!isSubjectToken(row.entityType)) {
    return fmt::format("entity_type '{}' is not a valid NATS subject token", row.entityType);
  }
  if (row.op != "upsert" && row.op != "delete") {
    return fmt::format("op '{}' is neither 'upsert' nor 'delete'", row.op);
  }
  if (row.entityKey.find_first_of("\r\n") != std::string::npos) {
    return "entity_key contains a line break, which cannot travel in a header";
  }
  // The key travels in Outbox-Entity-Key too: nats.c reads a message whose header value is empty
  // back without any header, and drops control characters from a value (another key, silently).
  if (row.entityKey.empty()) return "entity_key is empty, which the Outbox-Entity-Key header cannot carry";
  if (row.entityKey.front() == ' ' || row.entityKey.front() == '\t' || row.entityKey.back() == ' ' ||
      row.entityKey.back() == '\t') {
    return "entity_key begins or ends with a space or tab, which NATS clients trim from the Outbox-Entity-Key header "
           "(it would arrive as another key)";
  }
  if (std::any_of(row.entityKey.begin(), row.entityKey.end(), [](char ch) {
        const auto c = static_cast<unsigned char>(ch);
        return (c < 0x20 && c != '\t') || c == 0x7f;
      })) {
    return "entity_key contains a control character, which the Outbox-Entity-Key header cannot carry";
  }
  // Only a column of bytes (VARBINARY, a binary character set) can hold one: the server
  // converts any other to utf8mb4 for this connection. A consumer reads the header as text and
  // would hold another key (U+FFFD for each bad byte; two such keys become one).
  for (size_t i = 0; i < row.entityKey.size();) {
    const size_t n = utf8SequenceAt(row.entityKey, i);
    if (n == 0) {
      return "entity_key is not valid UTF-8 (its column holds bytes?), which consumers cannot read "
             "as the same key";
    }
    i += n;
  }
  if (row.op == "upsert" && !row.payload) return "an upsert with a NULL payload";
  if (row.payload) {
    thread_local simdjson::dom::parser parser;
    simdjson::padded_string padded(*row.payload);
    if (auto error = parser.parse(padded).error(); error != simdjson::SUCCESS) {
      return fmt::format("payload is not valid JSON ({})", simdjson::error_message(error));
    }
  }
  std::vector<RowHeader> moreHeaders;
  if (row.headers) {
    if (std::string problem = parseRowHeaders(*row.headers, moreHeaders); !problem.empty()) return problem;
  }
  std::string rendered = subject.render(SubjectFields{source.name, row.entityType, row.entityKey, row.op});
  if (rendered.size() > kMaxSubjectBytes) {
    return fmt::format("its subject is {} bytes long, over the {} bytes a subject may have here (entity_key of {} "
                       "bytes)",
                       rendered.size(), kMaxSubjectBytes, row.entityKey.size());
  }
  // Measured with the longest numbers its headers can hold: its version is not known yet.
  size_t bytes = (row.payload ? row.payload->size() : 0) + 12;  // "NATS/1.0\r\n" + final "\r\n"
  for (const auto& [key, value] : bridgeHeaders(source, row, UINT64_MAX, UINT64_MAX, UINT64_MAX, true)) {
    bytes += std::char_traits<char>::length(key) + value.size() + 4;
  }
  for (const auto& [key, value] : moreHeaders) bytes += key.size() + value.size() + 4;
  if (maxPayload > 0 && bytes > maxPayload) {
    return fmt::format("message of {} bytes is over the server's max_payload of {} bytes", bytes, maxPayload);
  }
  row.subject = std::move(rendered);
  row.moreHeaders = std::move(moreHeaders);
  return std::nullopt;
}

std::string poisonHaltReason(uint64_t id, const std::string& why) {
  return fmt::format("poison row id={}: {}", id, why);
}

std::string unpublishableHaltReason(uint64_t version, uint64_t id, const std::string& why) {
  return fmt::format("unpublishable version {} (row id={}): {}; raise the server's max_payload (the source resumes by "
                     "itself), or run 'outbox-bridge epoch bump' and then quarantine the row",
                     version, id, why);
}

}  // namespace outbox

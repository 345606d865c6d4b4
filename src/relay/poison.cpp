#include "relay/poison.h"

#include <charconv>

#include <fmt/format.h>
#include <simdjson.h>

#include "relay/jetstream_publisher.h"

namespace outbox {

std::optional<std::string> findPoison(const SourceConfig& source, const OutboxRow& row, size_t maxPayload) {
  if (!isSubjectToken(row.entityType)) {
    return fmt::format("entity_type '{}' is not a valid NATS subject token", row.entityType);
  }
  if (row.op != "upsert" && row.op != "delete") {
    return fmt::format("op '{}' is neither 'upsert' nor 'delete'", row.op);
  }
  if (row.entityKey.find_first_of("\r\n") != std::string::npos) {
    return "entity_key contains a line break, which cannot travel in a header";
  }
  if (row.op == "upsert" && !row.payload) return "an upsert with a NULL payload";
  if (row.payload) {
    thread_local simdjson::dom::parser parser;
    simdjson::padded_string padded(*row.payload);
    if (auto error = parser.parse(padded).error(); error != simdjson::SUCCESS) {
      return fmt::format("payload is not valid JSON ({})", simdjson::error_message(error));
    }
  }
  OutboxRow sized = row;
  sized.version = UINT64_MAX;
  auto message = toMessage(source, sized, UINT64_MAX, UINT64_MAX, /*fenceOnPreviousVersion=*/true);
  size_t bytes = message.data.size() + 12;  // "NATS/1.0\r\n" + final "\r\n"
  for (const auto& [key, value] : message.headers) bytes += std::char_traits<char>::length(key) + value.size() + 4;
  if (maxPayload > 0 && bytes > maxPayload) {
    return fmt::format("message of {} bytes is over the server's max_payload of {} bytes", bytes, maxPayload);
  }
  return std::nullopt;
}

std::string poisonHaltReason(uint64_t id, const std::string& why) { return fmt::format("poison row id={}: {}", id, why); }

bool isPoisonHalt(const std::string& haltedReason, std::optional<uint64_t> id) {
  const std::string prefix = id ? fmt::format("poison row id={}:", *id) : std::string("poison row id=");
  return haltedReason.rfind(prefix, 0) == 0;
}

namespace {
constexpr std::string_view kUnpublishable = "unpublishable version ";

std::optional<uint64_t> numberAfter(const std::string& text, std::string_view prefix) {
  if (text.rfind(prefix, 0) != 0) return std::nullopt;
  uint64_t value = 0;
  const char* begin = text.data() + prefix.size();
  auto [end, ec] = std::from_chars(begin, text.data() + text.size(), value);
  if (ec != std::errc() || end == begin) return std::nullopt;
  return value;
}
}  // namespace

std::optional<uint64_t> poisonHaltId(const std::string& haltedReason) {
  return numberAfter(haltedReason, "poison row id=");
}

std::string unpublishableHaltReason(uint64_t version, uint64_t id, const std::string& why) {
  return fmt::format("{}{} (row id={}): {}; raise the server's max_payload (the source resumes by itself), or run "
                     "'outbox-bridge epoch bump' and then quarantine the row",
                     kUnpublishable, version, id, why);
}

std::optional<uint64_t> unpublishableVersion(const std::string& haltedReason) {
  return numberAfter(haltedReason, kUnpublishable);
}

}  // namespace outbox

#include "settle/settled_message.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace outbox {

namespace {

std::optional<uint64_t> parseU64(const std::map<std::string, std::string>& headers,
                                 const char* name) {
  auto it = headers.find(name);
  if (it == headers.end()) return std::nullopt;
  uint64_t v = 0;
  const std::string& text = it->second;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

bool isNatsHeader(const std::string& name) {
  static constexpr std::string_view kNats = "nats-";
  return name.size() >= kNats.size() &&
         std::equal(kNats.begin(), kNats.end(), name.begin(), [](char a, char b) {
           return a == std::tolower(static_cast<unsigned char>(b));
         });
}

std::optional<SettleKey> keyOf(const std::map<std::string, std::string>& headers) {
  auto type = headers.find("Outbox-Entity-Type");
  auto key = headers.find("Outbox-Entity-Key");
  if (type == headers.end() || key == headers.end()) return std::nullopt;
  return SettleKey{type->second, key->second};
}

}  // namespace

std::string settledPrefix(const std::string& subjectPrefix) { return subjectPrefix + "_settled"; }

std::string settledSubject(const std::string& mainSubject, const std::string& subjectPrefix) {
  // Every main subject is under `<subject_prefix>.` (docs/design.md, "The message shaped by its
  // row").
  return settledPrefix(subjectPrefix) +
         mainSubject.substr(std::min(subjectPrefix.size(), mainSubject.size()));
}

std::string settledMsgId(const std::string& source, uint64_t version) {
  return fmt::format("{}:settled:{}", source, version);
}

std::vector<std::pair<std::string, std::string>> withoutNatsHeaders(
    std::vector<std::pair<std::string, std::string>> headers) {
  std::erase_if(headers, [](const auto& h) { return isNatsHeader(h.first); });
  return headers;
}

std::optional<MainChange> mainChange(const std::string& subject, const std::string& data,
                                     const std::map<std::string, std::string>& headers) {
  auto key = keyOf(headers);
  auto version = parseU64(headers, "Outbox-Version");
  if (!key || !version) return std::nullopt;
  MainChange change{std::move(*key), *version, MainMessage{subject, data, {}}};
  for (const auto& [name, value] : headers) {
    if (!isNatsHeader(name)) change.message.headers.emplace_back(name, value);
  }
  return change;
}

std::vector<std::pair<std::string, std::string>> settledHeaders(const Settled& settled) {
  std::vector<std::pair<std::string, std::string>> headers =
      withoutNatsHeaders(settled.message.headers);
  headers.emplace_back(kSettledFromHeader, std::to_string(settled.from));
  headers.emplace_back(kSettledCountHeader, std::to_string(settled.count));
  headers.emplace_back(kSettledThroughHeader, std::to_string(settled.through));
  headers.emplace_back(kSettledSeenHeader, std::to_string(settled.seen));
  return headers;
}

std::optional<SettledMark> settledMark(const std::map<std::string, std::string>& headers) {
  auto key = keyOf(headers);
  auto version = parseU64(headers, "Outbox-Version");
  auto through = parseU64(headers, kSettledThroughHeader);
  auto seen = parseU64(headers, kSettledSeenHeader);
  if (!key || !version || !through || !seen) return std::nullopt;
  return SettledMark{std::move(*key), *version, *through, *seen};
}

}  // namespace outbox

#include "settle/settled_message.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "nats/outgoing.h"

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

bool isNatsHeader(std::string_view name) {
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

void appendHeader(std::string& block, std::string_view name, std::string_view value) {
  if (isNatsHeader(name)) return;
  block.append(name).append(": ");
  for (char c : value) block.push_back(c == '\r' || c == '\n' ? ' ' : c);
  block.append("\r\n");
}

std::vector<std::pair<std::string, std::string>> headerPairs(std::string_view block) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!block.empty()) {
    const size_t end = block.find("\r\n");
    const std::string_view line = block.substr(0, end);
    const size_t colon = line.find(": ");
    if (colon != std::string_view::npos)
      out.emplace_back(line.substr(0, colon), line.substr(colon + 2));
    if (end == std::string_view::npos) break;
    block.remove_prefix(end + 2);
  }
  return out;
}

std::optional<MainChange> mainChange(const std::string& subject, const std::string& data,
                                     const std::map<std::string, std::string>& headers) {
  auto key = keyOf(headers);
  auto version = parseU64(headers, "Outbox-Version");
  if (!key || !version) return std::nullopt;
  MainChange change{std::move(*key), *version, MainMessage{subject, data, {}}};
  for (const auto& [name, value] : headers) appendHeader(change.message.headers, name, value);
  return change;
}

std::vector<std::pair<std::string, std::string>> settledHeaders(const Settled& settled) {
  std::vector<std::pair<std::string, std::string>> headers = headerPairs(settled.message.headers);
  headers.emplace_back(kSettledFromHeader, std::to_string(settled.from));
  headers.emplace_back(kSettledCountHeader, std::to_string(settled.count));
  headers.emplace_back(kSettledThroughHeader, std::to_string(settled.through));
  headers.emplace_back(kSettledSeenHeader, std::to_string(settled.seen));
  return headers;
}

nats::OutgoingMessage settledPublish(const std::string& source, const std::string& subjectPrefix,
                                     const Settled& settled, uint64_t expectedSeq, const std::string& expectedMsgId) {
  nats::OutgoingMessage m;
  m.subject = settledSubject(settled.message.subject, subjectPrefix);
  m.data = settled.message.data;
  m.headers = {{"Nats-Msg-Id", settledMsgId(source, settled.version)},
               {"Nats-Expected-Last-Sequence", std::to_string(expectedSeq)}};
  if (!expectedMsgId.empty()) m.headers.emplace_back("Nats-Expected-Last-Msg-Id", expectedMsgId);
  m.moreHeaders = settledHeaders(settled);
  return m;
}

size_t payloadBytes(const nats::OutgoingMessage& m) {
  std::string block;
  nats::encodeHeaders(m, block);
  return block.size() + m.data.size();
}

std::optional<SettledMark> settledMark(const std::map<std::string, std::string>& headers) {
  auto key = keyOf(headers);
  auto version = parseU64(headers, "Outbox-Version");
  auto through = parseU64(headers, kSettledThroughHeader);
  auto seen = parseU64(headers, kSettledSeenHeader);
  if (!key || !version || !through || !seen) return std::nullopt;
  return SettledMark{std::move(*key), *version, *through, *seen, parseU64(headers, "Outbox-Epoch").value_or(0), 0};
}

}  // namespace outbox

#include "snapshot/checksum.h"

#include <openssl/sha.h>

#include <charconv>

#include <fmt/format.h>

namespace outbox {

void RecordHasher::addNull() { canonical_.push_back('\0'); }

void RecordHasher::addValue(std::string_view text) {
  auto n = static_cast<uint32_t>(text.size());
  char header[5] = {'\x01', static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                    static_cast<char>(n)};
  canonical_.append(header, 5);
  canonical_.append(text);
}

uint64_t RecordHasher::finish() {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(canonical_.data()), canonical_.size(), digest);
  canonical_.clear();
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) h = (h << 8) | digest[i];
  return h;
}

uint64_t recordHash(const std::vector<std::optional<std::string>>& values) {
  RecordHasher hasher;
  for (const auto& v : values) {
    if (v) {
      hasher.addValue(*v);
    } else {
      hasher.addNull();
    }
  }
  return hasher.finish();
}

std::string formatChecksum(uint64_t sum) { return fmt::format("sha256-sum64:{:016x}", sum); }

std::optional<uint64_t> parseChecksum(std::string_view text) {
  constexpr std::string_view prefix = "sha256-sum64:";
  if (text.substr(0, prefix.size()) != prefix || text.size() != prefix.size() + 16) return std::nullopt;
  uint64_t v = 0;
  auto digits = text.substr(prefix.size());
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, 16);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return v;
}

}  // namespace outbox

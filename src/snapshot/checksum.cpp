#include "snapshot/checksum.h"

#include <charconv>
#include <new>
#include <stdexcept>

#include <fmt/format.h>
#include <openssl/sha.h>

namespace outbox {

namespace {

// SHA-256, fetched from OpenSSL's default provider once for the process (thread-safe: a static).
const EVP_MD* sha256() {
  static const CHandle<EVP_MD, &EVP_MD_free> md(EVP_MD_fetch(nullptr, "SHA256", nullptr));
  if (!md) throw std::runtime_error("OpenSSL has no SHA-256");
  return md.get();
}

}  // namespace

RecordHasher::RecordHasher() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_) throw std::bad_alloc();
}

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
  unsigned int length = 0;
  if (EVP_DigestInit_ex2(ctx_.get(), sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx_.get(), canonical_.data(), canonical_.size()) != 1 ||
      EVP_DigestFinal_ex(ctx_.get(), digest, &length) != 1) {
    throw std::runtime_error("SHA-256 failed");
  }
  canonical_.clear();
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) h = (h << 8) | digest[i];
  return h;
}

uint64_t recordHash(const std::vector<std::optional<std::string>>& values) {
  thread_local RecordHasher hasher;
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

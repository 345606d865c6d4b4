#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <openssl/evp.h>

#include "common/c_deleter.h"

namespace outbox {

// The snapshot checksum (docs/consumers.md, "4. The checksum"). Order-independent, so a consumer keeps it
// current by subtracting a record's old hash and adding its new one.
//
// canonical(record) = per column in order: 0x00 for NULL, else 0x01, the value's byte length as
// 4-byte big-endian, then its UTF-8 text. h = first 8 bytes of SHA-256(canonical), big-endian.
// checksum = "sha256-sum64:" + 16 lower-case hex digits of the sum of h, mod 2^64.
class RecordHasher {
 public:
  RecordHasher();
  void addNull();
  void addValue(std::string_view text);
  // h(record) of the values added since the last finish(); starts the next record.
  uint64_t finish();

 private:
  std::string canonical_;
  // One digest context for every record: OpenSSL 3's one-shot SHA256() looks the algorithm up and
  // allocates a context on each call (0.6 us a record here, against 0.2 us reusing both).
  CHandle<EVP_MD_CTX, &EVP_MD_CTX_free> ctx_;
};

uint64_t recordHash(const std::vector<std::optional<std::string>>& values);
std::string formatChecksum(uint64_t sum);
std::optional<uint64_t> parseChecksum(std::string_view text);

}  // namespace outbox

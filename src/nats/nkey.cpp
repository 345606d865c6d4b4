#include "nats/nkey.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "common/c_deleter.h"

namespace outbox::nats {

namespace {

constexpr uint8_t kPrefixSeed = 18 << 3;  // 'S'
constexpr std::string_view kBase32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

// CRC-16/XMODEM, as the nkeys format checksums its bytes.
uint16_t crc16(const std::vector<uint8_t>& bytes) {
  uint16_t crc = 0;
  for (uint8_t b : bytes) {
    crc ^= static_cast<uint16_t>(b) << 8;
    for (int i = 0; i < 8; ++i) crc = static_cast<uint16_t>(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
  }
  return crc;
}

// RFC 4648 base32 without padding.
std::string base32(const std::vector<uint8_t>& bytes) {
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (uint8_t b : bytes) {
    buffer = (buffer << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out.push_back(kBase32[(buffer >> (bits - 5)) & 31]);
      bits -= 5;
    }
  }
  if (bits > 0) out.push_back(kBase32[(buffer << (5 - bits)) & 31]);
  return out;
}

std::optional<std::vector<uint8_t>> unbase32(std::string_view text) {
  std::vector<uint8_t> out;
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    auto at = kBase32.find(c);
    if (at == std::string_view::npos) return std::nullopt;
    buffer = (buffer << 5) | static_cast<uint32_t>(at);
    bits += 5;
    if (bits >= 8) {
      out.push_back(static_cast<uint8_t>(buffer >> (bits - 8)));
      bits -= 8;
    }
  }
  return out;
}

// `payload` with its CRC appended (little-endian), in base32.
std::string encode(std::vector<uint8_t> payload) {
  uint16_t crc = crc16(payload);
  payload.push_back(static_cast<uint8_t>(crc & 0xff));
  payload.push_back(static_cast<uint8_t>(crc >> 8));
  return base32(payload);
}

// The ed25519 key of a 32-byte seed.
CHandle<EVP_PKEY, &EVP_PKEY_free> keyOf(const uint8_t* rawSeed) {
  return CHandle<EVP_PKEY, &EVP_PKEY_free>(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, rawSeed, 32));
}

Result<std::string> publicKeyOf(const uint8_t* rawSeed, NkeyKind kind) {
  auto key = keyOf(rawSeed);
  if (!key) return Status::permanent("ed25519: cannot make a key from the nkey seed");
  std::vector<uint8_t> out(1 + 32);
  size_t length = 32;
  if (EVP_PKEY_get_raw_public_key(key.get(), out.data() + 1, &length) != 1 || length != 32) {
    return Status::permanent("ed25519: cannot derive the nkey's public key");
  }
  out[0] = static_cast<uint8_t>(kind);
  return encode(std::move(out));
}

// The 32 raw bytes of a seed of `kind`, or nullopt.
std::optional<std::vector<uint8_t>> rawSeedOf(std::string_view seed, NkeyKind kind) {
  auto bytes = unbase32(seed);
  if (!bytes || bytes->size() != 2 + 32 + 2) return std::nullopt;
  std::vector<uint8_t> payload(bytes->begin(), bytes->end() - 2);
  const uint16_t crc = static_cast<uint16_t>((*bytes)[34] | ((*bytes)[35] << 8));
  if (crc16(payload) != crc) return std::nullopt;
  const uint8_t b1 = payload[0], b2 = payload[1];
  const uint8_t prefix = static_cast<uint8_t>(((b1 & 7) << 5) | ((b2 & 248) >> 3));
  if ((b1 & 248) != kPrefixSeed || prefix != static_cast<uint8_t>(kind)) return std::nullopt;
  return std::vector<uint8_t>(payload.begin() + 2, payload.end());
}

char kindLetter(NkeyKind kind) {
  return kind == NkeyKind::kOperator ? 'O' : kind == NkeyKind::kAccount ? 'A' : 'U';
}

const char* kindName(NkeyKind kind) {
  switch (kind) {
    case NkeyKind::kOperator: return "operator";
    case NkeyKind::kAccount: return "account";
    case NkeyKind::kUser: return "user";
  }
  return "?";
}

}  // namespace

Result<std::string> nkeyPublicKey(std::string_view seed, NkeyKind kind) {
  auto raw = rawSeedOf(seed, kind);
  if (!raw) {
    return Status::permanent(fmt::format("not a NATS {} nkey seed (expected the 58 characters of an \"S{}...\" seed)",
                                         kindName(kind), kindLetter(kind)));
  }
  return publicKeyOf(raw->data(), kind);
}

Result<std::string> nkeySign(std::string_view seed, std::string_view data, NkeyKind kind) {
  auto raw = rawSeedOf(seed, kind);
  if (!raw) return Status::permanent(fmt::format("not a NATS {} nkey seed", kindName(kind)));
  auto key = keyOf(raw->data());
  CHandle<EVP_MD_CTX, &EVP_MD_CTX_free> ctx(EVP_MD_CTX_new());
  std::string signature(64, '\0');
  size_t length = signature.size();
  if (!key || !ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &length,
                     reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1 ||
      length != 64) {
    return Status::permanent("ed25519: cannot sign");
  }
  return signature;
}

Result<std::string> readNkeySeed(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::permanent("cannot read the nkey seed file " + path);
  std::string word;
  while (in >> word) {
    if (word.rfind("SU", 0) == 0) return word;
  }
  return Status::permanent("no user nkey seed (a word starting with SU) in " + path);
}

Result<UserNkey> newNkey(NkeyKind kind) {
  std::array<uint8_t, 32> raw{};
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) return Status::fatal("no random bytes for an nkey");
  const auto prefix = static_cast<uint8_t>(kind);
  std::vector<uint8_t> seed{static_cast<uint8_t>(kPrefixSeed | (prefix >> 5)),
                            static_cast<uint8_t>((prefix & 31) << 3)};
  seed.insert(seed.end(), raw.begin(), raw.end());
  auto publicKey = publicKeyOf(raw.data(), kind);
  if (!publicKey.isOk()) return publicKey.status();
  return UserNkey{encode(std::move(seed)), *publicKey};
}

}  // namespace outbox::nats

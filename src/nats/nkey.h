#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace outbox::nats {

// NATS user nkeys (ed25519 keys in NATS' base32 text form: a seed "SU...", a public key "U...").
// nats.c signs with a seed file but wants the public key alongside it, which a user should not
// have to copy by hand, and has no call that derives it; nor can a test make a key pair with it.
// Written here with OpenSSL's ed25519, after the format of github.com/nats-io/nkeys.

// What a key is for: its public key's first letter (O, A, U), its seed's second.
enum class NkeyKind : uint8_t { kOperator = 14 << 3, kAccount = 0, kUser = 20 << 3 };

struct UserNkey {
  std::string seed;       // "SU...": secret
  std::string publicKey;  // "U..."
};

// The public key of a seed of `kind`; a permanent error for anything else (never echoing the seed).
Result<std::string> nkeyPublicKey(std::string_view seed, NkeyKind kind = NkeyKind::kUser);

// The ed25519 signature (64 bytes) of `data` by a seed of `kind` (JWTs are signed so).
Result<std::string> nkeySign(std::string_view seed, std::string_view data, NkeyKind kind);

// The user seed in a seed file: its first word that starts with "SU" (a file holding only the
// seed, or a creds-style file with it between markers); a permanent error naming the file.
Result<std::string> readNkeySeed(const std::string& path);

// A new random key pair of `kind` (UserNkey holds any kind).
Result<UserNkey> newNkey(NkeyKind kind);
inline Result<UserNkey> newUserNkey() { return newNkey(NkeyKind::kUser); }

}  // namespace outbox::nats

#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace outbox::nats {

// NATS user nkeys (ed25519 keys in NATS' base32 text form: a seed "SU...", a public key "U...").
// nats.c signs with a seed file but wants the public key alongside it, which a user should not
// have to copy by hand, and has no call that derives it; nor can a test make a key pair with it.
// Written here with OpenSSL's ed25519, after the format of github.com/nats-io/nkeys.

struct UserNkey {
  std::string seed;       // "SU...": secret
  std::string publicKey;  // "U..."
};

// The public key of a user seed; a permanent error for anything else (never echoing the seed).
Result<std::string> nkeyPublicKey(std::string_view seed);

// The user seed in a seed file: its first word that starts with "SU" (a file holding only the
// seed, or a creds-style file with it between markers); a permanent error naming the file.
Result<std::string> readNkeySeed(const std::string& path);

// A new random user key pair.
Result<UserNkey> newUserNkey();

}  // namespace outbox::nats

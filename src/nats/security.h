#pragma once

// Inside src/nats/: the login and TLS settings on nats.c's options, shared by connect()
// (connection.cpp) and checkSettings() (security.cpp), so both load the files the same way.

#include <string>

#include "common/status.h"
#include "config/config.h"

typedef struct __natsOptions natsOptions;

namespace outbox::nats {

// Whether the connection is TLS: a tls:// URL, or any TLS setting.
bool usesTls(const NatsConfig& o);

// The login and TLS settings of `o` on `opts`; a failure names the setting. `seed` keeps an nkey
// seed for the nonce's signature, for as long as the connection lives.
Status setSecurity(natsOptions* opts, const NatsConfig& o, std::string& seed);

}  // namespace outbox::nats

#pragma once

#include <string>
#include <string_view>

#include "nats/jetstream.h"

namespace outbox::nats {

// `message`'s headers as they travel (NATS/1.0, a "Key: value" line each, in order, a blank line)
// into `out`.
void encodeHeaders(const OutgoingMessage& message, std::string& out);

// `message`'s Nats-Msg-Id (a view into it; empty when it has none).
std::string_view msgIdOf(const OutgoingMessage& message);

// Whether makeMessage hands nats.c the headers encoded once (natsMsg_create, found by meson), or
// sets them one by one (natsMsgHeader_Set: a quarter more of the bridge's CPU in a drain).
bool encodesHeadersOnce();

// A nats.c message for `message`, owned by the caller (natsMsg_Destroy). `scratch`: a buffer the
// caller keeps between calls, to build it in.
Result<natsMsg*> makeMessage(const OutgoingMessage& message, std::string& scratch);

}  // namespace outbox::nats

#include "nats/outgoing.h"

#include <nats/nats.h>

#include <algorithm>
#include <cstring>

// nats.c's own constructor of a message whose headers arrive encoded (how it builds every message
// it receives): exported by libnats, not declared in nats.h. Found by meson (src/meson.build);
// without it the headers go through natsMsgHeader_Set as before.
#ifdef OUTBOX_NATS_MSG_CREATE
extern "C" natsStatus natsMsg_create(natsMsg** newMsg, const char* subject, int subjLen, const char* reply,
                                     int replyLen, const char* buf, int bufLen, int hdrLen);
#endif

namespace outbox::nats {

namespace {

void appendHeader(std::string& out, std::string_view key, std::string_view value) {
  out.append(key).append(": ");
  const size_t at = out.size();
  out.append(value);
  // As nats.c's encoder does: a line break in a value would end the header early.
  std::replace_if(
      out.begin() + static_cast<std::ptrdiff_t>(at), out.end(), [](char c) { return c == '\r' || c == '\n'; }, ' ');
  out.append("\r\n");
}

}  // namespace

std::string_view msgIdOf(const OutgoingMessage& message) {
  for (const auto& [key, value] : message.headers) {
    if (std::strcmp(key, "Nats-Msg-Id") == 0) return value;
  }
  return {};
}

void encodeHeaders(const OutgoingMessage& message, std::string& out) {
  out.assign("NATS/1.0\r\n");
  for (const auto& [key, value] : message.headers) appendHeader(out, key, value);
  for (const auto& [key, value] : message.moreHeaders) appendHeader(out, key, value);
  out.append("\r\n");
}

bool encodesHeadersOnce() {
#ifdef OUTBOX_NATS_MSG_CREATE
  return true;
#else
  return false;
#endif
}

Result<natsMsg*> makeMessage(const OutgoingMessage& message, std::string& scratch) {
  natsMsg* raw = nullptr;
  natsStatus s = NATS_OK;
#ifdef OUTBOX_NATS_MSG_CREATE
  if (!message.headers.empty() || !message.moreHeaders.empty()) {
    // One allocation for the message, its headers encoded once: natsMsgHeader_Set keeps a hash
    // of copied keys and values per message, which the ack's thread then frees, and that churn
    // was a quarter of the bridge's CPU in a drain (docs/design.md, "Performance").
    encodeHeaders(message, scratch);
    const int hdrLen = static_cast<int>(scratch.size());
    scratch.append(message.data);
    s = natsMsg_create(&raw, message.subject.data(), static_cast<int>(message.subject.size()), nullptr, 0,
                       scratch.data(), static_cast<int>(scratch.size()), hdrLen);
    if (s != NATS_OK) return fromNats(s, 0, "create message");
    return raw;
  }
#endif
  (void)scratch;
  s = natsMsg_Create(&raw, message.subject.c_str(), nullptr, message.data.data(),
                     static_cast<int>(message.data.size()));
  if (s != NATS_OK) return fromNats(s, 0, "create message");
  for (const auto& [key, value] : message.headers) {
    if ((s = natsMsgHeader_Set(raw, key, value.c_str())) != NATS_OK) break;
  }
  for (const auto& [key, value] : message.moreHeaders) {
    if (s == NATS_OK) s = natsMsgHeader_Add(raw, key.c_str(), value.c_str());
  }
  if (s != NATS_OK) {
    natsMsg_Destroy(raw);
    return fromNats(s, 0, "set header");
  }
  return raw;
}

}  // namespace outbox::nats

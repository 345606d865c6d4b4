// Reading a stream back (JetStream's half that takes messages out): a message by sequence or the
// last of a subject, an ordered consumer from a sequence on, a range of sequences.
#include "nats/jetstream.h"

#include <nats/nats.h>

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "common/c_deleter.h"
#include "common/deadline.h"

namespace outbox::nats {

namespace {

using MsgPtr = CHandle<natsMsg, &natsMsg_Destroy>;
using MetaPtr = CHandle<jsMsgMetaData, &jsMsgMetaData_Destroy>;

std::map<std::string, std::string> headersOf(natsMsg* msg) {
  std::map<std::string, std::string> out;
  const char** keys = nullptr;
  int count = 0;
  if (natsMsgHeader_Keys(msg, &keys, &count) == NATS_OK) {
    for (int i = 0; i < count; ++i) {
      const char* value = nullptr;
      if (natsMsgHeader_Get(msg, keys[i], &value) == NATS_OK && value != nullptr) out[keys[i]] = value;
    }
    free(keys);
  }
  return out;
}

// A message read back with a direct get: its sequence, subject, body and headers.
StoredMessage storedFrom(natsMsg* raw) {
  StoredMessage out;
  out.seq = natsMsg_GetSequence(raw);
  out.timestampNanos = natsMsg_GetTime(raw);
  out.subject = natsMsg_GetSubject(raw);
  out.data.assign(natsMsg_GetData(raw), static_cast<size_t>(natsMsg_GetDataLength(raw)));
  out.headers = headersOf(raw);
  return out;
}

// A delivered JetStream message as a StoredMessage; nullopt for status and heartbeat messages.
std::optional<StoredMessage> toStored(natsMsg* msg) {
  jsMsgMetaData* rawMeta = nullptr;
  if (natsMsg_GetMetaData(&rawMeta, msg) != NATS_OK) return std::nullopt;
  MetaPtr meta(rawMeta);
  StoredMessage m;
  m.seq = rawMeta->Sequence.Stream;
  m.timestampNanos = rawMeta->Timestamp;
  m.subject = natsMsg_GetSubject(msg);
  m.data.assign(natsMsg_GetData(msg), static_cast<size_t>(natsMsg_GetDataLength(msg)));
  m.headers = headersOf(msg);
  return m;
}

}  // namespace

Result<std::optional<StoredMessage>> JetStream::getMessage(const std::string& stream, uint64_t seq) {
  OUTBOX_RETURN_IF_ERROR(follow());
  natsMsg* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetMsg(&raw, js_.get(), stream.c_str(), seq, nullptr, &code);
  MsgPtr msg(raw);
  if (s == NATS_NOT_FOUND || code == JSNoMessageFoundErr) return std::optional<StoredMessage>();
  if (s != NATS_OK) return fromNats(s, code, fmt::format("get message {} from {}", seq, stream));
  return std::optional<StoredMessage>(storedFrom(raw));
}

Result<std::optional<StoredMessage>> JetStream::firstMessageFrom(const std::string& stream, uint64_t seq) {
  OUTBOX_RETURN_IF_ERROR(follow());
  jsDirectGetMsgOptions get;
  jsDirectGetMsgOptions_Init(&get);
  get.Sequence = seq;
  get.NextBySubject = ">";
  natsMsg* raw = nullptr;
  natsStatus s = js_DirectGetMsg(&raw, js_.get(), stream.c_str(), nullptr, &get);
  MsgPtr msg(raw);
  if (s == NATS_NOT_FOUND) return std::optional<StoredMessage>();
  if (s != NATS_OK) {
    return fromNats(s, static_cast<jsErrCode>(0), fmt::format("get the first message from {} of {}", seq, stream));
  }
  return std::optional<StoredMessage>(storedFrom(raw));
}

Result<std::optional<StoredMessage>> JetStream::lastMessage(const std::string& stream, const std::string& subject) {
  OUTBOX_RETURN_IF_ERROR(follow());
  natsMsg* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetLastMsg(&raw, js_.get(), stream.c_str(), subject.c_str(), nullptr, &code);
  MsgPtr msg(raw);
  if (s == NATS_NOT_FOUND || code == JSNoMessageFoundErr) return std::optional<StoredMessage>();
  if (s != NATS_OK) return fromNats(s, code, fmt::format("get the last message of {} from {}", subject, stream));
  return std::optional<StoredMessage>(storedFrom(raw));
}

Result<std::optional<StoredMessage>> Subscription::next(std::chrono::milliseconds timeout) {
  auto deadline = deadlineAfter(timeout);
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::optional<StoredMessage>();
    natsMsg* raw = nullptr;
    natsStatus s = natsSubscription_NextMsg(&raw, sub_.get(), left.count());
    MsgPtr msg(raw);
    if (s == NATS_TIMEOUT) return std::optional<StoredMessage>();
    if (s != NATS_OK) return fromNats(s, 0, "next message");
    if (auto m = toStored(raw)) return std::optional<StoredMessage>(std::move(*m));
  }
}

Result<std::unique_ptr<Subscription>> JetStream::subscribe(const std::string& stream, const std::string& subject,
                                                           uint64_t startSeq) {
  OUTBOX_RETURN_IF_ERROR(follow());
  jsSubOptions options;
  jsSubOptions_Init(&options);
  options.Stream = stream.c_str();
  options.Ordered = true;
  options.Config.DeliverPolicy = js_DeliverByStartSequence;
  options.Config.OptStartSeq = std::max<uint64_t>(startSeq, 1);
  jsErrCode code = static_cast<jsErrCode>(0);
  natsSubscription* raw = nullptr;
  natsStatus s = js_SubscribeSync(&raw, js_.get(), subject.c_str(), nullptr, &options, &code);
  std::unique_ptr<Subscription> sub(new Subscription(raw));
  if (s != NATS_OK) return fromNats(s, code, "subscribe to " + stream);
  return sub;
}

Result<std::vector<StoredMessage>> JetStream::readRange(const std::string& stream, const std::string& subject,
                                                        uint64_t fromSeq, uint64_t throughSeq,
                                                        std::chrono::milliseconds idleTimeout) {
  std::vector<StoredMessage> out;
  if (throughSeq < fromSeq) return out;
  auto sub = subscribe(stream, subject, fromSeq);
  if (!sub.isOk()) return sub.status();
  out.reserve(throughSeq - fromSeq + 1);
  while (out.empty() || out.back().seq < throughSeq) {
    auto next = (*sub)->next(idleTimeout);
    if (!next.isOk()) return next.status();
    if (!next->has_value()) {
      return Status::transient(fmt::format("read {}: nothing after sequence {} for {} ms", stream,
                                           out.empty() ? fromSeq - 1 : out.back().seq, idleTimeout.count()));
    }
    if ((*next)->seq > throughSeq) break;
    out.push_back(std::move(**next));
  }
  return out;
}

}  // namespace outbox::nats

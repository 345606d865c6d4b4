#include "nats/jetstream.h"

#include <nats/nats.h>

#include <cstdlib>

#include <fmt/format.h>

#include "common/c_deleter.h"
#include "nats/outgoing.h"

namespace outbox::nats {

namespace {

using MsgPtr = CHandle<natsMsg, &natsMsg_Destroy>;
using StreamInfoPtr = CHandle<jsStreamInfo, &jsStreamInfo_Destroy>;

constexpr int64_t kNanosPerMilli = 1'000'000;

// The stream `name` as the server has it; when there is none, it is created from `create` (its
// name, file storage and direct gets set here) and the answer holds nullptr.
Result<StreamInfoPtr> infoOrCreate(jsCtx* js, const std::string& name, jsStreamConfig& create) {
  jsStreamInfo* rawInfo = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&rawInfo, js, name.c_str(), nullptr, &code);
  StreamInfoPtr info(rawInfo);
  if (s == NATS_OK) return info;
  if (code != JSStreamNotFoundErr && s != NATS_NOT_FOUND) return fromNats(s, code, "stream info " + name);
  create.Name = name.c_str();
  create.Storage = js_FileStorage;
  create.AllowDirect = true;
  rawInfo = nullptr;
  s = js_AddStream(&rawInfo, js, &create, nullptr, &code);
  StreamInfoPtr created(rawInfo);
  if (s != NATS_OK) return fromNats(s, code, "create stream " + name);
  return StreamInfoPtr();
}

}  // namespace

Result<std::unique_ptr<JetStream>> JetStream::create(Connection& connection, std::chrono::milliseconds ackTimeout,
                                                     int maxPending, const std::string& domain) {
  std::unique_ptr<JetStream> js(new JetStream(connection));
  js->ackTimeout_ = ackTimeout;
  js->maxPending_ = maxPending;
  js->domain_ = domain;
  OUTBOX_RETURN_IF_ERROR(js->follow());
  return js;
}

Status JetStream::follow() {
  uint64_t generation = 0;
  std::shared_ptr<natsConnection> nc = connection_.current(&generation);
  if (js_ && generation == generation_) return Status::ok();
  if (js_) abandonPending();  // sent on the closed connection: no ack will come
  jsOptions options;
  jsOptions_Init(&options);
  options.Wait = ackTimeout_.count();
  if (!domain_.empty()) options.Domain = domain_.c_str();
  options.PublishAsync.MaxPending = maxPending_;
  options.PublishAsync.AckHandler = &JetStream::onAck;
  options.PublishAsync.AckHandlerClosure = this;
  options.PublishAsync.StallWait = ackTimeout_.count();
  jsCtx* ctx = nullptr;
  natsStatus s = natsConnection_JetStream(&ctx, nc.get(), &options);
  if (s != NATS_OK) return fromNats(s, 0, "jetstream context");
  js_.reset(ctx);
  nc_ = std::move(nc);
  generation_ = generation;
  publishedAsync_ = false;
  return Status::ok();
}

JetStream::~JetStream() {
  if (js_) abandonPending();
}

void JetStream::onAck(jsCtx*, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure) {
  // Runs on a nats.c thread: copy what the relay needs, queue it, never block.
  auto* self = static_cast<JetStream*>(closure);
  AckEvent event;
  if (pa != nullptr) {
    event.ok = true;
    event.seq = pa->Sequence;
    event.duplicate = pa->Duplicate;
  } else if (pae != nullptr) {
    event.wrongLastSeq = pae->ErrCode == JSStreamWrongLastSequenceErr || pae->ErrCode == JSStreamWrongLastMsgIDErr;
    event.error = fmt::format("nats status {} ({}), jetstream error {}: {}", static_cast<int>(pae->Err),
                              natsStatus_GetText(pae->Err), static_cast<int>(pae->ErrCode),
                              pae->ErrText != nullptr ? pae->ErrText : "");
  }
  {
    // One lock an ack: its Nats-Msg-Id taken from msgIds_ and the event queued. A message not
    // there was abandoned meanwhile (abandonPending): its event keeps an empty id, which the
    // publisher passes over, as it does the acks that abandon cleared.
    std::lock_guard lock(self->mu_);
    if (auto it = self->msgIds_.find(msg); it != self->msgIds_.end()) {
      event.msgId = std::move(it->second);
      self->msgIds_.erase(it);
    }
    self->acks_.push_back(std::move(event));
  }
  natsMsg_Destroy(msg);
  self->cv_.notify_one();
}

Status JetStream::ensureStream(const StreamSettings& settings, int* replicas) {
  OUTBOX_RETURN_IF_ERROR(follow());
  jsStreamConfig create;
  jsStreamConfig_Init(&create);
  const char* subjects[] = {settings.subject.c_str()};
  create.Subjects = subjects;
  create.SubjectsLen = 1;
  create.Replicas = settings.replicas;
  create.Duplicates = settings.duplicateWindow.count() * kNanosPerMilli;
  create.MaxAge = settings.maxAge.count() * kNanosPerMilli;
  auto info = infoOrCreate(js_.get(), settings.name, create);
  if (!info.isOk()) return info.status();
  if (*info == nullptr) {  // created
    if (replicas != nullptr) *replicas = settings.replicas;
    return Status::ok();
  }
  const jsStreamConfig* cfg = (*info)->Config;
  bool matches = cfg != nullptr && cfg->SubjectsLen == 1 && settings.subject == cfg->Subjects[0];
  if (!matches) {
    std::string have;
    for (int i = 0; cfg != nullptr && i < cfg->SubjectsLen; ++i) {
      have += (i ? ", " : "") + std::string(cfg->Subjects[i]);
    }
    return Status::permanent(fmt::format("stream {} exists with subjects [{}], but this source needs [{}]; "
                                         "refusing to publish into it",
                                         settings.name, have, settings.subject));
  }
  if (replicas != nullptr) *replicas = cfg->Replicas;
  return Status::ok();
}

namespace {

StreamState stateOf(const jsStreamInfo& info) {
  StreamState state{info.State.FirstSeq, info.State.LastSeq, info.State.Msgs, {}};
  for (int i = 0; info.Config != nullptr && i < info.Config->SubjectsLen; ++i) {
    state.subjects.emplace_back(info.Config->Subjects[i]);
  }
  if (info.Config != nullptr) state.replicas = static_cast<int>(info.Config->Replicas);
  if (info.Config != nullptr) state.allowDirect = info.Config->AllowDirect;
  state.createdNanos = info.Created;
  state.lastTimeNanos = info.State.LastTime;
  if (info.Cluster != nullptr && info.Cluster->Leader != nullptr) state.leader = info.Cluster->Leader;
  return state;
}

}  // namespace

Result<StreamState> JetStream::streamState(const std::string& stream) {
  OUTBOX_RETURN_IF_ERROR(follow());
  jsStreamInfo* rawInfo = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&rawInfo, js_.get(), stream.c_str(), nullptr, &code);
  StreamInfoPtr info(rawInfo);
  if (s != NATS_OK) return fromNats(s, code, "stream info " + stream);
  return stateOf(*info);
}

Result<std::optional<StreamState>> JetStream::findStream(const std::string& stream) {
  OUTBOX_RETURN_IF_ERROR(follow());
  jsStreamInfo* rawInfo = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&rawInfo, js_.get(), stream.c_str(), nullptr, &code);
  StreamInfoPtr info(rawInfo);
  // The server's answer (10059), not a timeout or "no responders": only that one says it is gone.
  if (code == JSStreamNotFoundErr) return std::optional<StreamState>();
  if (s != NATS_OK) return fromNats(s, code, "stream info " + stream);
  return std::optional<StreamState>(stateOf(*info));
}

Result<JetStream::LatestStream> JetStream::ensureLatestStream(const std::string& name, const std::string& origin,
                                                               int replicas) {
  OUTBOX_RETURN_IF_ERROR(follow());
  jsStreamSource source;
  jsStreamSource_Init(&source);
  source.Name = origin.c_str();
  jsStreamSource* sources[] = {&source};
  jsStreamConfig create;
  jsStreamConfig_Init(&create);
  create.Sources = sources;
  create.SourcesLen = 1;
  create.MaxMsgsPerSubject = 1;
  create.Replicas = replicas;
  auto info = infoOrCreate(js_.get(), name, create);
  if (!info.isOk()) return info.status();
  LatestStream out;
  if (*info == nullptr) return out;  // created
  const jsStreamConfig* cfg = (*info)->Config;
  auto add = [&](const std::string& what) { out.differs += (out.differs.empty() ? "" : "; ") + what; };
  if (cfg == nullptr) {
    out.differs = "the server sent no config";
    return out;
  }
  if (cfg->SubjectsLen != 0) add("it has subjects of its own");
  if (cfg->MaxMsgsPerSubject != 1) add(fmt::format("max_msgs_per_subject is {}, not 1", cfg->MaxMsgsPerSubject));
  // Limits that would drop a key's last message, or refuse new ones.
  if (cfg->MaxAge != 0) add("it has a max_age");
  if (cfg->MaxMsgs > 0 || cfg->MaxBytes > 0) add("it has max_msgs or max_bytes");
  if (cfg->Sealed) add("it is sealed");
  const jsStreamSource* src = cfg->SourcesLen == 1 ? cfg->Sources[0] : nullptr;
  const bool sourcesOrigin = src != nullptr && src->Name != nullptr && origin == src->Name &&
                             (src->FilterSubject == nullptr || *src->FilterSubject == '\0') &&
                             src->OptStartSeq <= 1 && src->OptStartTime == 0 && src->External == nullptr;
  if (!sourcesOrigin) add(fmt::format("it does not source all of {} alone, from its start", origin));
  for (int i = 0; i < (*info)->SourcesLen; ++i) {
    const jsStreamSourceInfo* from = (*info)->Sources[i];
    if (from != nullptr && from->Name != nullptr && origin == from->Name) out.lag = from->Lag;
  }
  return out;
}

Status JetStream::deleteStream(const std::string& stream) {
  OUTBOX_RETURN_IF_ERROR(follow());
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_DeleteStream(js_.get(), stream.c_str(), nullptr, &code);
  if (s == NATS_NOT_FOUND || code == JSStreamNotFoundErr) return Status::ok();
  return s == NATS_OK ? Status::ok() : fromNats(s, code, "delete stream " + stream);
}

Status JetStream::purgeStream(const std::string& stream, const std::string& subject) {
  OUTBOX_RETURN_IF_ERROR(follow());
  jsErrCode code = static_cast<jsErrCode>(0);
  jsOptions opts;
  jsOptions_Init(&opts);
  if (!subject.empty()) opts.Stream.Purge.Subject = subject.c_str();
  natsStatus s = js_PurgeStream(js_.get(), stream.c_str(), &opts, &code);
  return s == NATS_OK ? Status::ok() : fromNats(s, code, "purge stream " + stream);
}

Status JetStream::deleteMessage(const std::string& stream, uint64_t seq) {
  OUTBOX_RETURN_IF_ERROR(follow());
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_DeleteMsg(js_.get(), stream.c_str(), seq, nullptr, &code);
  return s == NATS_OK ? Status::ok() : fromNats(s, code, fmt::format("delete message {} from {}", seq, stream));
}

Status JetStream::publishAsync(const OutgoingMessage& message) {
  OUTBOX_RETURN_IF_ERROR(follow());
  auto made = makeMessage(message, scratch_);
  if (!made.isOk()) return made.status();
  natsMsg* owned = *made;
  // Its Nats-Msg-Id for the ack, by the message's address (the ack handler gets the same
  // natsMsg back): reading it back from the message would parse every header again. Recorded
  // before the publish, whose ack may come before js_PublishMsgAsync returns.
  std::string msgId(msgIdOf(message));
  {
    std::lock_guard lock(mu_);
    msgIds_[owned] = std::move(msgId);
  }
  // No per-message MaxWait: nats.c would arm a timer for every message. The relay keeps its
  // own deadline for acks and abandons what is pending when it passes.
  natsStatus s = js_PublishMsgAsync(js_.get(), &owned, nullptr);
  // On success nats.c took the message and cleared `owned`; on failure it is still ours.
  if (owned != nullptr) {
    std::lock_guard lock(mu_);
    msgIds_.erase(owned);
  }
  natsMsg_Destroy(owned);
  if (s != NATS_OK) return fromNats(s, 0, "publish");
  // Only now has nats.c set up its pending list (see abandonPending).
  publishedAsync_ = true;
  return Status::ok();
}

void JetStream::takeAcks(std::vector<AckEvent>& out) {
  std::lock_guard lock(mu_);
  while (!acks_.empty()) {
    out.push_back(std::move(acks_.front()));
    acks_.pop_front();
  }
}

void JetStream::waitForAcks(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !acks_.empty(); });
}

void JetStream::abandonPending() {
  if (publishedAsync_) {
    natsMsgList pending{};
    if (js_PublishAsyncGetPendingList(&pending, js_.get()) == NATS_OK) natsMsgList_Destroy(&pending);
  }
  // Acks already queued belong to the publishes just abandoned: the next session must not see them.
  std::lock_guard lock(mu_);
  acks_.clear();
  msgIds_.clear();
}

}  // namespace outbox::nats

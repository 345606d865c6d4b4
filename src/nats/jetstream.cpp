#include "nats/jetstream.h"

#include <nats/nats.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "common/c_deleter.h"
#include "nats/nkey.h"

namespace outbox::nats {

namespace {

using OptionsPtr = CHandle<natsOptions, &natsOptions_Destroy>;
using MsgPtr = CHandle<natsMsg, &natsMsg_Destroy>;
using StreamInfoPtr = CHandle<jsStreamInfo, &jsStreamInfo_Destroy>;
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

constexpr int64_t kNanosPerMilli = 1'000'000;

}  // namespace

Status fromNats(int status, int jsErrCode, std::string_view what) {
  const char* last = nats_GetLastError(nullptr);
  std::string message = fmt::format("{}: nats status {} ({})", what, status,
                                    natsStatus_GetText(static_cast<natsStatus>(status)));
  if (jsErrCode != 0) message += fmt::format(", jetstream error {}", jsErrCode);
  if (last != nullptr && *last != '\0') message += fmt::format(": {}", last);
  switch (static_cast<natsStatus>(status)) {
    case NATS_OK:
      return Status::ok();
    case NATS_NOT_PERMITTED:            // the server's permissions for this user
    case NATS_CONNECTION_AUTH_FAILED:   // user, password, token
    case NATS_SSL_ERROR:                // certificates, TLS required or refused
    case NATS_INVALID_ARG:
    case NATS_INVALID_SUBJECT:
    case NATS_MAX_PAYLOAD:              // a message over the server's max_payload
      return Status::permanent(std::move(message));
    default:
      return Status::transient(std::move(message));
  }
}

void shutdownLibrary() { nats_CloseAndWait(2000); }

ConnectOptions connectOptionsFrom(const NatsConfig& c) {
  ConnectOptions o;
  o.url = c.url;
  o.user = c.user;
  o.password = c.password;
  o.token = c.token;
  o.credsFile = c.credsFile;
  o.nkeySeedFile = c.nkeySeedFile;
  o.tlsCa = c.tlsCa;
  o.tlsCert = c.tlsCert;
  o.tlsKey = c.tlsKey;
  o.tlsServerName = c.tlsServerName;
  o.connectTimeout = c.connectTimeout;
  return o;
}

namespace {

// Whether a TLS failure's text is a certificate check that failed (chain, name), not a handshake
// that ended early.
bool certificateRefused(const std::string& text) {
  std::string lower;
  for (char c : text) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (const char* word : {"certificate", "verify", "mismatch", "hostname"}) {
    if (lower.find(word) != std::string::npos) return true;
  }
  return false;
}

// Whether the connection is TLS: a tls:// URL, or any TLS setting.
bool usesTls(const ConnectOptions& o) {
  return o.url.find("tls://") != std::string::npos || !o.tlsCa.empty() || !o.tlsCert.empty() ||
         !o.tlsServerName.empty();
}

// Signs the server's nonce with the user seed `closure` points to (natsOptions_SetNKey): the
// seed file is read by readNkeySeed alone, never by a second parser in nats.c.
natsStatus signNonce(char** customErrTxt, unsigned char** signature, int* signatureLength, const char* nonce,
                     void* closure) {
  auto signed_ = nkeySign(*static_cast<const std::string*>(closure), nonce, NkeyKind::kUser);
  if (!signed_.isOk()) {
    *customErrTxt = strdup("nats.nkey_seed_file: cannot sign the server's nonce");
    return NATS_ERR;
  }
  *signature = static_cast<unsigned char*>(malloc(signed_->size()));
  if (*signature == nullptr) return NATS_NO_MEMORY;
  memcpy(*signature, signed_->data(), signed_->size());
  *signatureLength = static_cast<int>(signed_->size());
  return NATS_OK;
}

// The login and TLS settings of `o` on `opts`; a failure names the setting. `seed` keeps an nkey
// seed for signNonce, for as long as the connection lives.
Status setSecurity(natsOptions* opts, const ConnectOptions& o, std::string& seed) {
  natsStatus s = NATS_OK;
  if (!o.user.empty()) s = natsOptions_SetUserInfo(opts, o.user.c_str(), o.password.c_str());
  if (s == NATS_OK && !o.token.empty()) s = natsOptions_SetToken(opts, o.token.c_str());
  if (s != NATS_OK) return fromNats(s, 0, "nats options");
  if (!o.credsFile.empty()) {
    s = natsOptions_SetUserCredentialsFromFiles(opts, o.credsFile.c_str(), nullptr);
    if (s != NATS_OK) return fromNats(s, 0, "nats.creds_file " + o.credsFile);
  }
  if (!o.nkeySeedFile.empty()) {
    auto read = readNkeySeed(o.nkeySeedFile);
    if (!read.isOk()) return Status::permanent("nats.nkey_seed_file: " + read.status().message());
    auto publicKey = nkeyPublicKey(*read);
    if (!publicKey.isOk()) return Status::permanent(fmt::format("nats.nkey_seed_file {}: {}", o.nkeySeedFile,
                                                                publicKey.status().message()));
    seed = std::move(read).value();
    s = natsOptions_SetNKey(opts, publicKey->c_str(), &signNonce, &seed);
    if (s != NATS_OK) return fromNats(s, 0, "nats.nkey_seed_file " + o.nkeySeedFile);
  }
  if (!usesTls(o)) return Status::ok();
  if (s = natsOptions_SetSecure(opts, true); s != NATS_OK) return fromNats(s, 0, "nats TLS");
  if (!o.tlsCa.empty()) {
    s = natsOptions_LoadCATrustedCertificates(opts, o.tlsCa.c_str());
    if (s != NATS_OK) return fromNats(s, 0, "nats.tls_ca " + o.tlsCa);
  }
  if (!o.tlsCert.empty()) {
    s = natsOptions_LoadCertificatesChain(opts, o.tlsCert.c_str(), o.tlsKey.c_str());
    if (s != NATS_OK) return fromNats(s, 0, fmt::format("nats.tls_cert {} with nats.tls_key {}", o.tlsCert, o.tlsKey));
  }
  if (!o.tlsServerName.empty()) {
    s = natsOptions_SetExpectedHostname(opts, o.tlsServerName.c_str());
    if (s != NATS_OK) return fromNats(s, 0, "nats.tls_server_name");
  }
  return Status::ok();
}

// " (tls_ca=..., nkey_seed_file=...)": the settings a failed connect used, for its message.
std::string securitySettings(const ConnectOptions& o) {
  std::string out;
  auto add = [&](const char* key, const std::string& value) {
    if (!value.empty()) out += fmt::format("{}{}={}", out.empty() ? " (" : ", ", key, value);
  };
  if (!o.user.empty()) add("user", o.user);
  if (!o.token.empty()) add("token", "****");
  add("creds_file", o.credsFile);
  add("nkey_seed_file", o.nkeySeedFile);
  add("tls_ca", o.tlsCa);
  add("tls_cert", o.tlsCert);
  add("tls_server_name", o.tlsServerName);
  return out.empty() ? out : out + ")";
}

}  // namespace

Result<std::unique_ptr<Connection>> Connection::connect(const ConnectOptions& o) {
  natsOptions* raw = nullptr;
  if (natsStatus s = natsOptions_Create(&raw); s != NATS_OK) return fromNats(s, 0, "nats options");
  OptionsPtr options(raw);
  // natsOptions_SetURL takes one URL; a cluster's list goes in as servers.
  std::vector<std::string> urls;
  std::stringstream list(o.url);
  for (std::string url; std::getline(list, url, ',');) {
    if (!url.empty()) urls.push_back(url);
  }
  std::vector<const char*> servers;
  for (const auto& url : urls) servers.push_back(url.c_str());
  natsStatus s = natsOptions_SetServers(raw, servers.data(), static_cast<int>(servers.size()));
  if (s == NATS_OK) s = natsOptions_SetName(raw, o.name.c_str());
  if (s == NATS_OK) s = natsOptions_SetTimeout(raw, o.connectTimeout.count());
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(raw, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(raw, 250);
  if (s == NATS_OK) s = natsOptions_SetReconnectBufSize(raw, 64 * 1024 * 1024);
  if (s != NATS_OK) return fromNats(s, 0, "nats options");
  auto seed = std::make_unique<std::string>();
  OUTBOX_RETURN_IF_ERROR(setSecurity(raw, o, *seed));
  natsConnection* nc = nullptr;
  s = natsConnection_Connect(&nc, raw);
  if (s != NATS_OK) {
    Status failed = fromNats(s, 0, fmt::format("connect to nats-server at {}{}", o.url, securitySettings(o)));
    // A server that verifies clients drops a TLS connection without a certificate mid-handshake,
    // which reads as a protocol error.
    if (s == NATS_PROTOCOL_ERROR && usesTls(o) && o.tlsCert.empty()) {
      return Status::transient(failed.message() + "; if the server verifies clients, set nats.tls_cert and nats.tls_key");
    }
    // A handshake a server cut short (it was going down) heals; a certificate refused does not.
    if (s == NATS_SSL_ERROR && !certificateRefused(failed.message())) return Status::transient(failed.message());
    return failed;
  }
  return std::unique_ptr<Connection>(new Connection(nc, std::move(seed)));
}

void NatsDeleter::operator()(natsConnection* nc) const {
  natsConnection_Close(nc);
  natsConnection_Destroy(nc);
}

void NatsDeleter::operator()(jsCtx* js) const { jsCtx_Destroy(js); }

void NatsDeleter::operator()(natsSubscription* sub) const {
  natsSubscription_Unsubscribe(sub);
  natsSubscription_Destroy(sub);
}

int64_t Connection::maxPayload() const { return natsConnection_GetMaxPayload(nc_.get()); }

bool Connection::isConnected() const { return natsConnection_Status(nc_.get()) == NATS_CONN_STATUS_CONNECTED; }

Result<std::unique_ptr<JetStream>> JetStream::create(Connection& connection, std::chrono::milliseconds ackTimeout,
                                                     int maxPending, const std::string& domain) {
  std::unique_ptr<JetStream> js(new JetStream());
  js->ackTimeout_ = ackTimeout;
  jsOptions options;
  jsOptions_Init(&options);
  options.Wait = ackTimeout.count();
  if (!domain.empty()) options.Domain = domain.c_str();
  options.PublishAsync.MaxPending = maxPending;
  options.PublishAsync.AckHandler = &JetStream::onAck;
  options.PublishAsync.AckHandlerClosure = js.get();
  options.PublishAsync.StallWait = ackTimeout.count();
  jsCtx* ctx = nullptr;
  natsStatus s = natsConnection_JetStream(&ctx, connection.nc_.get(), &options);
  js->js_.reset(ctx);
  if (s != NATS_OK) return fromNats(s, 0, "jetstream context");
  return js;
}

JetStream::~JetStream() {
  if (js_) abandonPending();
}

void JetStream::onAck(jsCtx*, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure) {
  // Runs on a nats.c thread: copy what the relay needs, queue it, never block.
  auto* self = static_cast<JetStream*>(closure);
  AckEvent event;
  const char* id = nullptr;
  if (natsMsgHeader_Get(msg, "Nats-Msg-Id", &id) == NATS_OK && id != nullptr) event.msgId = id;
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
  natsMsg_Destroy(msg);
  {
    std::lock_guard lock(self->mu_);
    self->acks_.push_back(std::move(event));
  }
  self->cv_.notify_one();
}

Status JetStream::ensureStream(const StreamSettings& settings) {
  jsStreamInfo* rawInfo = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&rawInfo, js_.get(), settings.name.c_str(), nullptr, &code);
  StreamInfoPtr info(rawInfo);
  if (s == NATS_OK) {
    const jsStreamConfig* cfg = info->Config;
    bool matches = cfg != nullptr && cfg->SubjectsLen == 1 && settings.subject == cfg->Subjects[0];
    if (!matches) {
      std::string have;
      for (int i = 0; cfg != nullptr && i < cfg->SubjectsLen; ++i) have += (i ? ", " : "") + std::string(cfg->Subjects[i]);
      return Status::permanent(fmt::format("stream {} exists with subjects [{}], but this source needs [{}]; "
                                           "refusing to publish into it",
                                           settings.name, have, settings.subject));
    }
    return Status::ok();
  }
  if (code != JSStreamNotFoundErr && s != NATS_NOT_FOUND) return fromNats(s, code, "stream info " + settings.name);

  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  const char* subjects[] = {settings.subject.c_str()};
  cfg.Name = settings.name.c_str();
  cfg.Subjects = subjects;
  cfg.SubjectsLen = 1;
  cfg.Storage = js_FileStorage;
  cfg.Replicas = settings.replicas;
  cfg.Duplicates = settings.duplicateWindow.count() * kNanosPerMilli;
  cfg.MaxAge = settings.maxAge.count() * kNanosPerMilli;
  cfg.AllowDirect = true;
  rawInfo = nullptr;
  s = js_AddStream(&rawInfo, js_.get(), &cfg, nullptr, &code);
  StreamInfoPtr created(rawInfo);
  if (s != NATS_OK) return fromNats(s, code, "create stream " + settings.name);
  return Status::ok();
}

Result<StreamState> JetStream::streamState(const std::string& stream) {
  jsStreamInfo* rawInfo = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&rawInfo, js_.get(), stream.c_str(), nullptr, &code);
  StreamInfoPtr info(rawInfo);
  if (s != NATS_OK) return fromNats(s, code, "stream info " + stream);
  StreamState state{info->State.FirstSeq, info->State.LastSeq, info->State.Msgs, {}};
  for (int i = 0; info->Config != nullptr && i < info->Config->SubjectsLen; ++i) {
    state.subjects.emplace_back(info->Config->Subjects[i]);
  }
  return state;
}

Result<std::optional<StoredMessage>> JetStream::getMessage(const std::string& stream, uint64_t seq) {
  natsMsg* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetMsg(&raw, js_.get(), stream.c_str(), seq, nullptr, &code);
  MsgPtr msg(raw);
  if (s == NATS_NOT_FOUND || code == JSNoMessageFoundErr) return std::optional<StoredMessage>();
  if (s != NATS_OK) return fromNats(s, code, fmt::format("get message {} from {}", seq, stream));
  StoredMessage out;
  out.seq = natsMsg_GetSequence(raw);
  out.subject = natsMsg_GetSubject(raw);
  out.data.assign(natsMsg_GetData(raw), static_cast<size_t>(natsMsg_GetDataLength(raw)));
  out.headers = headersOf(raw);
  return std::optional<StoredMessage>(std::move(out));
}

namespace {

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

Result<std::optional<StoredMessage>> Subscription::next(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
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

Status JetStream::deleteStream(const std::string& stream) {
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_DeleteStream(js_.get(), stream.c_str(), nullptr, &code);
  if (s == NATS_NOT_FOUND || code == JSStreamNotFoundErr) return Status::ok();
  return s == NATS_OK ? Status::ok() : fromNats(s, code, "delete stream " + stream);
}

Status JetStream::deleteMessage(const std::string& stream, uint64_t seq) {
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_DeleteMsg(js_.get(), stream.c_str(), seq, nullptr, &code);
  return s == NATS_OK ? Status::ok() : fromNats(s, code, fmt::format("delete message {} from {}", seq, stream));
}

Status JetStream::publishAsync(const OutgoingMessage& message) {
  natsMsg* raw = nullptr;
  natsStatus s = natsMsg_Create(&raw, message.subject.c_str(), nullptr, message.data.data(),
                                static_cast<int>(message.data.size()));
  if (s != NATS_OK) return fromNats(s, 0, "create message");
  MsgPtr msg(raw);
  for (const auto& [key, value] : message.headers) {
    s = natsMsgHeader_Set(raw, key, value.c_str());
    if (s != NATS_OK) return fromNats(s, 0, "set header");
  }
  natsMsg* owned = msg.release();
  // No per-message MaxWait: nats.c would arm a timer for every message. The relay keeps its
  // own deadline for acks and abandons what is pending when it passes.
  s = js_PublishMsgAsync(js_.get(), &owned, nullptr);
  // On success nats.c took the message and cleared `owned`; on failure it is still ours.
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
}

}  // namespace outbox::nats

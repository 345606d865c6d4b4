// The connection to nats-server: options, logins and TLS, and how nats.c's errors read
// (jetstream.h). JetStream itself is in jetstream.cpp.
#include <nats/nats.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/c_deleter.h"
#include "nats/jetstream.h"
#include "nats/nkey.h"

namespace outbox::nats {

namespace {
using OptionsPtr = CHandle<natsOptions, &natsOptions_Destroy>;

std::string connectedUrl(natsConnection* nc) {
  char url[256] = {};
  return natsConnection_GetConnectedUrl(nc, url, sizeof(url)) == NATS_OK ? std::string(url) : std::string("?");
}

// What an operator needs to follow the connection through a cluster's failures (nats.c calls
// these on its own threads; config URLs never hold credentials).
void onDisconnected(natsConnection* nc, void*) {
  if (natsConnection_IsClosed(nc)) return;  // closed on purpose (shutdown): nothing to reconnect
  spdlog::warn("nats: disconnected; reconnecting to a server of the list (publishing waits)");
}

std::atomic<uint64_t> reconnectCount{0};

void onReconnected(natsConnection* nc, void*) {
  ++reconnectCount;
  spdlog::info("nats: reconnected to {}", connectedUrl(nc));
}

// The servers the cluster told us of, beyond the configured ones ("" none).
std::string discoveredServers(natsConnection* nc) {
  char** urls = nullptr;
  int count = 0;
  if (natsConnection_GetDiscoveredServers(nc, &urls, &count) != NATS_OK) return "";
  std::string list;
  for (int i = 0; i < count; ++i) {
    list += (i ? ", " : "") + std::string(urls[i]);
    free(urls[i]);
  }
  free(urls);
  return list;
}

void onDiscoveredServers(natsConnection* nc, void*) {
  spdlog::info("nats: the cluster's servers now include {}", discoveredServers(nc));
}
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
bool usesTls(const NatsConfig& o) {
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
Status setSecurity(natsOptions* opts, const NatsConfig& o, std::string& seed) {
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
std::string securitySettings(const NatsConfig& o) {
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

Result<std::unique_ptr<Connection>> Connection::connect(const NatsConfig& o, const std::string& name) {
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
  if (s == NATS_OK) s = natsOptions_SetName(raw, name.c_str());
  if (s == NATS_OK) s = natsOptions_SetTimeout(raw, o.connectTimeout.count());
  if (s == NATS_OK) s = natsOptions_SetPingInterval(raw, o.pingInterval.count());
  if (s == NATS_OK) s = natsOptions_SetMaxPingsOut(raw, 2);
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(raw, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(raw, 250);
  if (s == NATS_OK) s = natsOptions_SetReconnectBufSize(raw, 64 * 1024 * 1024);
  if (s == NATS_OK) s = natsOptions_SetDisconnectedCB(raw, &onDisconnected, nullptr);
  if (s == NATS_OK) s = natsOptions_SetReconnectedCB(raw, &onReconnected, nullptr);
  if (s == NATS_OK) s = natsOptions_SetDiscoveredServersCB(raw, &onDiscoveredServers, nullptr);
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
    // (Only nats.c's own text is looked at: a file path in the settings may hold those words.)
    const char* last = nats_GetLastError(nullptr);
    if (s == NATS_SSL_ERROR && !certificateRefused(last != nullptr ? last : "")) return Status::transient(failed.message());
    return failed;
  }
  const std::string discovered = discoveredServers(nc);
  spdlog::info("nats: connected to {}{}", connectedUrl(nc),
               discovered.empty() ? "" : "; the cluster also offers " + discovered);
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

uint64_t Connection::reconnects() { return reconnectCount; }

bool Connection::isConnected() const { return natsConnection_Status(nc_.get()) == NATS_CONN_STATUS_CONNECTED; }

}  // namespace outbox::nats

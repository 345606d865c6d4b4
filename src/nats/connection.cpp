// The connection to nats-server: options, logins and TLS, and how nats.c's errors read
// (jetstream.h). JetStream itself is in jetstream.cpp.
#include <nats/nats.h>

#include <atomic>
#include <cctype>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/backoff.h"
#include "common/c_deleter.h"
#include "nats/jetstream.h"
#include "nats/nkey.h"
#include "nats/security.h"

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

struct Connection::Renewal {
  OptionsPtr options;                 // to connect again; nats.c copies them per connection
  std::unique_ptr<std::string> seed;  // an nkey seed the connections sign with; outlives them
  std::string url;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::shared_ptr<natsConnection> nc;  // GUARDED_BY(mu)
  uint64_t generation = 0;             // GUARDED_BY(mu)
  bool closed = false;                 // GUARDED_BY(mu): the server closed nc; a new one is being made
  std::string reason;                  // GUARDED_BY(mu): what it said
  bool stopping = false;               // GUARDED_BY(mu)
  std::thread thread;

  static std::shared_ptr<natsConnection> own(natsConnection* nc) { return {nc, NatsDeleter()}; }
  void replaceClosed();
};

namespace {

// nats.c calls it on its own thread when a connection is closed for good — by the server (an
// -ERR), or by us. The closure is a weak_ptr that is never freed: nats.c may run a callback it
// queued after the Connection is gone.
void onClosed(natsConnection* nc, void* closure) {
  auto renewal = static_cast<std::weak_ptr<Connection::Renewal>*>(closure)->lock();
  if (!renewal) return;
  const char* text = nullptr;
  natsConnection_GetLastError(nc, &text);
  {
    std::lock_guard lock(renewal->mu);
    if (renewal->stopping || renewal->nc.get() != nc) return;
    renewal->closed = true;
    renewal->reason = text != nullptr && *text != '\0' ? text : "no reason given";
  }
  renewal->cv.notify_all();
}

}  // namespace

// The thread's loop: waits for a closed connection, then connects anew until it works or stops.
void Connection::Renewal::replaceClosed() {
  std::unique_lock lock(mu);
  while (true) {
    cv.wait(lock, [&] { return stopping || closed; });
    if (stopping) return;
    spdlog::error("nats: nats-server closed the connection ({}); making a new one (publishing waits)", reason);
    Backoff backoff(std::chrono::milliseconds(200), std::chrono::milliseconds(5000));
    while (!stopping) {
      lock.unlock();
      natsConnection* fresh = nullptr;
      natsStatus s = natsConnection_Connect(&fresh, options.get());
      Status failed = s == NATS_OK ? Status::ok() : fromNats(s, 0, "connect to nats-server at " + url);
      lock.lock();
      if (s == NATS_OK) {
        std::shared_ptr<natsConnection> old = std::exchange(nc, own(fresh));
        lock.unlock();
        old.reset();  // closed already; destroyed outside the lock
        lock.lock();
        ++generation;
        closed = false;
        reason.clear();
        ++reconnectCount;
        spdlog::info("nats: connected anew to {} after nats-server closed the connection", connectedUrl(fresh));
        break;
      }
      auto delay = backoff.next();
      spdlog::warn("nats: {}; retrying in {} ms", failed.message(), delay.count());
      cv.wait_for(lock, delay, [&] { return stopping; });
    }
  }
}

Result<std::unique_ptr<Connection>> Connection::connect(const NatsConfig& o, const std::string& name) {
  auto renewal = std::make_shared<Renewal>();
  renewal->url = o.url;
  natsOptions* raw = nullptr;
  if (natsStatus s = natsOptions_Create(&raw); s != NATS_OK) return fromNats(s, 0, "nats options");
  renewal->options.reset(raw);
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
  if (s == NATS_OK) s = natsOptions_SetClosedCB(raw, &onClosed, new std::weak_ptr<Renewal>(renewal));
  if (s != NATS_OK) return fromNats(s, 0, "nats options");
  renewal->seed = std::make_unique<std::string>();
  OUTBOX_RETURN_IF_ERROR(setSecurity(raw, o, *renewal->seed));
  natsConnection* nc = nullptr;
  s = natsConnection_Connect(&nc, raw);
  if (s != NATS_OK) {
    Status failed = fromNats(s, 0, fmt::format("connect to nats-server at {}{}", o.url, securitySettings(o)));
    // A server that verifies clients drops a TLS connection without a certificate mid-handshake,
    // which reads as a protocol error.
    if (s == NATS_PROTOCOL_ERROR && usesTls(o) && o.tlsCert.empty()) {
      return Status::transient(failed.message() +
                               "; if the server verifies clients, set nats.tls_cert and nats.tls_key");
    }
    // A handshake a server cut short (it was going down) heals; a certificate refused does not.
    // (Only nats.c's own text is looked at: a file path in the settings may hold those words.)
    const char* last = nats_GetLastError(nullptr);
    if (s == NATS_SSL_ERROR && !certificateRefused(last != nullptr ? last : "")) {
      return Status::transient(failed.message());
    }
    return failed;
  }
  const std::string discovered = discoveredServers(nc);
  spdlog::info("nats: connected to {}{}", connectedUrl(nc),
               discovered.empty() ? "" : "; the cluster also offers " + discovered);
  {
    std::lock_guard lock(renewal->mu);
    renewal->nc = Renewal::own(nc);
  }
  return std::unique_ptr<Connection>(new Connection(std::move(renewal)));
}

Connection::Connection(std::shared_ptr<Renewal> renewal) : renewal_(std::move(renewal)) {
  renewal_->thread = std::thread([r = renewal_.get()] { r->replaceClosed(); });
}

Connection::~Connection() {
  {
    std::lock_guard lock(renewal_->mu);
    renewal_->stopping = true;
  }
  renewal_->cv.notify_all();
  renewal_->thread.join();
  std::shared_ptr<natsConnection> last;
  {
    std::lock_guard lock(renewal_->mu);
    last = std::move(renewal_->nc);
  }
  last.reset();  // closes it, outside the lock (the closed callback takes it)
}

std::shared_ptr<natsConnection> Connection::current(uint64_t* generation) const {
  std::lock_guard lock(renewal_->mu);
  if (generation != nullptr) *generation = renewal_->generation;
  return renewal_->nc;
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

int64_t Connection::maxPayload() const { return natsConnection_GetMaxPayload(current(nullptr).get()); }

uint64_t Connection::reconnects() { return reconnectCount; }

bool Connection::isConnected() const {
  return natsConnection_Status(current(nullptr).get()) == NATS_CONN_STATUS_CONNECTED;
}

std::string Connection::problem() const {
  {
    std::lock_guard lock(renewal_->mu);
    if (renewal_->closed) return "nats-server closed the connection (" + renewal_->reason + "); making a new one";
  }
  return isConnected() ? "" : "nats-server is not connected (reconnecting)";
}

}  // namespace outbox::nats

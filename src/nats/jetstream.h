#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "config/config.h"

// The only headers in the project that name nats.c types are this one and src/nats/*.cpp.
typedef struct __natsConnection natsConnection;
typedef struct __jsCtx jsCtx;
typedef struct __natsMsg natsMsg;
typedef struct __natsSubscription natsSubscription;
struct jsPubAck;
struct jsPubAckErr;

namespace outbox::nats {

// Owns the nats.c handles a Connection, JetStream and Subscription hold (CHandle's pattern; the
// calls are in jetstream.cpp; src/nats/ is the only code that includes nats.h): closes and destroys a
// connection, destroys a JetStream context, unsubscribes and destroys a subscription.
struct NatsDeleter {
  void operator()(natsConnection* nc) const;
  void operator()(jsCtx* js) const;
  void operator()(natsSubscription* sub) const;
};
template <typename T>
using NatsHandle = std::unique_ptr<T, NatsDeleter>;

// Converts a nats.c status (and the JetStream error code where there is one) into a Status,
// keeping both codes in the text. What the server or the client library refuses as asked — a
// permission, a login, TLS, a bad subject or argument, a message over max_payload — is permanent:
// asking again fails the same way until an operator changes something. Everything else is
// transient: timeouts, lost connections, "no responders" (no stream, or JetStream not ready), and
// JetStream API errors, which clear up when a restarted server has recovered (only callers know
// when one of those is for good).
Status fromNats(int natsStatus, int jsErrCode, std::string_view what);

// Call once at exit, after every Connection is gone.
void shutdownLibrary();

// The login and TLS files of `config` loaded as Connection::connect loads them, without
// connecting (security.cpp): the CA and the client certificate and key (PEM, the key the
// certificate's, no passphrase), the nkey seed, the creds file's JWT and seed; then nats.c's
// options set as connect() sets them. A permanent error names the setting ("nats.<key>", or
// what `names` maps the key to, e.g. {"tls_ca", "--nats-ca"}) and why, never the file's content.
// check-config and the start of `run` call it: a file `run` could never use is exit 2 at once,
// not a connect retried for ever. It opens nats.c, which starts threads: in a process with a
// SignalWatcher, call it after the watcher is made.
Status checkSettings(const NatsConfig& config, const std::map<std::string, std::string>& names = {});

// One connection to nats-server that is never given up: nats.c reconnects a lost one by itself,
// and one the server closes (nats.c then stops: an -ERR such as "Maximum Control Line Exceeded")
// is replaced by a new one from a thread of this object, with backoff, logged both ways. JetStream
// contexts made on it follow the replacement on their next call. Thread-safe.
class Connection {
 public:
  // With the [nats] settings of the config (the URL or URLs, a login, TLS); `name` names the
  // client to the server. With any TLS setting, or a tls:// URL, the connection is TLS.
  static Result<std::unique_ptr<Connection>> connect(const NatsConfig& config,
                                                     const std::string& name = "outbox-bridge");
  // Stops replacing and closes; drains nothing: callers finish their publishes first.
  ~Connection();
  int64_t maxPayload() const;
  bool isConnected() const;
  // Why the connection is not up, for /readyz ("" while it is).
  std::string problem() const;
  // Times a connection of this process was lost and made again (to the same server or another of
  // the cluster), or closed by the server and replaced. Counted for the process, not the object:
  // nats.c may still run a reconnect callback it queued after the connection is destroyed.
  static uint64_t reconnects();

  struct Renewal;  // the connection now, and the thread that replaces a closed one (connection.cpp)

 private:
  friend class JetStream;
  explicit Connection(std::shared_ptr<Renewal> renewal);
  // The natsConnection now and its generation (one more for each replacement).
  std::shared_ptr<natsConnection> current(uint64_t* generation) const;
  std::shared_ptr<Renewal> renewal_;
};

struct StreamSettings {
  std::string name;
  std::string subject;  // e.g. "control.account.>"
  std::chrono::milliseconds duplicateWindow{120'000};
  int replicas = 1;
  std::chrono::milliseconds maxAge{0};
};

// A message read back from a stream.
struct StoredMessage {
  uint64_t seq = 0;
  int64_t timestampNanos = 0;  // when the server stored it (ns since the epoch)
  std::string subject;
  std::string data;
  std::map<std::string, std::string> headers;
};

struct StreamState {
  uint64_t firstSeq = 0;
  uint64_t lastSeq = 0;
  uint64_t messages = 0;
  std::vector<std::string> subjects;
  int replicas = 1;
  std::string leader;  // the server leading a clustered stream ("" on a single server)
  int64_t createdNanos = 0;   // when the stream was made (the server's clock, ns since the epoch)
  int64_t lastTimeNanos = 0;  // when its last message was stored (kept through a purge); 0: never
  bool allowDirect = false;   // it answers direct gets
};

// An ordered consumer on a stream, from a start sequence on: messages arrive in stream order,
// once each; the library recreates the consumer by itself when it misses one. One thread.
class Subscription {
 public:
  // The next message, or nullopt when none came within `timeout`.
  Result<std::optional<StoredMessage>> next(std::chrono::milliseconds timeout);

 private:
  friend class JetStream;
  explicit Subscription(natsSubscription* sub) : sub_(sub) {}
  NatsHandle<natsSubscription> sub_;
};

// A message to publish: subject, body and headers (Nats-Msg-Id among them).
struct OutgoingMessage {
  std::string subject;
  std::string_view data;
  std::vector<std::pair<const char*, std::string>> headers;
  std::vector<std::pair<std::string, std::string>> moreHeaders;  // names not known in advance
};

// The server's answer to one asynchronous publish, handed from the library's thread to the
// publishing thread.
struct AckEvent {
  std::string msgId;          // the Nats-Msg-Id header of the message
  uint64_t seq = 0;           // valid when ok
  bool ok = false;
  bool duplicate = false;     // the server had this Nats-Msg-Id already (seq: the first copy's)
  bool wrongLastSeq = false;  // a fence rejected it (Nats-Expected-Last-Sequence or -Msg-Id)
  std::string error;          // set when !ok
};

// A JetStream context with its own asynchronous-publish acknowledgement queue. One per source.
// publishAsync(), takeAcks() and waitForAcks() are for one thread (the source's relay thread);
// the ack handler that fills the queue runs on a nats.c thread. `connection` must outlive it.
class JetStream {
 public:
  // `domain`: the JetStream domain to address ("" for the server's own).
  // A connection the server closed and the owner replaced is followed on the next call: the
  // publishes in flight on the old one are abandoned (no AckEvent comes for them).
  static Result<std::unique_ptr<JetStream>> create(Connection& connection, std::chrono::milliseconds ackTimeout,
                                                   int maxPending, const std::string& domain = "");
  ~JetStream();  // abandons the publishes still waiting for their ack

  // Creates the stream if it is missing; an existing stream whose subjects differ from
  // settings.subject is refused with a permanent Status. `replicas`, when given, gets the number
  // of replicas the stream has (an existing one keeps its own).
  Status ensureStream(const StreamSettings& settings, int* replicas = nullptr);
  // A stream that does not exist is a transient error here, as a timeout is.
  Result<StreamState> streamState(const std::string& stream);
  // nullopt when the server says the stream does not exist (deleted, or not created yet).
  Result<std::optional<StreamState>> findStream(const std::string& stream);
  // nullopt when no message has that sequence (deleted, expired, or never written).
  Result<std::optional<StoredMessage>> getMessage(const std::string& stream, uint64_t seq);
  // The first message `stream` holds at or after `seq`, however many deleted ones lie before it (a
  // direct get, next_by_subj ">"); nullopt when it holds none there. The stream must allow direct
  // gets (StreamState::allowDirect; the bridge makes its streams so): else it times out.
  Result<std::optional<StoredMessage>> firstMessageFrom(const std::string& stream, uint64_t seq);
  // The last message of `subject` in `stream` (a get-by-subject), or nullopt when it has none.
  Result<std::optional<StoredMessage>> lastMessage(const std::string& stream, const std::string& subject);
  // A latest-value stream (docs/design.md, "The message shaped by its row"): `name` sources `origin` with
  // max_msgs_per_subject = 1 and no subjects of its own; created when missing. `differs` is empty
  // when it is (or now is) such a stream, else how an existing one differs (it is left as it is).
  struct LatestStream {
    std::string differs;
    uint64_t lag = 0;  // messages of `origin` it has yet to take in, as the server reports
  };
  Result<LatestStream> ensureLatestStream(const std::string& name, const std::string& origin, int replicas);
  // Every stored message from `fromSeq` through `throughSeq`, in order, read with an ordered
  // consumer on `subject` (a filter within the stream). Deleted messages are simply absent.
  // Fails when no new message arrives for `idleTimeout`.
  Result<std::vector<StoredMessage>> readRange(const std::string& stream, const std::string& subject, uint64_t fromSeq,
                                               uint64_t throughSeq, std::chrono::milliseconds idleTimeout);
  // An ordered consumer on `subject` within `stream`, starting at `startSeq` (at least 1).
  Result<std::unique_ptr<Subscription>> subscribe(const std::string& stream, const std::string& subject,
                                                  uint64_t startSeq);
  Status deleteStream(const std::string& stream);
  // Removes every message; the stream keeps its sequence numbers (the next one follows the last).
  // `subject`: only the messages on it (a wildcard may be), as `nats stream purge --subject`.
  Status purgeStream(const std::string& stream, const std::string& subject = "");
  Status deleteMessage(const std::string& stream, uint64_t seq);

  // Hands the message to nats.c; its AckEvent arrives later through takeAcks(). A failure here
  // means the message was not sent and no AckEvent will come for it.
  Status publishAsync(const OutgoingMessage& message);
  // Moves every ack received so far into `out`.
  void takeAcks(std::vector<AckEvent>& out);
  // Waits until an ack is queued or `timeout` passes.
  void waitForAcks(std::chrono::milliseconds timeout);
  // Forgets every publish still waiting for its ack: no AckEvent will come for them.
  void abandonPending();

 private:
  explicit JetStream(Connection& connection) : connection_(connection) {}
  static void onAck(jsCtx* js, natsMsg* msg, ::jsPubAck* pa, ::jsPubAckErr* pae, void* closure);
  // Makes the context on the connection's current natsConnection when it is not made on it yet.
  Status follow();

  Connection& connection_;
  int maxPending_ = 0;
  std::string domain_;
  uint64_t generation_ = 0;                 // of the natsConnection js_ was made on
  std::shared_ptr<natsConnection> nc_;      // that natsConnection; outlives js_
  std::chrono::milliseconds ackTimeout_{5000};
  bool publishedAsync_ = false;  // nats.c 3.4 crashes on a pending-list request before any async publish
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<AckEvent> acks_;  // GUARDED_BY(mu_)
  // The Nats-Msg-Id of each message in flight, by the natsMsg nats.c hands back to onAck.
  std::unordered_map<const natsMsg*, std::string> msgIds_;  // GUARDED_BY(mu_)
  std::string scratch_;  // publishAsync's: a message is encoded into it
  // Last, so it is destroyed first: its ack handler uses the members above.
  NatsHandle<jsCtx> js_;
};

}  // namespace outbox::nats

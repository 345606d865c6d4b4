#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "http/probe.h"
#include "metrics/snapshot_metrics.h"
#include "metrics/source_metrics.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}

namespace outbox {

// A source as the HTTP server sees it. The pointers must outlive the server.
struct HttpSource {
  const SourceConfig* config = nullptr;
  SourceMetrics* metrics = nullptr;  // null on a process that only serves (no relay)
};

// The NATS connection as /readyz and /metrics show it.
struct NatsLink {
  bool connected = false;
  uint64_t reconnects = 0;
  std::string problem;  // why it is not connected, for /readyz ("" for a generic reason)
};

// The bridge's HTTP server: snapshots (section 5), /healthz, /readyz, /metrics, and the admin
// API under /v1/admin (bearer token: status, pause/resume, leases, quarantine). Runs its own
// listener thread and a worker pool; every handler is thread-safe. Errors are JSON bodies
// {"error": "..."} with a 4xx/5xx status and never contain SQL or credentials.
class HttpServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 8080;                     // 0: any free port (see port())
    std::string tlsCert;                 // PEM paths: HTTPS when both are set
    std::string tlsKey;
    // /metrics, /healthz and /readyz on a listener of their own (plain HTTP), not on the main one;
    // metricsPort -1: on the main one.
    std::string metricsHost = "127.0.0.1";
    int metricsPort = -1;
    size_t maxSnapshotStreams = 4;       // concurrent snapshot streams; more get 503
    size_t workers = 16;
    std::chrono::milliseconds stuckAfter{300'000};  // pending this long on a leader: /healthz 503
    size_t maxRequestBytes = 16 * 1024;
    std::string adminToken;  // secret; empty: the admin API answers 403
  };
  // `nats` says how the NATS connection is now (/readyz, /metrics).
  HttpServer(Options options, std::vector<HttpSource> sources, std::function<NatsLink()> nats);
  ~HttpServer();

  // Binds and starts serving; fails when an address cannot be bound or the certificate not loaded.
  Status start();
  int port() const { return main_.port; }
  int metricsPort() const { return metrics_.port; }  // 0 when there is no separate listener
  void stop();

 private:
  struct Listener {
    std::unique_ptr<httplib::Server> server;
    std::thread thread;
    int port = 0;
  };
  // Binds `l` to host:port (0: any free port); start() then starts its thread.
  Status bind(Listener& l, const std::string& host, int port);
  // The pre-routing (404/405), error and exception handlers of a listener serving the health
  // routes, the API (snapshots and admin), or both.
  void commonHandlers(httplib::Server& svr, bool health, bool api);
  void snapshotRoutes(httplib::Server& svr);
  void healthRoutes(httplib::Server& svr);
  void adminRoutes();
  using BodyHandler = std::function<void(const httplib::Request&, const std::string& body, httplib::Response&)>;
  // Registers a POST route whose handler gets the whole body ("" when the client sent none).
  void postWithBody(const std::string& pattern, BodyHandler handler);
  // Whether the request carries the admin token; otherwise fills in 401/403.
  bool authorized(const httplib::Request& req, httplib::Response& res) const;
  const HttpSource* findSource(const std::string& name) const;

  Options options_;
  std::vector<HttpSource> sources_;
  std::vector<std::unique_ptr<SourceProbe>> probes_;
  std::function<NatsLink()> nats_;
  Listener main_;
  Listener metrics_;  // no server unless Options::metricsPort >= 0
  std::unique_ptr<SnapshotMetrics> snapshotMetrics_;
  std::atomic<size_t> activeSnapshots_{0};
  std::atomic<bool> stopping_{false};  // snapshot streams end early once set
};

// "HOST:PORT" from config into host and port; false when malformed.
bool splitListen(const std::string& listen, std::string& host, int& port);

}  // namespace outbox

#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "http/message.h"
#include "http/probe.h"
#include "http/task_pool.h"
#include "http/transport.h"
#include "metrics/snapshot_metrics.h"
#include "metrics/source_metrics.h"
#include "snapshot/summary_cache.h"

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

// The bridge's HTTP server: snapshots (docs/consumers.md, "2. Bootstrap: the snapshot"), /healthz,
// /readyz, /metrics, and the admin API under /v1/admin (bearer token; its routes in
// admin_routes.cpp). Requests are read by an HttpTransport (every client held to its limits) and handled
// on two pools of threads: the health routes on one of their own, so snapshots and admin calls
// cannot starve the probes. Every handler is thread-safe. Errors are JSON bodies {"error": "..."}
// with a 4xx/5xx status and never contain SQL or credentials.
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
    size_t workers = 16;                 // snapshots and the admin API
    size_t healthWorkers = 2;            // /healthz, /readyz, /metrics
    std::chrono::milliseconds stuckAfter{300'000};  // pending this long on a leader: /healthz 503
    HttpLimits limits;
    // Unauthenticated admin requests: one log line per this period, with the count of the others.
    std::chrono::milliseconds deniedLogPeriod{10'000};
    std::string adminToken;  // secret; empty: the admin API answers 403
    // The process's other connection pools by purpose ("relay", "lease"), for /metrics; the
    // probes' own ("probe") is added. They outlive the server.
    std::vector<std::pair<std::string, const db::ConnectionPools*>> pools;
  };
  // `nats` says how the NATS connection is now (/readyz, /metrics).
  HttpServer(Options options, std::vector<HttpSource> sources, std::function<NatsLink()> nats);
  // Connections the probes (/readyz, /metrics, /sources) open to one server, at most.
  static constexpr size_t kProbeConnections = 2;
  ~HttpServer();

  // Binds and starts serving; fails when an address cannot be bound or the certificate not loaded.
  Status start();
  int port() const { return ports_.main; }
  int metricsPort() const { return ports_.metrics; }  // 0 when there is no separate listener
  void stop();

 private:
  enum class Pool { kHealth, kApi };
  using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
  // One route: its method (GET also answers HEAD), path pattern, pool and handler. The routes of
  // a listener are its one list: dispatch, 404 and 405 (with Allow) all come from it.
  struct Route {
    std::string method;
    std::regex pattern;
    Pool pool;
    Handler handler;
  };
  void snapshotRoutes(std::vector<Route>& routes);  // snapshot_routes.cpp
  // ?summary=true of `source`: from its SummaryCache (snapshot_routes.cpp).
  void summary(const SourceConfig& source, HttpResponse& res);
  void healthRoutes(std::vector<Route>& routes);
  void adminRoutes(std::vector<Route>& routes);  // admin_routes.cpp
  // The admin API's answers: one source's status, and every source's lease (admin_routes.cpp).
  std::string statusJson(const HttpSource& source) const;
  std::string leasesJson() const;
  // Finds the route of `request` and runs it on its pool; 404 or 405 when there is none.
  void dispatch(const std::vector<Route>& routes, HttpRequest request, HttpTransport::Reply reply);
  // The audit log of admin calls (who, what, the answer, the path cut short): each call with the
  // token; any other (401, 403, 404, 405, 400, 408, 413, 414) at most once a period, with the
  // count of those not logged. Never blocks: the line is written on a pool's thread.
  void logAdminCall(const HttpRequest& request, int status);
  // Whether the request carries the admin token (compared in constant time).
  bool carriesToken(const HttpRequest& req) const;
  // Whether the request carries the admin token; otherwise fills in 401/403.
  bool authorized(const HttpRequest& req, HttpResponse& res) const;
  const HttpSource* findSource(const std::string& name) const;
  // The probe of a source of sources_ (by its name).
  SourceProbe& probeOf(const HttpSource& source) const { return *probes_.at(source.config->name); }

  Options options_;
  std::vector<HttpSource> sources_;
  // The probes' connections: a couple per server, however many sources (docs/design.md,
  // "Connections"); before the probes, which borrow from them.
  db::ConnectionPools probePools_{kProbeConnections};
  // The pools /metrics shows: the options' and the probes'.
  std::vector<std::pair<std::string, const db::ConnectionPools*>> metricPools() const {
    auto all = options_.pools;
    all.emplace_back("probe", &probePools_);
    return all;
  }
  SourceProbes probes_;
  std::function<NatsLink()> nats_;
  std::vector<Route> mainRoutes_;
  std::vector<Route> metricsRoutes_;  // empty unless Options::metricsPort >= 0
  struct Ports {
    int main = 0;
    int metrics = 0;
  } ports_;
  std::unique_ptr<SnapshotMetrics> snapshotMetrics_;
  // Each source's summaries, by name: at most one read of its table per summary_interval.
  std::map<std::string, std::unique_ptr<SummaryCache>> summaries_;
  std::mutex deniedMu_;
  std::chrono::steady_clock::time_point deniedLoggedAt_;  // GUARDED_BY(deniedMu_)
  uint64_t deniedSuppressed_ = 0;                         // GUARDED_BY(deniedMu_)
  std::atomic<size_t> activeSnapshots_{0};
  std::atomic<bool> stopping_{false};  // snapshot streams end early, queued requests go unanswered
  // The transport after the pools: destroyed before them (stop() orders the rest).
  std::unique_ptr<TaskPool> healthPool_;
  std::unique_ptr<TaskPool> apiPool_;
  std::unique_ptr<TaskPool> logPool_;  // the audit log's lines, off the I/O thread
  std::unique_ptr<HttpTransport> transport_;
};

// "HOST:PORT" from config into host and port; false when malformed.
bool splitListen(const std::string& listen, std::string& host, int& port);

}  // namespace outbox

#include "http/server.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/log.h"
#include "http/json_response.h"
#include "http/metrics_page.h"

namespace outbox {

bool splitListen(const std::string& listen, std::string& host, int& port) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  auto digits = listen.substr(colon + 1);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  return ec == std::errc() && end == digits.data() + digits.size() && port >= 0 && port <= 65535;
}

HttpServer::HttpServer(Options options, std::vector<HttpSource> sources, std::function<NatsLink()> nats)
    : options_(std::move(options)),
      sources_(std::move(sources)),
      nats_(std::move(nats)),
      snapshotMetrics_(std::make_unique<SnapshotMetrics>()) {
  for (const auto& s : sources_) {
    probes_.emplace(s.config->name, std::make_unique<SourceProbe>(*s.config, probePools_));
    summaries_.emplace(s.config->name, std::make_unique<SummaryCache>(s.config->summaryInterval));
  }
}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start() {
  const bool separate = options_.metricsPort >= 0;
  adminRoutes(mainRoutes_);
  snapshotRoutes(mainRoutes_);
  healthRoutes(separate ? metricsRoutes_ : mainRoutes_);
  transport_ = std::make_unique<HttpTransport>(options_.limits);
  // The paths a listener's reserved connections serve: its health routes.
  auto healthPaths = [](const std::vector<Route>& routes) {
    return [&routes](const std::string& path) {
      return std::any_of(routes.begin(), routes.end(),
                         [&](const Route& r) { return r.pool == Pool::kHealth && std::regex_match(path, r.pattern); });
    };
  };
  // Both addresses are bound before either serves: a failure leaves no thread to stop.
  auto main = transport_->listen(
      options_.host, options_.port, options_.tlsCert, options_.tlsKey,
      [this](HttpRequest r, HttpTransport::Reply reply) { dispatch(mainRoutes_, std::move(r), std::move(reply)); },
      [this](const HttpRequest& r, int status) { logAdminCall(r, status); }, healthPaths(mainRoutes_));
  // A failure names the key, as a config error would (the address in use by another program).
  auto named = [](const char* key, const Status& s) {
    return s.isPermanent() ? s : Status::fatal(fmt::format("{}: {}", key, s.message()));
  };
  if (!main.isOk()) return named("http.listen", main.status());
  ports_.main = *main;
  if (separate) {
    auto metrics = transport_->listen(
        options_.metricsHost, options_.metricsPort, "", "",
        [this](HttpRequest r, HttpTransport::Reply reply) { dispatch(metricsRoutes_, std::move(r), std::move(reply)); },
        nullptr, healthPaths(metricsRoutes_));
    if (!metrics.isOk()) return named("http.metrics_listen", metrics.status());
    ports_.metrics = *metrics;
  }
  healthPool_ = std::make_unique<TaskPool>(options_.healthWorkers);
  apiPool_ = std::make_unique<TaskPool>(options_.workers);
  logPool_ = std::make_unique<TaskPool>(1);
  transport_->start();
  spdlog::info("http: listening on {}://{}:{}", options_.tlsCert.empty() ? "http" : "https", options_.host,
               ports_.main);
  if (separate) {
    spdlog::info("http: /metrics, /healthz and /readyz on http://{}:{}", options_.metricsHost, ports_.metrics);
  }
  return Status::ok();
}

void HttpServer::stop() {
  stopping_ = true;
  if (!transport_) return;
  // Connections close first (a streamed answer's next write fails at once), then the handlers
  // still running end, then the transport's thread.
  transport_->shutdown();
  if (healthPool_) healthPool_->join();
  if (apiPool_) apiPool_->join();
  transport_->stop();
  if (logPool_) logPool_->join();
}

void HttpServer::dispatch(const std::vector<Route>& routes, HttpRequest request, HttpTransport::Reply reply) {
  const bool get = request.method == "GET" || request.method == "HEAD";
  const Route* found = nullptr;
  std::string allowed;
  for (const auto& route : routes) {
    std::smatch m;
    if (!std::regex_match(request.path, m, route.pattern)) continue;
    if (route.method == request.method || (route.method == "GET" && get)) {
      request.matches.assign(m.begin(), m.end());
      found = &route;
      break;
    }
    allowed = route.method;
  }
  if (found == nullptr) {
    HttpResponse res;
    if (allowed.empty()) {
      jsonError(res, 404, fmt::format("no route for {} {}", request.method, request.path));
    } else {
      res.setHeader("Allow", allowed == "GET" ? "GET, HEAD" : allowed);
      jsonError(res, 405, fmt::format("method {} is not allowed on {}; use {}", request.method, request.path, allowed));
    }
    return reply(std::move(res));
  }
  TaskPool& pool = found->pool == Pool::kHealth ? *healthPool_ : *apiPool_;
  pool.post([this, found, request = std::move(request), reply = std::move(reply)] {
    if (stopping_.load()) return;  // unanswered: the connection closes
    HttpResponse res;
    try {
      found->handler(request, res);
    } catch (const std::exception&) {
      res = HttpResponse();
      jsonError(res, 500, "internal error");
    }
    reply(std::move(res));
  });
}

void HttpServer::logAdminCall(const HttpRequest& request, int status) {
  if (request.path.rfind("/v1/admin/", 0) != 0) return;
  std::string suppressed;
  if (!carriesToken(request)) {
    // A client without the token could otherwise write the log as fast as it can send.
    std::lock_guard lock(deniedMu_);
    auto now = std::chrono::steady_clock::now();
    if (deniedLoggedAt_.time_since_epoch().count() != 0 && now - deniedLoggedAt_ < options_.deniedLogPeriod) {
      ++deniedSuppressed_;
      return;
    }
    if (deniedSuppressed_ > 0) {
      suppressed = fmt::format(" ({} more unauthenticated admin requests not logged since the last such line)",
                               deniedSuppressed_);
    }
    deniedLoggedAt_ = now;
    deniedSuppressed_ = 0;
  }
  constexpr size_t kLoggedPath = 200;  // bytes of a path the line keeps
  std::string path = logSafe(std::string_view(request.path).substr(0, kLoggedPath));
  if (request.path.size() > kLoggedPath) path += fmt::format("... ({} bytes)", request.path.size());
  logPool_->post([line = fmt::format("admin {} {} from {}: {}{}", logSafe(request.method), path, request.remoteAddr,
                                     status, suppressed)] { spdlog::info("{}", line); });
}

void HttpServer::healthRoutes(std::vector<Route>& routes) {
  routes.push_back({"GET", std::regex("/healthz"), Pool::kHealth, [this](const HttpRequest&, HttpResponse& res) {
    std::string stuck;
    for (const HttpSource& s : sources_) {
      // Only the leader moves rows; a standby or a halted source is not "stuck".
      if (s.metrics == nullptr || !s.metrics->leader.load() || s.metrics->halted.load() || s.metrics->paused.load()) {
        continue;
      }
      auto probe = probeOf(s).get();
      double limit = std::chrono::duration<double>(options_.stuckAfter).count();
      if (probe.reachable && probe.pendingRows > 0 && probe.oldestPendingSeconds > limit) {
        stuck += fmt::format("{}{}:{}", stuck.empty() ? "" : ",", jsonQuoted(s.config->name),
                             jsonQuoted(fmt::format("{} rows pending, the oldest for {:.0f} s", probe.pendingRows,
                                                    probe.oldestPendingSeconds)));
      }
    }
    if (stuck.empty()) {
      res.setContent(R"({"status":"ok"})", "application/json");
    } else {
      res.status = 503;
      res.setContent(R"({"status":"stuck","sources":{)" + stuck + "}}", "application/json");
    }
  }});

  routes.push_back({"GET", std::regex("/readyz"), Pool::kHealth, [this](const HttpRequest&, HttpResponse& res) {
    std::vector<std::string> reasons;
    if (NatsLink nats = nats_(); !nats.connected) {
      reasons.push_back(nats.problem.empty() ? "nats-server is not connected" : nats.problem);
    }
    for (const HttpSource& s : sources_) {
      auto r = probeOf(s).get();
      if (!r.reachable) reasons.push_back(r.error);
    }
    if (reasons.empty()) {
      res.setContent(R"({"status":"ready"})", "application/json");
      return;
    }
    std::string list;
    for (const auto& r : reasons) list += (list.empty() ? "" : ",") + jsonQuoted(r);
    res.status = 503;
    res.setContent(R"({"status":"not ready","reasons":[)" + list + "]}", "application/json");
  }});

  routes.push_back({"GET", std::regex("/metrics"), Pool::kHealth, [this](const HttpRequest&, HttpResponse& res) {
    res.setContent(renderMetricsPage(sources_, probes_, *snapshotMetrics_, nats_(), metricPools()),
                   "text/plain; version=0.0.4; charset=utf-8");
  }});
}

const HttpSource* HttpServer::findSource(const std::string& name) const {
  for (const auto& s : sources_) {
    if (s.config->name == name) return &s;
  }
  return nullptr;
}

}  // namespace outbox

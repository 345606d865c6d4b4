#include "http/server.h"

#include <httplib.h>

#include <array>
#include <charconv>
#include <mutex>
#include <regex>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/log.h"
#include "http/json_response.h"
#include "http/metrics_page.h"
#include "snapshot/snapshot.h"

namespace outbox {

namespace {

// httplib routes are regular expressions; a configured path is matched literally.
std::string escapeRegex(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// `text` with control characters as \xNN: a request path cannot forge a log line.
std::string printable(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

}  // namespace

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
  for (const auto& s : sources_) probes_.push_back(std::make_unique<SourceProbe>(*s.config));
  if (!options_.tlsCert.empty()) {
    main_.server = std::make_unique<httplib::SSLServer>(options_.tlsCert.c_str(), options_.tlsKey.c_str());
  } else {
    main_.server = std::make_unique<httplib::Server>();
  }
  if (options_.metricsPort >= 0) metrics_.server = std::make_unique<httplib::Server>();
}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start() {
  if (!main_.server->is_valid()) {
    return Status::permanent(fmt::format("http.tls_cert, http.tls_key: cannot load the certificate {} with the key {} "
                                         "(PEM files, the key matching the certificate)",
                                         options_.tlsCert, options_.tlsKey));
  }
  const bool separate = metrics_.server != nullptr;
  commonHandlers(*main_.server, /*health=*/!separate, /*api=*/true);
  if (separate) commonHandlers(*metrics_.server, /*health=*/true, /*api=*/false);
  adminRoutes();
  snapshotRoutes(*main_.server);
  healthRoutes(separate ? *metrics_.server : *main_.server);
  // Every admin call is logged: who (the client's address), what, and the answer; never the token.
  main_.server->set_logger([](const httplib::Request& req, const httplib::Response& res) {
    if (req.path.rfind("/v1/admin/", 0) != 0) return;
    spdlog::info("admin {} {} from {}: {}", req.method, printable(req.path), req.remote_addr, res.status);
  });
  // Both addresses are bound before either serves: a failure leaves no thread to stop.
  OUTBOX_RETURN_IF_ERROR(bind(main_, options_.host, options_.port));
  if (separate) OUTBOX_RETURN_IF_ERROR(bind(metrics_, options_.metricsHost, options_.metricsPort));
  for (Listener* l : {&main_, &metrics_}) {
    if (l->server) l->thread = std::thread([l] { l->server->listen_after_bind(); });
  }
  spdlog::info("http: listening on {}://{}:{}", options_.tlsCert.empty() ? "http" : "https", options_.host, main_.port);
  if (separate) spdlog::info("http: /metrics, /healthz and /readyz on http://{}:{}", options_.metricsHost, metrics_.port);
  return Status::ok();
}

Status HttpServer::bind(Listener& l, const std::string& host, int port) {
  size_t workers = options_.workers;
  l.server->new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
  l.server->set_payload_max_length(options_.maxRequestBytes);
  l.server->set_read_timeout(std::chrono::seconds(5));
  // A client that takes nothing for this long is dropped (and cannot hold up a shutdown longer).
  l.server->set_write_timeout(std::chrono::seconds(10));
  l.server->set_keep_alive_timeout(5);
  l.port = port == 0 ? l.server->bind_to_any_port(host) : (l.server->bind_to_port(host, port) ? port : -1);
  if (l.port <= 0) return Status::fatal(fmt::format("cannot listen on {}:{}", host, port));
  return Status::ok();
}

void HttpServer::stop() {
  stopping_ = true;
  for (Listener* l : {&main_, &metrics_}) {
    if (l->thread.joinable()) {
      // httplib's stop() does nothing until the listener thread has begun serving (a thread that
      // has already ended never will: the wait is bounded).
      for (int i = 0; i < 2000 && !l->server->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      l->server->stop();
      l->thread.join();
    }
  }
}

void HttpServer::commonHandlers(httplib::Server& svr, bool health, bool api) {
  // Known GET routes, for 405 on other methods.
  std::vector<std::regex> getRoutes;
  if (health) {
    for (const char* path : {"/healthz", "/readyz", "/metrics"}) getRoutes.emplace_back(path);
  }
  std::vector<std::string> aliasPaths;
  if (api) {
    getRoutes.emplace_back(R"(/v1/sources/[^/]+/control-snapshot)");
    getRoutes.emplace_back(R"(/v1/admin/(sources|leases)(/[^/]+)?)");
    for (const auto& s : sources_) {
      if (!s.config->snapshotPath.empty()) aliasPaths.push_back(s.config->snapshotPath);
    }
  }
  const std::regex adminPost(api ? R"(/v1/admin/sources/[^/]+/(pause|resume|quarantine))" : "$^");
  svr.set_pre_routing_handler([getRoutes, aliasPaths, adminPost](const httplib::Request& req, httplib::Response& res) {
    if (std::regex_match(req.path, adminPost)) {
      if (req.method == "POST") return httplib::Server::HandlerResponse::Unhandled;
      res.set_header("Allow", "POST");
      jsonError(res, 405, fmt::format("method {} is not allowed on {}; use POST", req.method, req.path));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.method == "GET" || req.method == "HEAD") return httplib::Server::HandlerResponse::Unhandled;
    bool known = std::find(aliasPaths.begin(), aliasPaths.end(), req.path) != aliasPaths.end();
    for (const auto& r : getRoutes) known = known || std::regex_match(req.path, r);
    if (!known) {
      // Without Content-Length or chunked encoding httplib would wait for a body until its read
      // timeout and answer 400: answer 404 now. A request with a body is read (413 past the limit).
      if (req.has_header("Content-Length") || req.has_header("Transfer-Encoding")) {
        return httplib::Server::HandlerResponse::Unhandled;
      }
      jsonError(res, 404, fmt::format("no route for {} {}", req.method, req.path));
      return httplib::Server::HandlerResponse::Handled;
    }
    res.set_header("Allow", "GET, HEAD");
    jsonError(res, 405, fmt::format("method {} is not allowed on {}; use GET", req.method, req.path));
    return httplib::Server::HandlerResponse::Handled;
  });

  svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    switch (res.status) {
      case 404: jsonError(res, 404, fmt::format("no route for {} {}", req.method, req.path)); break;
      case 413: jsonError(res, 413, "request too large"); break;
      case 414: jsonError(res, 414, "request URI too long"); break;
      case 400: jsonError(res, 400, "bad request"); break;
      default: jsonError(res, res.status, "request failed"); break;
    }
  });
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    jsonError(res, 500, "internal error");
  });
}

void HttpServer::healthRoutes(httplib::Server& svr) {
  svr.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    std::string stuck;
    for (size_t i = 0; i < sources_.size(); ++i) {
      const auto& s = sources_[i];
      // Only the leader moves rows; a standby or a halted source is not "stuck".
      if (s.metrics == nullptr || !s.metrics->leader.load() || s.metrics->halted.load() || s.metrics->paused.load()) {
        continue;
      }
      auto probe = probes_[i]->get();
      double limit = std::chrono::duration<double>(options_.stuckAfter).count();
      if (probe.reachable && probe.pendingRows > 0 && probe.oldestPendingSeconds > limit) {
        stuck += fmt::format("{}{}:{}", stuck.empty() ? "" : ",", jsonQuoted(s.config->name),
                             jsonQuoted(fmt::format("{} rows pending, the oldest for {:.0f} s", probe.pendingRows,
                                                    probe.oldestPendingSeconds)));
      }
    }
    if (stuck.empty()) {
      res.set_content(R"({"status":"ok"})", "application/json");
    } else {
      res.status = 503;
      res.set_content(R"({"status":"stuck","sources":{)" + stuck + "}}", "application/json");
    }
  });

  svr.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    std::vector<std::string> reasons;
    if (NatsLink nats = nats_(); !nats.connected) {
      reasons.push_back(nats.problem.empty() ? "nats-server is not connected" : nats.problem);
    }
    for (auto& probe : probes_) {
      auto r = probe->get();
      if (!r.reachable) reasons.push_back(r.error);
    }
    if (reasons.empty()) {
      res.set_content(R"({"status":"ready"})", "application/json");
      return;
    }
    std::string list;
    for (const auto& r : reasons) list += (list.empty() ? "" : ",") + jsonQuoted(r);
    res.status = 503;
    res.set_content(R"({"status":"not ready","reasons":[)" + list + "]}", "application/json");
  });

  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(renderMetricsPage(sources_, probes_, *snapshotMetrics_, nats_()), "text/plain; version=0.0.4; charset=utf-8");
  });
}

void HttpServer::snapshotRoutes(httplib::Server& svr) {
  auto snapshot = [this](const SourceConfig& source, const httplib::Request& req, httplib::Response& res) {
    bool summaryOnly = false;
    if (req.has_param("summary")) {
      std::string v = req.get_param_value("summary");
      if (v == "true" || v == "1") {
        summaryOnly = true;
      } else if (v != "false" && v != "0") {
        jsonError(res, 400, "summary must be true or false");
        snapshotMetrics_->record(source.name, 400, 0, 0);
        return;
      }
    }
    if (activeSnapshots_.fetch_add(1) >= options_.maxSnapshotStreams) {
      activeSnapshots_.fetch_sub(1);
      res.set_header("Retry-After", "1");
      jsonError(res, 503, fmt::format("{} snapshot streams are in progress; retry shortly", options_.maxSnapshotStreams));
      snapshotMetrics_->record(source.name, 503, 0, 0);
      return;
    }
    auto begin = std::chrono::steady_clock::now();
    auto opened = SnapshotStream::open(source, summaryOnly);
    if (!opened.isOk()) {
      activeSnapshots_.fetch_sub(1);
      sourceLogger(source.name)->warn("snapshot failed: {}", opened.status().message());
      bool transient = opened.status().isTransient();
      jsonError(res, transient ? 503 : 500,
                transient ? fmt::format("the database of source {} is not reachable; retry", source.name)
                          : opened.status().cause() == Cause::kNone  // our own words, no server's
                                ? opened.status().message()
                                : fmt::format("the snapshot of source {} failed; see the bridge's log", source.name));
      snapshotMetrics_->record(source.name, res.status, 0, 0);
      return;
    }
    std::shared_ptr<SnapshotStream> stream = std::move(opened).value();
    res.set_header("Cache-Control", "no-store");
    res.set_chunked_content_provider(
        "application/json",
        [this, stream, &source, begin](size_t, httplib::DataSink& sink) {
          Status s = stream->writeTo([this, &sink](std::string_view piece) {
            return !stopping_.load() && sink.write(piece.data(), piece.size());
          });
          double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
          if (!s.isOk()) {
            sourceLogger(source.name)->warn("snapshot cut short after {} records: {}",
                                            stream->header().recordCount, s.message());
            snapshotMetrics_->record(source.name, 499, elapsed, 0);
            return false;
          }
          sink.done();
          const auto& sum = stream->header();
          sourceLogger(source.name)->info("snapshot: {} records, epoch {}, watermark {}, {:.0f} ms",
                                          sum.recordCount, sum.epoch, sum.watermark, elapsed * 1000);
          snapshotMetrics_->record(source.name, 200, elapsed, sum.recordCount);
          return true;
        },
        [this](bool) { activeSnapshots_.fetch_sub(1); });
  };

  svr.Get(R"(/v1/sources/([^/]+)/control-snapshot)", [this, snapshot](const httplib::Request& req, httplib::Response& res) {
    std::string name = req.matches[1];
    for (const auto& s : sources_) {
      if (s.config->name == name) return snapshot(*s.config, req, res);
    }
    jsonError(res, 404, fmt::format("unknown source '{}'", name));
  });
  for (const auto& s : sources_) {
    if (s.config->snapshotPath.empty()) continue;
    const SourceConfig* config = s.config;
    svr.Get(escapeRegex(config->snapshotPath), [config, snapshot](const httplib::Request& req, httplib::Response& res) {
      snapshot(*config, req, res);
    });
  }
}

const HttpSource* HttpServer::findSource(const std::string& name) const {
  for (const auto& s : sources_) {
    if (s.config->name == name) return &s;
  }
  return nullptr;
}

}  // namespace outbox

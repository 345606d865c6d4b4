// The admin API (README "Admin API"): status per source, leases, pause/resume, quarantine —
// behind a bearer token compared in constant time.
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <simdjson.h>

#include "admin/actions.h"
#include "common/log.h"
#include "http/json_response.h"
#include "http/server.h"
#include "lease/lease.h"

namespace outbox {

bool HttpServer::carriesToken(const HttpRequest& req) const {
  if (options_.adminToken.empty()) return false;
  const std::string header = req.header("Authorization");
  const std::string expected = "Bearer " + options_.adminToken;
  return header.size() == expected.size() && CRYPTO_memcmp(header.data(), expected.data(), expected.size()) == 0;
}

bool HttpServer::authorized(const HttpRequest& req, HttpResponse& res) const {
  if (options_.adminToken.empty()) {
    jsonError(res, 403, "the admin API is disabled: set http.admin_token");
    return false;
  }
  if (!carriesToken(req)) {
    res.setHeader("WWW-Authenticate", "Bearer");
    jsonError(res, 401, "a valid bearer token is required");
    return false;
  }
  return true;
}

namespace {

// The answer to an operator action that failed: 409 when it was refused as asked, 503 otherwise
// (the database is what failed; its error goes to the log, not to the client).
void failed(HttpResponse& res, const HttpSource& source, const char* action, const Status& s) {
  if (s.isRejected()) return jsonError(res, 409, s.message());
  sourceLogger(source.config->name)->warn("admin {}: {}", action, s.message());
  if (s.isTransient()) {
    return jsonError(res, 503, fmt::format("the database of source {} is not reachable; retry", source.config->name));
  }
  jsonError(res, 503, fmt::format("source {} cannot take it now; the bridge's log says why", source.config->name));
}

}  // namespace

void HttpServer::adminRoutes(std::vector<Route>& routes) {
  auto get = [&](const char* pattern, Handler handler) {
    routes.push_back({"GET", std::regex(pattern), Pool::kApi, std::move(handler)});
  };
  // The body is read in full before a handler runs: a request cut short never reaches one.
  auto post = [&](const char* pattern, Handler handler) {
    routes.push_back({"POST", std::regex(pattern), Pool::kApi, std::move(handler)});
  };
  auto statusJson = [this](size_t i) {
    const auto& s = sources_[i];
    auto p = probes_[i]->get();
    std::string out = fmt::format(R"({{"source":{},"stream":{},"reachable":{})", jsonQuoted(s.config->name),
                                  jsonQuoted(s.config->stream), p.reachable ? "true" : "false");
    if (p.reachable) {
      out += fmt::format(
          R"(,"epoch":{},"assignedThrough":{},"publishedThrough":{},"halted":{},"haltedReason":{},"haltedRowId":{},"paused":{},)"
          R"("pendingRows":{},"oldestPendingSeconds":{:.3f},"lease":{{"holder":{},"leaseEpoch":{},"expiresInSeconds":{:.3f}}})",
          p.epoch, p.assignedThrough, p.publishedThrough, p.haltedReason.empty() ? "false" : "true",
          p.haltedReason.empty() ? "null" : jsonQuoted(p.haltedReason),
          p.haltedRowId ? std::to_string(*p.haltedRowId) : std::string("null"), p.paused ? "true" : "false", p.pendingRows,
          p.oldestPendingSeconds, p.leaseHolder.empty() ? "null" : jsonQuoted(p.leaseHolder), p.leaseEpoch,
          p.leaseExpiresInSeconds);
      // Ids the scan has kept open for a while, and who may be holding them.
      std::string holes;
      for (const auto& [first, last] : p.recordedHoles) {
        holes += fmt::format(R"({}{{"first":{},"last":{}}})", holes.empty() ? "" : ",", first, last);
      }
      out += fmt::format(R"(,"longOpenHoles":[{}],"heldBy":{})", holes, p.heldBy.empty() ? "null" : jsonQuoted(p.heldBy));
    } else {
      out += fmt::format(R"(,"error":{})", jsonQuoted(p.error));
    }
    if (s.metrics != nullptr) {
      out += fmt::format(R"(,"thisInstance":{{"leader":{},"publishedRows":{}}})", s.metrics->leader.load() ? "true" : "false",
                         s.metrics->publishedRows.load());
    }
    return out + "}";
  };

  get("/v1/admin/sources", [this, statusJson](const HttpRequest& req, HttpResponse& res) {
    if (!authorized(req, res)) return;
    std::string out = "[";
    for (size_t i = 0; i < sources_.size(); ++i) out += (i ? "," : "") + statusJson(i);
    res.setContent(out + "]", "application/json");
  });
  get(R"(/v1/admin/sources/([^/]+))", [this, statusJson](const HttpRequest& req, HttpResponse& res) {
    if (!authorized(req, res)) return;
    for (size_t i = 0; i < sources_.size(); ++i) {
      if (sources_[i].config->name == req.matches[1]) return res.setContent(statusJson(i), "application/json");
    }
    jsonError(res, 404, fmt::format("unknown source '{}'", req.matches[1]));
  });
  get("/v1/admin/leases", [this](const HttpRequest& req, HttpResponse& res) {
    if (!authorized(req, res)) return;
    // Who leads each source, whether that is this instance, and who else stands for it (with the
    // number of the database's sources each leads): how the sources are spread over instances.
    const std::string& self = makeHolderId();
    std::string out = "[";
    for (size_t i = 0; i < sources_.size(); ++i) {
      auto p = probes_[i]->get();
      auto candidates = probes_[i]->candidates();
      std::string listed = "[";
      for (size_t c = 0; candidates.isOk() && c < candidates->size(); ++c) {
        const Candidate& one = (*candidates)[c];
        listed += fmt::format(R"({}{{"holder":{},"leads":{},"thisInstance":{}}})", c ? "," : "",
                              jsonQuoted(one.holder), one.leads, one.holder == self);
      }
      listed += "]";
      const bool live = !p.leaseHolder.empty() && p.leaseExpiresInSeconds > 0;
      out += fmt::format(
          R"({}{{"source":{},"holder":{},"leaseEpoch":{},"expiresInSeconds":{:.3f},"thisInstance":{},"candidates":{}}})",
          i ? "," : "", jsonQuoted(sources_[i].config->name), p.leaseHolder.empty() ? "null" : jsonQuoted(p.leaseHolder),
          p.leaseEpoch, p.leaseExpiresInSeconds, live && p.leaseHolder == self,
          candidates.isOk() ? listed : "null");
    }
    res.setContent(out + "]", "application/json");
  });

  auto pauseOrResume = [this](bool pause) {
    return [this, pause](const HttpRequest& req, HttpResponse& res) {
      if (!authorized(req, res)) return;
      const HttpSource* source = findSource(req.matches[1]);
      if (source == nullptr) return jsonError(res, 404, fmt::format("unknown source '{}'", req.matches[1]));
      if (Status s = admin::setPaused(*source->config, pause); !s.isOk()) {
        return failed(res, *source, pause ? "pause" : "resume", s);
      }
      sourceLogger(source->config->name)->info("{} by the admin API", pause ? "paused" : "resumed");
      for (size_t i = 0; i < sources_.size(); ++i) {
        if (&sources_[i] == source) probes_[i]->invalidate();
      }
      res.setContent(fmt::format(R"({{"source":{},"paused":{}}})", jsonQuoted(source->config->name),
                                  pause ? "true" : "false"),
                      "application/json");
    };
  };
  post(R"(/v1/admin/sources/([^/]+)/pause)", pauseOrResume(true));
  post(R"(/v1/admin/sources/([^/]+)/resume)", pauseOrResume(false));

  post(R"(/v1/admin/sources/([^/]+)/quarantine)", [this](const HttpRequest& req, HttpResponse& res) {
    if (!authorized(req, res)) return;
    const HttpSource* source = findSource(req.matches[1]);
    if (source == nullptr) return jsonError(res, 404, fmt::format("unknown source '{}'", req.matches[1]));
    uint64_t id = 0;
    std::string reason;
    simdjson::dom::parser parser;
    simdjson::dom::element body;
    if (parser.parse(req.body).get(body) != simdjson::SUCCESS || body["id"].get_uint64().get(id) != simdjson::SUCCESS ||
        id == 0) {
      return jsonError(res, 400, R"(expected a JSON body {"id": <outbox row id>, "reason": "..."})");
    }
    std::string_view reasonView;
    if (body["reason"].get_string().get(reasonView) != simdjson::SUCCESS || reasonView.empty()) {
      return jsonError(res, 400, "a non-empty \"reason\" is required");
    }
    reason = std::string(reasonView);
    auto cleared = admin::quarantine(*source->config, id, reason);
    if (!cleared.isOk()) return failed(res, *source, "quarantine", cleared.status());
    bool clearedHalt = *cleared;
    sourceLogger(source->config->name)->info("row {} quarantined by the admin API: {}", id, logSafe(reason));
    res.setContent(fmt::format(R"({{"source":{},"quarantined":{},"haltCleared":{}}})", jsonQuoted(source->config->name),
                                id, clearedHalt ? "true" : "false"),
                    "application/json");
  });
}

}  // namespace outbox

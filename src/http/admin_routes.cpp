// The admin API (README "Admin API"): its routes, declared once in adminRoutes()'s table, behind a
// bearer token compared in constant time.
#include <cassert>
#include <functional>

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

// A call of an admin route that passed the steps its route asks for.
struct AdminCall {
  const HttpRequest& req;
  HttpResponse& res;
  const HttpSource* source;  // the source matches[1] names; null on a route that names none
};
// Fills in the answer; a Status that is not ok is answered by failed() (only a route that names
// a source may return one).
using AdminHandler = std::function<Status(const AdminCall&)>;

// One route of the admin API. Every one needs the bearer token (401/403 without it); one that
// names a source (matches[1]) answers 404 for a name no source has, before its handler runs.
struct AdminRoute {
  const char* method;  // the body of a POST is read in full before a handler runs
  const char* pattern;
  bool namesSource;
  const char* action;  // what failed() logs
  AdminHandler handler;
};

}  // namespace

std::string HttpServer::statusJson(const HttpSource& s) const {
  auto p = probeOf(s).get();
  std::string out = fmt::format(R"({{"source":{},"stream":{},"reachable":{})", jsonQuoted(s.config->name),
                                jsonQuoted(s.config->stream), p.reachable ? "true" : "false");
  if (p.reachable) {
    out += fmt::format(
        R"(,"epoch":{},"assignedThrough":{},"publishedThrough":{},"halted":{},"haltedReason":{},)"
        R"("haltedRowId":{},"paused":{},"pendingRows":{},"oldestPendingSeconds":{:.3f},)"
        R"("lease":{{"holder":{},"leaseEpoch":{},"expiresInSeconds":{:.3f}}})",
        p.epoch, p.assignedThrough, p.publishedThrough, p.haltedReason.empty() ? "false" : "true",
        p.haltedReason.empty() ? "null" : jsonQuoted(p.haltedReason),
        p.haltedRowId ? std::to_string(*p.haltedRowId) : std::string("null"), p.paused ? "true" : "false",
        p.pendingRows, p.oldestPendingSeconds, p.leaseHolder.empty() ? "null" : jsonQuoted(p.leaseHolder), p.leaseEpoch,
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
    out += fmt::format(R"(,"thisInstance":{{"leader":{},"publishedRows":{}}})",
                       s.metrics->leader.load() ? "true" : "false", s.metrics->publishedRows.load());
  }
  return out + "}";
}

std::string HttpServer::leasesJson() const {
  // Who leads each source, whether that is this instance, and who else stands for it (with the
  // number of the database's sources each leads): how the sources are spread over instances.
  const std::string& self = makeHolderId();
  std::string out = "[";
  for (const HttpSource& source : sources_) {
    SourceProbe& probe = probeOf(source);
    auto p = probe.get();
    auto candidates = probe.candidates();
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
        out.size() > 1 ? "," : "", jsonQuoted(source.config->name),
        p.leaseHolder.empty() ? "null" : jsonQuoted(p.leaseHolder), p.leaseEpoch, p.leaseExpiresInSeconds,
        live && p.leaseHolder == self, candidates.isOk() ? listed : "null");
  }
  return out + "]";
}

void HttpServer::adminRoutes(std::vector<Route>& routes) {
  auto pauseOrResume = [this](bool pause) {
    return [this, pause](const AdminCall& call) {
      OUTBOX_RETURN_IF_ERROR(admin::setPaused(*call.source->config, pause));
      sourceLogger(call.source->config->name)->info("{} by the admin API", pause ? "paused" : "resumed");
      probeOf(*call.source).invalidate();
      call.res.setContent(fmt::format(R"({{"source":{},"paused":{}}})", jsonQuoted(call.source->config->name),
                                      pause ? "true" : "false"),
                          "application/json");
      return Status::ok();
    };
  };
  auto quarantine = [](const AdminCall& call) {
    uint64_t id = 0;
    simdjson::dom::parser parser;
    simdjson::dom::element body;
    if (parser.parse(call.req.body).get(body) != simdjson::SUCCESS ||
        body["id"].get_uint64().get(id) != simdjson::SUCCESS || id == 0) {
      jsonError(call.res, 400, R"(expected a JSON body {"id": <outbox row id>, "reason": "..."})");
      return Status::ok();
    }
    std::string_view reasonView;
    if (body["reason"].get_string().get(reasonView) != simdjson::SUCCESS || reasonView.empty()) {
      jsonError(call.res, 400, "a non-empty \"reason\" is required");
      return Status::ok();
    }
    const std::string reason(reasonView);
    auto cleared = admin::quarantine(*call.source->config, id, reason);
    if (!cleared.isOk()) return cleared.status();
    sourceLogger(call.source->config->name)->info("row {} quarantined by the admin API: {}", id, logSafe(reason));
    call.res.setContent(fmt::format(R"({{"source":{},"quarantined":{},"haltCleared":{}}})",
                                    jsonQuoted(call.source->config->name), id, *cleared ? "true" : "false"),
                        "application/json");
    return Status::ok();
  };

  // In the order dispatch tries them (a path another method's route matches answers 405).
  const AdminRoute table[] = {
      {"GET", "/v1/admin/sources", false, "status",
       [this](const AdminCall& call) {
         std::string out = "[";
         for (const HttpSource& s : sources_) out += (out.size() > 1 ? "," : "") + statusJson(s);
         call.res.setContent(out + "]", "application/json");
         return Status::ok();
       }},
      {"GET", R"(/v1/admin/sources/([^/]+))", true, "status",
       [this](const AdminCall& call) {
         call.res.setContent(statusJson(*call.source), "application/json");
         return Status::ok();
       }},
      {"GET", "/v1/admin/leases", false, "leases",
       [this](const AdminCall& call) {
         call.res.setContent(leasesJson(), "application/json");
         return Status::ok();
       }},
      {"POST", R"(/v1/admin/sources/([^/]+)/pause)", true, "pause", pauseOrResume(true)},
      {"POST", R"(/v1/admin/sources/([^/]+)/resume)", true, "resume", pauseOrResume(false)},
      {"POST", R"(/v1/admin/sources/([^/]+)/quarantine)", true, "quarantine", quarantine},
  };
  for (const AdminRoute& route : table) {
    routes.push_back({route.method, std::regex(route.pattern), Pool::kApi,
                      [this, route](const HttpRequest& req, HttpResponse& res) {
                        if (!authorized(req, res)) return;
                        const HttpSource* source = route.namesSource ? findSource(req.matches[1]) : nullptr;
                        if (route.namesSource && source == nullptr) {
                          return jsonError(res, 404, fmt::format("unknown source '{}'", req.matches[1]));
                        }
                        if (Status s = route.handler({req, res, source}); !s.isOk()) {
                          assert(source != nullptr);  // our own bug: only a route naming a source fails
                          failed(res, *source, route.action, s);
                        }
                      }});
  }
}

}  // namespace outbox

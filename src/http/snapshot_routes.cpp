// The snapshot routes (docs/consumers.md section 2): the streamed document, and its summary
// (?summary=true), which a source reads at most once per its summary_interval.
#include <fmt/format.h>

#include "common/log.h"
#include "http/json_response.h"
#include "http/server.h"
#include "snapshot/snapshot.h"

namespace outbox {

namespace {

// Route patterns are regular expressions; a configured path is matched literally.
std::string escapeRegex(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// A snapshot or summary that could not be read, as the client sees it: never SQL or a server's words.
void snapshotFailed(HttpResponse& res, const SourceConfig& source, const Status& status) {
  if (status.isTransient()) {
    res.setHeader("Retry-After", "1");
    jsonError(res, 503, status.cause() == Cause::kNone
                            ? status.message()
                            : fmt::format("the database of source {} is not reachable; retry", source.name));
    return;
  }
  jsonError(res, 500, status.cause() == Cause::kNone  // our own words, no server's
                          ? status.message()
                          : fmt::format("the snapshot of source {} failed; see the bridge's log", source.name));
}

int64_t milliseconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace

// The summary kept, or one read shared by the requests that arrive while it is read. The read
// takes a snapshot stream's slot; a request served from the cache or a read under way takes none.
// Age (RFC 9111) says how old the summary is; Outbox-Summary-Read-At, when its read began (ms
// since 1970, the bridge's clock: which read it is), and Outbox-Summary-Fresh-For, in ms, when a
// request will read again (docs/consumers.md section 4).
void HttpServer::summary(const SourceConfig& source, HttpResponse& res) {
  auto begin = std::chrono::steady_clock::now();
  auto served = summaries_.at(source.name)->get([&]() -> Result<SnapshotHeader> {
    if (activeSnapshots_.fetch_add(1) >= options_.maxSnapshotStreams) {
      activeSnapshots_.fetch_sub(1);
      return Status::transient(
          fmt::format("{} snapshot streams are in progress; retry shortly", options_.maxSnapshotStreams));
    }
    std::shared_ptr<void> slot(nullptr, [this](void*) { activeSnapshots_.fetch_sub(1); });
    auto header = readSummary(source, [this] { return !stopping_.load(); });
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (!header.isOk()) {
      sourceLogger(source.name)->warn("summary failed: {}", header.status().message());
      return header;
    }
    sourceLogger(source.name)->info("summary read: {} records, epoch {}, watermark {}, {:.0f} ms", header->recordCount,
                                    header->epoch, header->watermark, elapsed * 1000);
    return header;
  });
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  if (!served.isOk()) {
    snapshotFailed(res, source, served.status());
    snapshotMetrics_->record(source.name, res.status, 0, 0);
    return;
  }
  res.setHeader("Cache-Control", "no-store");
  res.setHeader("Age", fmt::format("{}", milliseconds(served->age) / 1000));
  res.setHeader("Outbox-Summary-Read-At",
                fmt::format("{}", std::chrono::duration_cast<std::chrono::milliseconds>(
                                      served->readAt.time_since_epoch()).count()));
  res.setHeader("Outbox-Summary-Fresh-For", fmt::format("{}", milliseconds(served->freshFor)));
  res.setContent(summaryDocument(served->header), "application/json");
  if (served->from == SummaryCache::From::kRead) {
    snapshotMetrics_->record(source.name, 200, elapsed, served->header.recordCount);
  } else {
    snapshotMetrics_->countRequest(source.name, 200);  // no read: not a snapshot's duration
  }
  snapshotMetrics_->recordSummary(source.name, served->from == SummaryCache::From::kRead     ? "read"
                                               : served->from == SummaryCache::From::kShared ? "shared"
                                                                                             : "cache");
}

void HttpServer::snapshotRoutes(std::vector<Route>& routes) {
  auto snapshot = [this](const SourceConfig& source, const HttpRequest& req, HttpResponse& res) {
    bool summaryOnly = false;
    if (req.hasParam("summary")) {
      const std::string& v = req.params.at("summary");
      if (v == "true" || v == "1") {
        summaryOnly = true;
      } else if (v != "false" && v != "0") {
        jsonError(res, 400, "summary must be true or false");
        snapshotMetrics_->record(source.name, 400, 0, 0);
        return;
      }
    }
    if (req.method == "HEAD") {
      // The headers a GET would send, from them alone: no snapshot is opened (a read of the whole
      // table that the answer never shows). The body is of unknown length, and never produced.
      res.setHeader("Cache-Control", "no-store");
      res.contentType = "application/json";
      res.stream = [](const HttpResponse::Write&) { return true; };
      return;
    }
    if (summaryOnly) return summary(source, res);
    if (activeSnapshots_.fetch_add(1) >= options_.maxSnapshotStreams) {
      activeSnapshots_.fetch_sub(1);
      res.setHeader("Retry-After", "1");
      jsonError(res, 503,
                fmt::format("{} snapshot streams are in progress; retry shortly", options_.maxSnapshotStreams));
      snapshotMetrics_->record(source.name, 503, 0, 0);
      return;
    }
    // The stream's slot is given back when the answer is done with (written, cut short or a HEAD).
    std::shared_ptr<void> slot(nullptr, [this](void*) { activeSnapshots_.fetch_sub(1); });
    auto begin = std::chrono::steady_clock::now();
    auto opened = SnapshotStream::open(source, false);
    if (!opened.isOk()) {
      sourceLogger(source.name)->warn("snapshot failed: {}", opened.status().message());
      snapshotFailed(res, source, opened.status());
      snapshotMetrics_->record(source.name, res.status, 0, 0);
      return;
    }
    std::shared_ptr<SnapshotStream> stream = std::move(opened).value();
    res.setHeader("Cache-Control", "no-store");
    res.contentType = "application/json";
    res.stream = [this, stream, slot, &source, begin](const HttpResponse::Write& write) {
      Status s = stream->writeTo([this, &write](std::string_view piece) { return !stopping_.load() && write(piece); });
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      if (!s.isOk()) {
        sourceLogger(source.name)->warn("snapshot cut short after {} records: {}", stream->header().recordCount,
                                        s.message());
        snapshotMetrics_->record(source.name, 499, elapsed, 0);
        return false;
      }
      const auto& sum = stream->header();
      sourceLogger(source.name)->info("snapshot: {} records, epoch {}, watermark {}, {:.0f} ms", sum.recordCount,
                                      sum.epoch, sum.watermark, elapsed * 1000);
      snapshotMetrics_->record(source.name, 200, elapsed, sum.recordCount);
      return true;
    };
  };

  routes.push_back({"GET", std::regex(R"(/v1/sources/([^/]+)/control-snapshot)"), Pool::kApi,
                    [this, snapshot](const HttpRequest& req, HttpResponse& res) {
                      const HttpSource* source = findSource(req.matches[1]);
                      if (source != nullptr) return snapshot(*source->config, req, res);
                      jsonError(res, 404, fmt::format("unknown source '{}'", req.matches[1]));
                    }});
  for (const auto& s : sources_) {
    if (s.config->snapshotPath.empty()) continue;
    const SourceConfig* config = s.config;
    routes.push_back({"GET", std::regex(escapeRegex(config->snapshotPath)), Pool::kApi,
                      [config, snapshot](const HttpRequest& req, HttpResponse& res) { snapshot(*config, req, res); }});
  }
}

}  // namespace outbox

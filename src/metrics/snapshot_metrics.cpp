#include "metrics/snapshot_metrics.h"

#include <fmt/format.h>

namespace outbox {

void SnapshotMetrics::record(const std::string& source, int status, double seconds, uint64_t records) {
  std::lock_guard lock(mu_);
  PerSource& s = sources_[source];
  s.requests[status]++;
  if (status != 200) return;
  size_t i = 0;
  while (i < kDurationBuckets.size() && seconds > kDurationBuckets[i]) ++i;
  s.buckets[i]++;
  s.seconds += seconds;
  s.records += records;
}

void SnapshotMetrics::countRequest(const std::string& source, int status) {
  std::lock_guard lock(mu_);
  sources_[source].requests[status]++;
}

void SnapshotMetrics::recordSummary(const std::string& source, const std::string& from) {
  std::lock_guard lock(mu_);
  sources_[source].summaries[from]++;
}

void SnapshotMetrics::addTo(PrometheusPage& page) const {
  using Type = PrometheusPage::Type;
  page.family("outbox_snapshot_requests_total", Type::kCounter, "Snapshot requests by source and status code.");
  page.family("outbox_snapshot_duration_seconds", Type::kHistogram, "Time to stream a whole snapshot (status 200).");
  page.family("outbox_snapshot_records_total", Type::kCounter, "Records served in whole snapshots.");
  page.family("outbox_summaries_total", Type::kCounter,
              "Summaries (?summary=true) served, by where each came from: read (the request read the whole table), "
              "shared (it waited for a read under way), cache (kept from a read less than summary_interval ago).");
  std::lock_guard lock(mu_);
  for (const auto& [source, s] : sources_) {
    for (const auto& [status, count] : s.requests) {
      std::string code = fmt::format("{}", status);
      page.sample("outbox_snapshot_requests_total", {{"source", source}, {"code", code}}, count);
    }
    page.histogram("outbox_snapshot_duration_seconds", {{"source", source}}, kDurationBuckets, s.buckets, s.seconds);
    page.sample("outbox_snapshot_records_total", {{"source", source}}, s.records);
    for (const auto& [from, count] : s.summaries) {
      page.sample("outbox_summaries_total", {{"source", source}, {"from", from}}, count);
    }
  }
}

}  // namespace outbox

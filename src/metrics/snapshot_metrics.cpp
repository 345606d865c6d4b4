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

std::span<const MetricFamily<SnapshotMetrics::PerSource>> SnapshotMetrics::families() {
  using Type = PrometheusPage::Type;
  static constexpr MetricFamily<PerSource> kFamilies[] = {
      {"outbox_snapshot_requests_total", Type::kCounter, "Snapshot requests by source and status code.",
       [](MetricSamples& out, const PerSource& s) {
         for (const auto& [status, count] : s.requests) out.labelled("code", fmt::format("{}", status), count);
       }},
      {"outbox_snapshot_duration_seconds", Type::kHistogram, "Time to stream a whole snapshot (status 200).",
       [](MetricSamples& out, const PerSource& s) { out.histogram(kDurationBuckets, s.buckets, s.seconds); }},
      {"outbox_snapshot_records_total", Type::kCounter, "Records served in whole snapshots.",
       [](MetricSamples& out, const PerSource& s) { out.value(s.records); }},
      {"outbox_summaries_total", Type::kCounter,
       "Summaries (?summary=true) served, by where each came from: read (the request read the whole table), "
       "shared (it waited for a read under way), cache (kept from a read less than summary_interval ago).",
       [](MetricSamples& out, const PerSource& s) {
         for (const auto& [from, count] : s.summaries) out.labelled("from", from, count);
       }},
  };
  return kFamilies;
}

void SnapshotMetrics::addTo(PrometheusPage& page) const {
  std::lock_guard lock(mu_);
  for (const auto& [source, s] : sources_) addSamples(page, families(), {{"source", source}}, s);
}

}  // namespace outbox

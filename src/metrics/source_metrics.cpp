#include "metrics/source_metrics.h"

#include <fmt/format.h>

namespace outbox {

void SourceMetrics::observeLatency(double seconds) {
  size_t i = 0;
  while (i < kLatencyBuckets.size() && seconds > kLatencyBuckets[i]) ++i;
  latencyBuckets[i].fetch_add(1, std::memory_order_relaxed);
  latencyCount.fetch_add(1, std::memory_order_relaxed);
  latencySumMicros.fetch_add(static_cast<uint64_t>(seconds * 1e6), std::memory_order_relaxed);
}

void renderPrometheus(const std::string& name, const SourceMetrics& m, std::string& out) {
  auto line = [&](const char* metric, const std::string& labels, auto value) {
    out += fmt::format("{}{{source=\"{}\"{}}} {}\n", metric, name, labels, value);
  };
  line("outbox_published_rows_total", "", m.publishedRows.load());
  line("outbox_publish_errors_total", ",kind=\"fenced\"", m.errorsFenced.load());
  line("outbox_publish_errors_total", ",kind=\"publish\"", m.errorsPublish.load());
  line("outbox_publish_errors_total", ",kind=\"database\"", m.errorsDatabase.load());
  line("outbox_publish_errors_total", ",kind=\"poison\"", m.poisonRows.load());
  line("outbox_published_version", "", m.publishedVersion.load());
  line("outbox_assigned_version", "", m.assignedVersion.load());
  line("outbox_epoch", "", m.epoch.load());
  line("outbox_halted", "", m.halted.load() ? 1 : 0);
  line("outbox_paused", "", m.paused.load() ? 1 : 0);
  line("outbox_relay_running", "", m.running.load() ? 1 : 0);
  line("outbox_leader", "", m.leader.load() ? 1 : 0);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < SourceMetrics::kLatencyBuckets.size(); ++i) {
    cumulative += m.latencyBuckets[i].load();
    line("outbox_commit_to_ack_seconds_bucket", fmt::format(",le=\"{}\"", SourceMetrics::kLatencyBuckets[i]),
         cumulative);
  }
  cumulative += m.latencyBuckets.back().load();
  line("outbox_commit_to_ack_seconds_bucket", ",le=\"+Inf\"", cumulative);
  line("outbox_commit_to_ack_seconds_sum", "", static_cast<double>(m.latencySumMicros.load()) / 1e6);
  line("outbox_commit_to_ack_seconds_count", "", m.latencyCount.load());
}

}  // namespace outbox

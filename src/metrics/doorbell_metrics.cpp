#include "metrics/doorbell_metrics.h"

#include <mutex>
#include <vector>

namespace outbox {

namespace {

std::mutex registryMutex;
std::vector<std::weak_ptr<DoorbellMetrics>>& registry() {
  static std::vector<std::weak_ptr<DoorbellMetrics>> all;
  return all;
}

}  // namespace

std::shared_ptr<DoorbellMetrics> registerDoorbellMetrics(std::string server) {
  auto metrics = std::make_shared<DoorbellMetrics>(std::move(server));
  std::lock_guard lock(registryMutex);
  auto& all = registry();
  std::erase_if(all, [](const auto& weak) { return weak.expired(); });
  all.push_back(metrics);
  return metrics;
}

std::span<const MetricFamily<DoorbellMetrics>> doorbellFamilies() {
  using Type = PrometheusPage::Type;
  static constexpr MetricFamily<DoorbellMetrics> kFamilies[] = {
      {"outbox_doorbell_watching", Type::kGauge,
       "1 while the binlog doorbell of the database server reads its binary log; 0: its sources poll.",
       readField<&DoorbellMetrics::watching>},
      {"outbox_doorbell_lag_seconds", Type::kGauge,
       "How long ago the last binary log event the doorbell read was written (0 once it has read all there is); "
       "past 30 s (with 1 MiB behind) it starts again at the end of the log.",
       readMillisAsSeconds<&DoorbellMetrics::lagMillis>},
      {"outbox_doorbell_lag_bytes", Type::kGauge,
       "Bytes of binary log between where the doorbell reads and the server's end (measured every 5 s while events "
       "flow); past 64 MiB it starts again at the end of the log, ringing every source once.",
       readField<&DoorbellMetrics::lagBytes>},
      {"outbox_doorbell_jumps_total", Type::kCounter,
       "Dumps the doorbell gave up to start again at the end of the log, ringing every source once, by reason: "
       "behind (its lag passed the bound), too_large (an event larger than it reads).",
       [](MetricSamples& out, const DoorbellMetrics& m) {
         out.labelled("reason", "behind", m.jumpsBehind);
         out.labelled("reason", "too_large", m.jumpsTooLarge);
       }},
  };
  return kFamilies;
}

void addDoorbellMetrics(PrometheusPage& page) {
  std::lock_guard lock(registryMutex);
  for (const auto& weak : registry()) {
    auto m = weak.lock();
    if (!m) continue;
    addSamples(page, doorbellFamilies(), {{"server", m->server}}, *m);
  }
}

}  // namespace outbox

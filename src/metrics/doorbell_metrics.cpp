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

void addDoorbellMetrics(PrometheusPage& page) {
  using Type = PrometheusPage::Type;
  page.family("outbox_doorbell_watching", Type::kGauge,
              "1 while the binlog doorbell of the database server reads its binary log; 0: its sources poll.");
  page.family("outbox_doorbell_lag_seconds", Type::kGauge,
              "How long ago the last binary log event the doorbell read was written (0 once it has read all there "
              "is); past 30 s (with 1 MiB behind) it starts again at the end of the log.");
  page.family("outbox_doorbell_lag_bytes", Type::kGauge,
              "Bytes of binary log between where the doorbell reads and the server's end (measured every 5 s while "
              "events flow); past 64 MiB it starts again at the end of the log, ringing every source once.");
  page.family("outbox_doorbell_jumps_total", Type::kCounter,
              "Dumps the doorbell gave up to start again at the end of the log, ringing every source once, by "
              "reason: behind (its lag passed the bound), too_large (an event larger than it reads).");
  std::lock_guard lock(registryMutex);
  for (const auto& weak : registry()) {
    auto m = weak.lock();
    if (!m) continue;
    const PrometheusPage::Labels server{{"server", m->server}};
    page.sample("outbox_doorbell_watching", server, uint64_t{m->watching.load() ? 1u : 0u});
    page.sample("outbox_doorbell_lag_seconds", server, static_cast<double>(m->lagMillis.load()) / 1000.0);
    page.sample("outbox_doorbell_lag_bytes", server, m->lagBytes.load());
    page.sample("outbox_doorbell_jumps_total", {{"server", m->server}, {"reason", "behind"}}, m->jumpsBehind.load());
    page.sample("outbox_doorbell_jumps_total", {{"server", m->server}, {"reason", "too_large"}},
                m->jumpsTooLarge.load());
  }
}

}  // namespace outbox

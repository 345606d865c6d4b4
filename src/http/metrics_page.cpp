#include "http/metrics_page.h"

#include "metrics/doorbell_metrics.h"
#include "metrics/prometheus.h"
#include "metrics/source_metrics.h"
#include "outbox_version.h"

namespace outbox {

std::string renderMetricsPage(const std::vector<HttpSource>& sources,
                              const SourceProbes& probes,
                              const SnapshotMetrics& snapshots, const NatsLink& nats,
                              const std::vector<std::pair<std::string, const db::ConnectionPools*>>& pools) {
  using Type = PrometheusPage::Type;
  PrometheusPage page;
  page.family("outbox_build_info", Type::kGauge, "Always 1; the version of the running outbox-bridge.");
  page.sample("outbox_build_info", {{"version", OUTBOX_BRIDGE_VERSION}}, uint64_t{1});
  page.family("outbox_nats_connected", Type::kGauge, "1 while the connection to nats-server is up.");
  page.sample("outbox_nats_connected", {}, uint64_t{nats.connected ? 1u : 0u});
  page.family("outbox_nats_reconnects_total", Type::kCounter,
              "Times the NATS connection was lost and made again, to the same server or another of the cluster.");
  page.sample("outbox_nats_reconnects_total", {}, nats.reconnects);

  declareSourceFamilies(page);
  page.family("outbox_source_up", Type::kGauge, "1 while the source's database answers.");
  page.family("outbox_pending_rows", Type::kGauge,
              "Rows not yet acknowledged by the stream: committed rows still without a version, plus rows with "
              "a version above published_through. Quarantined rows are not counted.");
  page.family("outbox_oldest_pending_seconds", Type::kGauge,
              "Age (from created_at) of the oldest row counted in outbox_pending_rows; 0 when there is none.");
  for (const HttpSource& source : sources) {
    const std::string& name = source.config->name;
    if (source.metrics != nullptr) addSourceMetrics(page, name, *source.metrics);
    auto probe = probes.at(name)->get();
    page.sample("outbox_source_up", {{"source", name}}, uint64_t{probe.reachable ? 1u : 0u});
    if (probe.reachable) {
      page.sample("outbox_pending_rows", {{"source", name}}, probe.pendingRows);
      page.sample("outbox_oldest_pending_seconds", {{"source", name}}, probe.oldestPendingSeconds);
    }
  }
  page.family("outbox_db_connections", Type::kGauge,
              "Connections open to the databases' servers, by what they serve (relay: the sources' scans, assigns "
              "and marks; lease; probe: /readyz, /metrics, /sources).");
  page.family("outbox_db_connections_limit", Type::kGauge,
              "The most connections of that purpose the bridge may open, over all servers.");
  page.family("outbox_db_connection_waits_total", Type::kCounter,
              "Borrowers that waited because every connection of the purpose's pool was lent.");
  for (const auto& [purpose, set] : pools) {
    const db::ConnectionPools::Usage u = set->usage();
    page.sample("outbox_db_connections", {{"purpose", purpose}}, static_cast<uint64_t>(u.open));
    page.sample("outbox_db_connections_limit", {{"purpose", purpose}}, static_cast<uint64_t>(u.limit));
    page.sample("outbox_db_connection_waits_total", {{"purpose", purpose}}, u.waits);
  }
  addDoorbellMetrics(page);
  snapshots.addTo(page);
  return page.render();
}

}  // namespace outbox

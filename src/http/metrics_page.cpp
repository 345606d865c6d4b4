#include "http/metrics_page.h"

#include "metrics/doorbell_metrics.h"
#include "metrics/prometheus.h"
#include "metrics/source_metrics.h"
#include "outbox_version.h"

namespace outbox {

namespace {

using Type = PrometheusPage::Type;

constexpr MetricFamily<NatsLink> kProcessFamilies[] = {
    {"outbox_build_info", Type::kGauge, "Always 1; the version of the running outbox-bridge.",
     [](MetricSamples& out, const NatsLink&) { out.labelled("version", OUTBOX_BRIDGE_VERSION, 1); }},
    {"outbox_nats_connected", Type::kGauge, "1 while the connection to nats-server is up.",
     [](MetricSamples& out, const NatsLink& nats) { out.flag(nats.connected); }},
    {"outbox_nats_reconnects_total", Type::kCounter,
     "Times the NATS connection was lost and made again, to the same server or another of the cluster.",
     [](MetricSamples& out, const NatsLink& nats) { out.value(nats.reconnects); }},
};

// A source's database probe (labelled `source`); the rows only while it answers.
constexpr MetricFamily<SourceProbeResult> kProbeFamilies[] = {
    {"outbox_source_up", Type::kGauge, "1 while the source's database answers.",
     [](MetricSamples& out, const SourceProbeResult& probe) { out.flag(probe.reachable); }},
    {"outbox_pending_rows", Type::kGauge,
     "Rows not yet acknowledged by the stream: committed rows still without a version, plus rows with a version "
     "above published_through. Quarantined rows are not counted.",
     [](MetricSamples& out, const SourceProbeResult& probe) {
       if (probe.reachable) out.value(probe.pendingRows);
     }},
    {"outbox_oldest_pending_seconds", Type::kGauge,
     "Age (from created_at) of the oldest row counted in outbox_pending_rows; 0 when there is none.",
     [](MetricSamples& out, const SourceProbeResult& probe) {
       if (probe.reachable) out.value(probe.oldestPendingSeconds);
     }},
};

// The connection pools by purpose (labelled `purpose`; docs/design.md, "Connections").
constexpr MetricFamily<db::ConnectionPools::Usage> kPoolFamilies[] = {
    {"outbox_db_connections", Type::kGauge,
     "Connections open to the databases' servers, by what they serve (relay: the sources' scans, assigns and "
     "marks; lease; probe: /readyz, /metrics, /sources).",
     [](MetricSamples& out, const db::ConnectionPools::Usage& u) { out.value(static_cast<uint64_t>(u.open)); }},
    {"outbox_db_connections_limit", Type::kGauge,
     "The most connections of that purpose the bridge may open, over all servers.",
     [](MetricSamples& out, const db::ConnectionPools::Usage& u) { out.value(static_cast<uint64_t>(u.limit)); }},
    {"outbox_db_connection_waits_total", Type::kCounter,
     "Borrowers that waited because every connection of the purpose's pool was lent.",
     [](MetricSamples& out, const db::ConnectionPools::Usage& u) { out.value(u.waits); }},
};

// Every family of the page, in page order.
void declarePage(PrometheusPage& page) {
  declareFamilies<NatsLink>(page, kProcessFamilies);
  declareSourceFamilies(page);
  declareFamilies<SourceProbeResult>(page, kProbeFamilies);
  declareFamilies<db::ConnectionPools::Usage>(page, kPoolFamilies);
  declareFamilies(page, doorbellFamilies());
  declareFamilies(page, SnapshotMetrics::families());
}

}  // namespace

std::vector<PrometheusPage::Declared> metricsPageFamilies() {
  PrometheusPage page;
  declarePage(page);
  return page.declared();
}

std::string renderMetricsPage(const std::vector<HttpSource>& sources,
                              const SourceProbes& probes,
                              const SnapshotMetrics& snapshots, const NatsLink& nats,
                              const std::vector<std::pair<std::string, const db::ConnectionPools*>>& pools) {
  PrometheusPage page;
  declarePage(page);
  addSamples<NatsLink>(page, kProcessFamilies, {}, nats);
  for (const HttpSource& source : sources) {
    const std::string& name = source.config->name;
    if (source.metrics != nullptr) addSourceMetrics(page, name, *source.metrics);
    addSamples<SourceProbeResult>(page, kProbeFamilies, {{"source", name}}, probes.at(name)->get());
  }
  for (const auto& [purpose, set] : pools) {
    addSamples<db::ConnectionPools::Usage>(page, kPoolFamilies, {{"purpose", purpose}}, set->usage());
  }
  addDoorbellMetrics(page);
  snapshots.addTo(page);
  return page.render();
}

}  // namespace outbox

#pragma once

#include <memory>
#include <string>
#include <vector>

#include "http/probe.h"
#include "http/server.h"
#include "metrics/prometheus.h"
#include "metrics/snapshot_metrics.h"

namespace outbox {

// The /metrics page: build info, the NATS connection, every source's relay metrics and database
// probe, and the snapshot metrics, each family once (Prometheus text format 0.0.4). `probes` holds
// a probe for every source of `sources`, by name.
// `pools`: the connection pools by purpose (docs/design.md, "Connections").
std::string renderMetricsPage(const std::vector<HttpSource>& sources,
                              const SourceProbes& probes,
                              const SnapshotMetrics& snapshots, const NatsLink& nats,
                              const std::vector<std::pair<std::string, const db::ConnectionPools*>>& pools = {});

// Every family renderMetricsPage() declares, in page order, from the one declaration of each
// (src/metrics/, and the process, probe and pool families of metrics_page.cpp).
std::vector<PrometheusPage::Declared> metricsPageFamilies();

}  // namespace outbox

#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "metrics/prometheus.h"

namespace outbox {

// What /metrics shows of one database server's binlog doorbell (README, "Waking up"), written by
// its thread, read by a scrape.
struct DoorbellMetrics {
  explicit DoorbellMetrics(std::string s) : server(std::move(s)) {}

  const std::string server;  // "host:port" or the socket
  std::atomic<bool> watching{false};
  // How far behind the server's end the dump reads: seconds (now minus the time the last event
  // read was written; 0 once a heartbeat says it read all there is) and bytes (measured while
  // events flow, every few seconds).
  std::atomic<uint64_t> lagMillis{0};
  std::atomic<uint64_t> lagBytes{0};
  // Dumps given up to start again at the end of the log, ringing every source once: it fell
  // behind, or an event was larger than it reads.
  std::atomic<uint64_t> jumpsBehind{0};
  std::atomic<uint64_t> jumpsTooLarge{0};
};

// A doorbell's metrics, shown on every /metrics page while the returned pointer lives.
std::shared_ptr<DoorbellMetrics> registerDoorbellMetrics(std::string server);
// The doorbell families (labelled `server`), declared once here.
std::span<const MetricFamily<DoorbellMetrics>> doorbellFamilies();
// Adds every live doorbell's samples to doorbellFamilies(), declared on `page` before.
void addDoorbellMetrics(PrometheusPage& page);

}  // namespace outbox

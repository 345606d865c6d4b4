#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <span>
#include <string>

#include "common/wakeup.h"
#include "metrics/prometheus.h"

namespace outbox {

// Counters and gauges of one source, written by its relay thread and read by the HTTP thread.
// Every field is an atomic; no lock.
struct SourceMetrics {
  // Upper bounds (seconds) of the commit-to-ack latency histogram buckets; +Inf is implied.
  static constexpr std::array<double, 12> kLatencyBuckets{0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                          0.5,   1,    2.5,   5,    10,  30};

  std::atomic<uint64_t> publishedRows{0};
  std::atomic<uint64_t> scans{0};  // scans of the outbox table the relay completed
  std::atomic<uint64_t> errorsFenced{0};
  std::atomic<uint64_t> errorsPublish{0};
  std::atomic<uint64_t> errorsDatabase{0};
  std::atomic<uint64_t> poisonRows{0};
  std::atomic<uint64_t> publishedVersion{0};
  std::atomic<uint64_t> assignedVersion{0};
  std::atomic<uint64_t> epoch{0};
  std::atomic<bool> halted{false};
  std::atomic<bool> paused{false};
  std::atomic<bool> running{false};
  std::atomic<bool> leader{false};
  // Polls by what woke them (outbox_wakeups_total), in kWakeupLabels' order.
  std::array<std::atomic<uint64_t>, std::size(kWakeupLabels)> wakeups{};
  std::atomic<uint64_t>& wokeBy(WokeBy by) { return wakeups[static_cast<size_t>(by)]; }
  std::atomic<bool> doorbell{false};  // a binlog doorbell watched the table at the last poll
  std::atomic<uint64_t> openHoles{0};             // outbox ids read past, not yet resolved (3a)
  std::atomic<uint64_t> oldestOpenHoleMillis{0};  // how long the oldest of them has been open
  std::atomic<uint64_t> openHoleRanges{0};        // the entries the scan keeps for them (exact and spans)
  std::atomic<uint64_t> quietHoleRanges{0};       // of those, quiet spans (not read while their statements run)
  std::atomic<uint64_t> holeReads{0};             // statements that read the holes for late rows
  std::array<std::atomic<uint64_t>, kLatencyBuckets.size() + 1> latencyBuckets{};
  std::atomic<uint64_t> latencySumMicros{0};

  // The settled stream (docs/design.md, "The settled stream (issue 36)"), written by the settle
  // thread; shown only for a source that settles.
  static constexpr std::array<double, 12> kSettleDelayBuckets{0.01, 0.05, 0.1, 0.25, 0.5, 1,
                                                              2,    5,    10,  30,   60,  120};
  bool settles = false;  // set before any thread starts
  std::atomic<uint64_t> settlePendingKeys{0};
  std::atomic<uint64_t> settledMessages{0};   // acknowledged by the settled stream
  std::atomic<uint64_t> settleSquashed{0};    // changes a later change of their key stood for
  std::atomic<uint64_t> settledEarly{0};      // keys settled early: settle_max_keys pending
  std::atomic<uint64_t> settleMissing{0};     // versions recovery found neither settled nor in the main stream
  std::atomic<uint64_t> settleTooLarge{0};    // keys not settled: the settled message was over max_payload
  std::atomic<uint64_t> settleErrors{0};      // settle sessions ended by a failure
  std::atomic<uint64_t> settleStuck{0};       // 1: the last settle session ended by a failure no retry mends
  std::array<std::atomic<uint64_t>, kSettleDelayBuckets.size() + 1> settleDelayBuckets{};
  std::atomic<uint64_t> settleDelaySumMicros{0};

  void observeLatency(double seconds);
  void observeSettleDelay(double seconds);
};

// Each source's families, declared once here (name, type, HELP, how a SourceMetrics is read): every
// source's, then those of a source that settles (`settles`) alone. The metrics table in
// README, "Health and metrics" lists them all (tests/unit/prometheus_test.cpp checks it).
std::span<const MetricFamily<SourceMetrics>> sourceFamilies();
std::span<const MetricFamily<SourceMetrics>> settleFamilies();

// Declares the families that addSourceMetrics() fills, once per page.
void declareSourceFamilies(PrometheusPage& page);
// Adds the samples of source `name` to the families declared by declareSourceFamilies().
void addSourceMetrics(PrometheusPage& page, const std::string& name, const SourceMetrics& m);

}  // namespace outbox

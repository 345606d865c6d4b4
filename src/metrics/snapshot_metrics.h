#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>

#include "metrics/prometheus.h"

namespace outbox {

// Snapshot requests served by the HTTP server, per source. Thread-safe (one mutex; a request
// records once, when it ends).
class SnapshotMetrics {
 public:
  static constexpr std::array<double, 10> kDurationBuckets{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

  // One finished request: its status (499 when the client went away mid-stream), and for a 200 how
  // long the whole stream took and how many records it carried.
  void record(const std::string& source, int status, double seconds, uint64_t records);
  // A request counted by its status alone: a summary that read nothing (no duration, no records).
  void countRequest(const std::string& source, int status);
  // A summary served, by where it came from: "read" (this request read the table), "shared" (it
  // waited for a read under way) or "cache" (kept from a read less than summary_interval ago).
  void recordSummary(const std::string& source, const std::string& from);

  // One source's requests, as a scrape reads them.
  struct PerSource {
    std::map<int, uint64_t> requests;  // status -> count
    std::array<uint64_t, kDurationBuckets.size() + 1> buckets{};
    double seconds = 0;
    uint64_t records = 0;
    std::map<std::string, uint64_t> summaries;  // from -> count
  };
  // The snapshot families (labelled `source`), declared once here.
  static std::span<const MetricFamily<PerSource>> families();
  // Adds every source's samples to families(), declared on `page` before.
  void addTo(PrometheusPage& page) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, PerSource> sources_;  // GUARDED_BY(mu_)
};

}  // namespace outbox

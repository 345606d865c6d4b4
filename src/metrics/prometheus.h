#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace outbox {

// A page in the Prometheus text exposition format (version 0.0.4), built family by family: each
// family is written once, HELP and TYPE first, then every sample added to it, whichever source or
// place added them. Families are written in the order they were declared. Not thread-safe: one
// page per scrape.
class PrometheusPage {
 public:
  enum class Type { kCounter, kGauge, kHistogram };
  using Labels = std::vector<std::pair<std::string_view, std::string_view>>;

  // Declares a family. `name` must be a valid metric name; counters end in _total.
  void family(std::string name, Type type, std::string help);

  // Adds a sample to the declared family `name`. Label values are escaped as the format requires.
  void sample(std::string_view name, const Labels& labels, uint64_t value);
  void sample(std::string_view name, const Labels& labels, double value);

  // Adds one histogram series to the declared histogram family `name`: `counts[i]` observations in
  // bucket i (not cumulative) for each of `bounds`, then one more for +Inf.
  void histogram(std::string_view name, const Labels& labels, std::span<const double> bounds,
                 std::span<const uint64_t> counts, double sum);

  std::string render() const;

 private:
  struct Family {
    std::string name;
    Type type;
    std::string help;
    std::string samples;
  };
  Family& find(std::string_view name);
  static void appendSample(std::string& out, std::string_view name, const Labels& labels, std::string_view extraLabel,
                           std::string_view value);

  std::vector<Family> families_;
};

}  // namespace outbox

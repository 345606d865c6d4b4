#pragma once

#include <atomic>
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

  // "counter", "gauge" or "histogram", as a TYPE line says.
  static const char* typeName(Type type);

  // Declares a family. `name` must be a valid metric name; counters end in _total.
  void family(std::string name, Type type, std::string help);

  // Adds a sample to the declared family `name`. Label values are escaped as the format requires.
  void sample(std::string_view name, const Labels& labels, uint64_t value);
  void sample(std::string_view name, const Labels& labels, double value);

  // Adds one histogram series to the declared histogram family `name`: `counts[i]` observations in
  // bucket i (not cumulative) for each of `bounds`, then one more for +Inf.
  void histogram(std::string_view name, const Labels& labels, std::span<const double> bounds,
                 std::span<const uint64_t> counts, double sum);

  // The families declared so far, in page order.
  struct Declared {
    std::string name;
    Type type;
  };
  std::vector<Declared> declared() const;

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

// The samples a MetricFamily's reader adds to its family, each with `labels` (the source's, the
// server's…) and, where given, one label more. Lives for one read; `page` and `labels` outlive it.
class MetricSamples {
 public:
  MetricSamples(PrometheusPage& page, std::string_view family, const PrometheusPage::Labels& labels)
      : page_(page), family_(family), labels_(labels) {}

  void value(uint64_t v) { page_.sample(family_, labels_, v); }
  void value(double v) { page_.sample(family_, labels_, v); }
  void value(const std::atomic<uint64_t>& v) { value(v.load()); }
  void value(const std::atomic<bool>& v) { flag(v.load()); }
  void flag(bool on) { value(uint64_t{on ? 1u : 0u}); }  // 1 or 0
  void labelled(std::string_view key, std::string_view labelValue, uint64_t v);
  void labelled(std::string_view key, std::string_view labelValue, const std::atomic<uint64_t>& v) {
    labelled(key, labelValue, v.load());
  }
  // See PrometheusPage::histogram().
  void histogram(std::span<const double> bounds, std::span<const uint64_t> counts, double sum) {
    page_.histogram(family_, labels_, bounds, counts, sum);
  }

 private:
  PrometheusPage& page_;
  std::string_view family_;
  const PrometheusPage::Labels& labels_;
};

// A family declared once: its name, type and HELP text, and how a scrape reads its samples from
// a `T` (a source's metrics, a doorbell's…). Tables of these are what the /metrics page declares
// and fills, and what its tests iterate.
template <class T>
struct MetricFamily {
  std::string_view name;
  PrometheusPage::Type type;
  std::string_view help;
  void (*read)(MetricSamples& out, const T& from);
};

// A reader of the atomic field `Field` of a `T`, for a MetricFamily<T>'s `read`.
template <auto Field, class T>
void readField(MetricSamples& out, const T& from) {
  out.value(from.*Field);
}

// A reader of the atomic field `Field` of a `T` that counts milliseconds, as seconds.
template <auto Field, class T>
void readMillisAsSeconds(MetricSamples& out, const T& from) {
  out.value(static_cast<double>((from.*Field).load()) / 1e3);
}

template <class T>
void declareFamilies(PrometheusPage& page, std::span<const MetricFamily<T>> families) {
  for (const auto& f : families) page.family(std::string(f.name), f.type, std::string(f.help));
}

// Adds what every family of `families` reads from `from`, with `labels`.
template <class T>
void addSamples(PrometheusPage& page, std::span<const MetricFamily<T>> families, const PrometheusPage::Labels& labels,
                const T& from) {
  for (const auto& f : families) {
    MetricSamples out(page, f.name, labels);
    f.read(out, from);
  }
}

}  // namespace outbox

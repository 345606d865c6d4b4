#include "metrics/prometheus.h"

#include <algorithm>
#include <cassert>

#include <fmt/format.h>

namespace outbox {

namespace {

// Label values: backslash, double quote and line feed are escaped; HELP texts: backslash and line
// feed (the exposition format, "Comments, help text, and type information").
std::string escape(std::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string formatValue(double value) {
  if (value == static_cast<double>(static_cast<int64_t>(value)) && value < 1e15 && value > -1e15) {
    return fmt::format("{}", static_cast<int64_t>(value));
  }
  return fmt::format("{}", value);
}

}  // namespace

const char* PrometheusPage::typeName(Type type) {
  switch (type) {
    case Type::kCounter: return "counter";
    case Type::kGauge: return "gauge";
    case Type::kHistogram: return "histogram";
  }
  return "untyped";
}

void PrometheusPage::family(std::string name, Type type, std::string help) {
  assert(std::none_of(families_.begin(), families_.end(), [&](const Family& f) { return f.name == name; }) &&
         "a family is declared once");
  families_.push_back({std::move(name), type, std::move(help), {}});
}

PrometheusPage::Family& PrometheusPage::find(std::string_view name) {
  for (auto& f : families_) {
    if (f.name == name) return f;
  }
  assert(false && "sample of an undeclared family");
  families_.push_back({std::string(name), Type::kGauge, "", {}});
  return families_.back();
}

void PrometheusPage::appendSample(std::string& out, std::string_view name, const Labels& labels,
                                  std::string_view extraLabel, std::string_view value) {
  out += name;
  if (!labels.empty() || !extraLabel.empty()) {
    out.push_back('{');
    bool first = true;
    for (const auto& [key, v] : labels) {
      if (!first) out.push_back(',');
      first = false;
      out += fmt::format("{}=\"{}\"", key, escape(v, true));
    }
    if (!extraLabel.empty()) {
      if (!first) out.push_back(',');
      out += extraLabel;
    }
    out.push_back('}');
  }
  out.push_back(' ');
  out += value;
  out.push_back('\n');
}

void PrometheusPage::sample(std::string_view name, const Labels& labels, uint64_t value) {
  appendSample(find(name).samples, name, labels, "", fmt::format("{}", value));
}

void PrometheusPage::sample(std::string_view name, const Labels& labels, double value) {
  appendSample(find(name).samples, name, labels, "", formatValue(value));
}

void PrometheusPage::histogram(std::string_view name, const Labels& labels, std::span<const double> bounds,
                               std::span<const uint64_t> counts, double sum) {
  assert(counts.size() == bounds.size() + 1);
  Family& f = find(name);
  assert(f.type == Type::kHistogram);
  const std::string bucket = std::string(name) + "_bucket";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    cumulative += counts[i];
    appendSample(f.samples, bucket, labels, fmt::format("le=\"{}\"", formatValue(bounds[i])),
                 fmt::format("{}", cumulative));
  }
  cumulative += counts[bounds.size()];
  appendSample(f.samples, bucket, labels, "le=\"+Inf\"", fmt::format("{}", cumulative));
  appendSample(f.samples, std::string(name) + "_sum", labels, "", formatValue(sum));
  appendSample(f.samples, std::string(name) + "_count", labels, "", fmt::format("{}", cumulative));
}

std::vector<PrometheusPage::Declared> PrometheusPage::declared() const {
  std::vector<Declared> out;
  for (const auto& f : families_) out.push_back({f.name, f.type});
  return out;
}

void MetricSamples::labelled(std::string_view key, std::string_view labelValue, uint64_t v) {
  PrometheusPage::Labels labels = labels_;
  labels.emplace_back(key, labelValue);
  page_.sample(family_, labels, v);
}

std::string PrometheusPage::render() const {
  std::string out;
  for (const auto& f : families_) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", f.name, escape(f.help, false), f.name, typeName(f.type));
    out += f.samples;
  }
  return out;
}

}  // namespace outbox

#define BOOST_TEST_MODULE prometheus
#include <boost/test/unit_test.hpp>

#include <array>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "http/metrics_page.h"
#include "metrics/prometheus.h"
#include "metrics/source_metrics.h"

using namespace outbox;
using Type = PrometheusPage::Type;

// Samples added source by source still come out family by family, under one HELP and TYPE.
BOOST_AUTO_TEST_CASE(samples_of_several_sources_are_grouped_under_their_family) {
  PrometheusPage page;
  page.family("a_total", Type::kCounter, "A.");
  page.family("b", Type::kGauge, "B.");
  for (const char* source : {"x", "y"}) {
    page.sample("a_total", {{"source", source}}, uint64_t{1});
    page.sample("b", {{"source", source}}, 2.5);
  }
  BOOST_TEST(page.render() ==
             "# HELP a_total A.\n# TYPE a_total counter\na_total{source=\"x\"} 1\na_total{source=\"y\"} 1\n"
             "# HELP b B.\n# TYPE b gauge\nb{source=\"x\"} 2.5\nb{source=\"y\"} 2.5\n");
}

BOOST_AUTO_TEST_CASE(label_values_and_help_are_escaped) {
  PrometheusPage page;
  page.family("m", Type::kGauge, "line one\nback\\slash");
  page.sample("m", {{"k", "a\"b\\c\nd"}}, uint64_t{0});
  BOOST_TEST(page.render() == "# HELP m line one\\nback\\\\slash\n# TYPE m gauge\nm{k=\"a\\\"b\\\\c\\nd\"} 0\n");
}

BOOST_AUTO_TEST_CASE(a_histogram_has_cumulative_buckets_sum_and_count) {
  PrometheusPage page;
  page.family("h_seconds", Type::kHistogram, "H.");
  const std::array<double, 2> bounds{0.5, 1};
  const std::array<uint64_t, 3> counts{1, 2, 3};
  page.histogram("h_seconds", {{"source", "s"}}, bounds, counts, 4.25);
  BOOST_TEST(page.render() ==
             "# HELP h_seconds H.\n# TYPE h_seconds histogram\n"
             "h_seconds_bucket{source=\"s\",le=\"0.5\"} 1\nh_seconds_bucket{source=\"s\",le=\"1\"} 3\n"
             "h_seconds_bucket{source=\"s\",le=\"+Inf\"} 6\nh_seconds_sum{source=\"s\"} 4.25\n"
             "h_seconds_count{source=\"s\"} 6\n");
}

BOOST_AUTO_TEST_CASE(source_metrics_count_latency_observations_into_the_histogram) {
  SourceMetrics m;
  m.observeLatency(0.001);
  m.observeLatency(0.02);
  m.observeLatency(100);
  PrometheusPage page;
  declareSourceFamilies(page);
  addSourceMetrics(page, "s", m);
  std::string text = page.render();
  BOOST_TEST(text.find("outbox_commit_to_ack_seconds_bucket{source=\"s\",le=\"0.005\"} 1\n") != std::string::npos, text);
  BOOST_TEST(text.find("outbox_commit_to_ack_seconds_bucket{source=\"s\",le=\"0.025\"} 2\n") != std::string::npos);
  BOOST_TEST(text.find("outbox_commit_to_ack_seconds_bucket{source=\"s\",le=\"+Inf\"} 3\n") != std::string::npos);
  BOOST_TEST(text.find("outbox_commit_to_ack_seconds_count{source=\"s\"} 3\n") != std::string::npos);
  BOOST_TEST(text.find("outbox_publish_errors_total{source=\"s\",kind=\"poison\"} 0\n") != std::string::npos);
}

namespace {

// The metrics table ("| metric | type | labels | what |") in README, "Health and metrics": each
// family named in a row's first cell (in backticks; a row may name two) with the row's type.
std::map<std::string, std::string> readmeMetricsTable() {
  const char* root = std::getenv("OUTBOX_TEST_SOURCE_ROOT");
  BOOST_REQUIRE_MESSAGE(root != nullptr, "OUTBOX_TEST_SOURCE_ROOT is not set (meson test sets it)");
  std::ifstream readme(std::string(root) + "/README.md");
  BOOST_REQUIRE(readme.good());
  std::map<std::string, std::string> table;
  std::string line;
  bool inTable = false;
  while (std::getline(readme, line)) {
    if (line.starts_with("| metric | type |")) {
      inTable = true;
      std::getline(readme, line);  // | --- | …
      continue;
    }
    if (!inTable) continue;
    if (!line.starts_with("|")) break;
    const size_t first = line.find('|', 1);
    const size_t second = line.find('|', first + 1);
    const std::string names = line.substr(1, first - 1);
    std::string type = line.substr(first + 1, second - first - 1);
    type.erase(0, type.find_first_not_of(' '));
    type.erase(type.find_last_not_of(' ') + 1);
    for (size_t open = names.find('`'); open != std::string::npos; open = names.find('`', open + 1)) {
      const size_t close = names.find('`', open + 1);
      table[names.substr(open + 1, close - open - 1)] = type;
      open = close;
    }
  }
  return table;
}

}  // namespace

// Issue 37: a family is declared once (src/metrics/, src/http/metrics_page.cpp), and README lists
// every family the page declares, with its type, and none it does not.
BOOST_AUTO_TEST_CASE(readme_metrics_table_lists_every_declared_family) {
  const auto table = readmeMetricsTable();
  BOOST_REQUIRE(!table.empty());
  std::set<std::string> declared;
  for (const auto& f : metricsPageFamilies()) {
    BOOST_TEST_CONTEXT(f.name) {
      BOOST_TEST(declared.insert(f.name).second, "declared once");
      BOOST_TEST(f.name.ends_with("_total") == (f.type == Type::kCounter), "a counter's name ends in _total");
      auto row = table.find(f.name);
      BOOST_TEST((row != table.end()), "README's metrics table has no row for it");
      if (row != table.end()) BOOST_TEST(row->second == PrometheusPage::typeName(f.type));
    }
  }
  for (const auto& [name, type] : table) {
    BOOST_TEST(declared.count(name) == 1u, "README's metrics table names " << name << ", which /metrics does not declare");
  }
}

#define BOOST_TEST_MODULE metrics_page
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "harness.h"
#include "http/metrics_page.h"
#include "metrics/source_metrics.h"
#include "outbox_version.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

struct ParsedFamily {
  std::string type;
  int samples = 0;
  std::string sources;  // comma-separated, "-" when the family has no source label
};

// /metrics as Prometheus' own Python parser reads it (tests/support/check_metrics.py): the
// families by name (counters without their _total, as the client names them).
std::map<std::string, ParsedFamily> parseWithPrometheusClient(const std::string& file, CommandResult& result) {
  result = runCommand(fmt::format("/usr/bin/python3 {}/tests/support/check_metrics.py {}", stack().sourceRoot, file));
  std::map<std::string, ParsedFamily> families;
  std::istringstream lines(result.out);
  std::string name;
  ParsedFamily f;
  while (lines >> name >> f.type >> f.samples >> f.sources) families[name] = f;
  return families;
}

}  // namespace

// What a Prometheus server, promtool and the client libraries parse: every family once, HELP and
// TYPE first, the samples of every source inside it. Before: four families untyped, samples
// grouped by source, and the Python client read 103 untyped families for 26 names.
BOOST_AUTO_TEST_CASE(metrics_of_two_sources_parse_as_one_typed_family_per_name) {
  TestDatabase database("metrics");
  // The first settles (issue 36): its settle families carry its samples only.
  SourceSpec first{uniqueName("ma", database), &database,
                   {{"snapshot_query", "\"SELECT 1 AS id\""}, {"settle", "\"100ms\""}}};
  SourceSpec second{uniqueName("mb", database), &database, {{"snapshot_query", "\"SELECT 2 AS id\""}}};
  std::string config = writeConfig({first, second});
  migrate(config);
  insertRows(database.sql(), first.outboxTable(), 30);
  insertRows(database.sql(), second.outboxTable(), 20);
  BridgeProcess bridge(config);
  bridge.start();
  int port = bridge.httpPort();
  BOOST_REQUIRE(waitUntil([&] {
    return database.state(first.name).publishedThrough == 30 && database.state(second.name).publishedThrough == 20;
  }, 20s));
  for (const auto* s : {&first, &second}) {
    BOOST_REQUIRE(httpRequest(port, "GET", "/v1/sources/" + s->name + "/control-snapshot").status == 200);
    BOOST_REQUIRE(httpRequest(port, "GET", "/v1/sources/" + s->name + "/control-snapshot?summary=true").status == 200);
  }
  BOOST_TEST(httpRequest(port, "GET", "/v1/sources/nope/control-snapshot").status == 404);

  auto reply = httpRequest(port, "GET", "/metrics");
  BOOST_REQUIRE(reply.status == 200);
  BOOST_TEST(reply.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8");
  std::string file = fmt::format("{}/metrics-{}.txt", tempDir(), database.name());
  std::ofstream(file) << reply.body;

  CommandResult parsed;
  auto families = parseWithPrometheusClient(file, parsed);
  BOOST_TEST(parsed.exitCode == 0, parsed.err << "\n" << reply.body);
  const std::string both = first.name < second.name ? first.name + "," + second.name : second.name + "," + first.name;
  // Every family the page declares (issue 37: from its one declaration, not a list kept here),
  // with its declared type and samples; a source's carry both sources, the settle families the
  // settling source's only.
  std::set<std::string> settling;
  for (const auto& f : settleFamilies()) settling.insert(std::string(f.name));
  for (const auto& f : metricsPageFamilies()) {
    BOOST_TEST_CONTEXT(f.name) {
      // The client names a counter without its _total.
      const std::string name = f.type == PrometheusPage::Type::kCounter ? f.name.substr(0, f.name.size() - 6) : f.name;
      BOOST_REQUIRE(families.count(name) == 1);
      const ParsedFamily& parsed = families[name];
      BOOST_TEST(parsed.type == PrometheusPage::typeName(f.type));
      BOOST_TEST(parsed.samples > 0);
      if (parsed.sources != "-") BOOST_TEST(parsed.sources == (settling.count(f.name) == 1 ? first.name : both));
    }
  }
  BOOST_TEST(metricSample(reply.body, "outbox_nats_connected") == 1.0);
  BOOST_TEST(metricSample(reply.body, "outbox_nats_reconnects_total") == 0.0);
  BOOST_TEST(reply.body.find(fmt::format("outbox_build_info{{version=\"{}\"}} 1\n", OUTBOX_BRIDGE_VERSION)) !=
             std::string::npos);
  BOOST_TEST(reply.body.find(fmt::format("outbox_published_rows_total{{source=\"{}\"}} 30\n", first.name)) !=
             std::string::npos);
  BOOST_TEST(reply.body.find(fmt::format("outbox_commit_to_ack_seconds_count{{source=\"{}\"}} 20\n", second.name)) !=
             std::string::npos);
  BOOST_TEST(reply.body.find("# HELP outbox_pending_rows Rows not yet acknowledged by the stream") != std::string::npos);

  // promtool (Debian's prometheus package, role test in tools/packages.txt) lints the page too.
  auto promtool = runCommand(fmt::format("promtool check metrics < {}", file));
  BOOST_TEST(promtool.exitCode == 0, promtool.out << promtool.err);
  BOOST_TEST(bridge.stop() == 0);
}

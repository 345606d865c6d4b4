#define BOOST_TEST_MODULE fault_observability
#include <boost/test/unit_test.hpp>

#include <thread>

#include <fmt/format.h>

#include "harness.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

// /metrics and the health endpoints tell an operator what is wrong: a halted source, a stopped
// nats-server, rows stuck pending.
BOOST_AUTO_TEST_CASE(metrics_and_readiness_reflect_a_halted_source_and_a_stopped_nats_server) {
  TestDatabase database("observe");
  std::string suffix = database.name().substr(database.name().size() - 6);
  SourceSpec healthy{"up" + suffix, &database, {}};
  SourceSpec poisoned{"hl" + suffix, &database, {}};
  std::string config = writeConfig({healthy, poisoned}, "[http]\nlisten = \"127.0.0.1:0\"\nstuck_after = \"2s\"\n");
  migrate(config);
  insertRows(database.sql(), healthy.outboxTable(), 25);
  BOOST_REQUIRE(database.sql().exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES "
                                                "('bad type', 'k', 'upsert', '{{}}')", poisoned.outboxTable())).isOk());
  BridgeProcess bridge(config);
  bridge.start();
  int port = bridge.httpPort();
  BOOST_REQUIRE(waitUntil([&] { return database.state(healthy.name).publishedThrough == 25; }, 20s));
  BOOST_REQUIRE(waitUntil([&] { return !database.state(poisoned.name).haltedReason.empty(); }, 20s));

  std::string text;
  BOOST_REQUIRE(waitUntil([&] {
    text = httpRequest(port, "GET", "/metrics").body;
    return metricSample(text, fmt::format("outbox_halted{{source=\"{}\"}}", poisoned.name)) == 1;
  }, 10s));
  BOOST_TEST(metricSample(text, fmt::format("outbox_halted{{source=\"{}\"}}", healthy.name)) == 0);
  BOOST_TEST(metricSample(text, fmt::format("outbox_published_rows_total{{source=\"{}\"}}", healthy.name)) == 25);
  BOOST_TEST(metricSample(text, fmt::format("outbox_published_version{{source=\"{}\"}}", healthy.name)) == 25);
  BOOST_TEST(metricSample(text, fmt::format("outbox_publish_errors_total{{source=\"{}\",kind=\"poison\"}}", poisoned.name)) >= 1);
  BOOST_TEST(metricSample(text, fmt::format("outbox_pending_rows{{source=\"{}\"}}", poisoned.name)) == 1);
  BOOST_TEST(metricSample(text, fmt::format("outbox_leader{{source=\"{}\"}}", healthy.name)) == 1);
  BOOST_TEST(metricSample(text, fmt::format("outbox_commit_to_ack_seconds_count{{source=\"{}\"}}", healthy.name)) == 25);
  BOOST_TEST(text.find("# TYPE outbox_commit_to_ack_seconds histogram") != std::string::npos);
  // Halted is not stuck: an operator was told through halted_reason and the metric.
  BOOST_TEST(httpRequest(port, "GET", "/healthz").status == 200);
  BOOST_TEST(httpRequest(port, "GET", "/readyz").status == 200);

  // nats-server goes away: not ready, and rows that cannot be published become stuck.
  stackCommand("stop", "nats");
  insertRows(database.sql(), healthy.outboxTable(), 5, 25);
  HttpReply ready;
  BOOST_REQUIRE(waitUntil([&] {
    ready = httpRequest(port, "GET", "/readyz");
    return ready.status == 503;
  }, 10s));
  BOOST_TEST(ready.body.find("nats-server is not connected") != std::string::npos, ready.body);
  HttpReply health;
  BOOST_REQUIRE(waitUntil([&] {
    health = httpRequest(port, "GET", "/healthz");
    return health.status == 503;
  }, 15s));
  BOOST_TEST(health.body.find("\"status\":\"stuck\"") != std::string::npos, health.body);
  BOOST_TEST(health.body.find(healthy.name) != std::string::npos, health.body);
  BOOST_TEST(health.body.find(poisoned.name) == std::string::npos, health.body);  // halted, not stuck
  text = httpRequest(port, "GET", "/metrics").body;
  BOOST_TEST(metricSample(text, fmt::format("outbox_pending_rows{{source=\"{}\"}}", healthy.name)) == 5);
  BOOST_TEST(metricSample(text, fmt::format("outbox_oldest_pending_seconds{{source=\"{}\"}}", healthy.name)) > 2);

  stackCommand("start", "nats");
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(healthy.name).publishedThrough == 30; }, 30s), bridge.log());
  BOOST_REQUIRE(waitUntil([&] { return httpRequest(port, "GET", "/readyz").status == 200; }, 10s));
  BOOST_REQUIRE(waitUntil([&] { return httpRequest(port, "GET", "/healthz").status == 200; }, 10s));
  BOOST_TEST(bridge.stop() == 0);
}

BOOST_AUTO_TEST_CASE(readiness_reports_an_unreachable_database) {
  TestDatabase database("dbdown");
  SourceSpec source{uniqueName("db", database), &database, {}};
  std::string config = writeConfig({source});
  migrate(config);
  BridgeProcess bridge(config);
  bridge.start();
  int port = bridge.httpPort();
  BOOST_REQUIRE(waitUntil([&] { return httpRequest(port, "GET", "/readyz").status == 200; }, 10s));
  stackCommand("stop", stack().mysqlService);
  HttpReply ready;
  bool notReady = waitUntil([&] {
    ready = httpRequest(port, "GET", "/readyz");
    return ready.status == 503;
  }, 15s);
  stackCommand("start", stack().mysqlService);
  BOOST_REQUIRE(notReady);
  BOOST_TEST(ready.body.find(fmt::format("database of source {} is not reachable", source.name)) != std::string::npos,
             ready.body);
  BOOST_TEST(ready.body.find("mysql error") == std::string::npos);  // no internals
  BOOST_REQUIRE(waitUntil([&] { return httpRequest(port, "GET", "/readyz").status == 200; }, 20s));
  BOOST_TEST(bridge.stop() == 0);
}

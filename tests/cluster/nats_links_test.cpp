#define BOOST_TEST_MODULE cluster_nats_links
#include <boost/test/unit_test.hpp>

#include <thread>

#include <fmt/format.h>

#include "cluster_support.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

// Issue 11: how the bridge reaches a three-node cluster: a partition, one node's address only, a
// stream's replicas. Producers write the whole time; afterwards every row is in the stream once.

// The bridge is given one node's address, through a proxy; the test cuts it like a partition
// (packets dropped, no error on either end). The bridge notices by missing PONGs and moves to a
// node it learnt from the cluster.
BOOST_AUTO_TEST_CASE(a_partition_between_the_bridge_and_its_node) {
  TcpProxy proxy(clusterNodePort(1));
  ClusterRun run("partition", fmt::format("nats://127.0.0.1:{}", proxy.port()));
  proxy.cut();
  BOOST_TEST(run.advances(1000, 60s), run.bridge().log());
  // It went on through an address the cluster told it of (its list has only the proxy's; here on
  // loopback that may be the cut node's own address, which a real partition would not offer).
  const std::string log = run.bridge().log();
  const auto reconnected = log.find("nats: reconnected to nats://127.0.0.1:");
  BOOST_REQUIRE_MESSAGE(reconnected != std::string::npos, log);
  BOOST_TEST(std::stoi(log.substr(reconnected + 38)) != proxy.port(), log);
  const std::string metrics = httpRequest(run.bridge().httpPort(), "GET", "/metrics").body;
  BOOST_TEST(metricSample(metrics, "outbox_nats_reconnects_total") >= 1.0, metrics);
  BOOST_TEST(metricSample(metrics, "outbox_nats_connected") == 1.0);
  proxy.heal();
  BOOST_TEST(run.advances(300, 30s));
  run.finish();
}

// Given one node's address only, the bridge follows the cluster: when that node dies it goes on
// through a node it learnt of from the cluster.
BOOST_AUTO_TEST_CASE(given_one_node_the_bridge_moves_to_the_others_when_it_dies) {
  ClusterRun run("topology", fmt::format("nats://127.0.0.1:{}", clusterNodePort(1)));
  stackCommand("kill", "nats-1");
  BOOST_TEST(run.advances(1000, 60s), run.bridge().log());
  const std::string log = run.bridge().log();
  const auto reconnected = log.find("nats: reconnected to nats://127.0.0.1:");
  BOOST_REQUIRE_MESSAGE(reconnected != std::string::npos, log);
  const int port = std::stoi(log.substr(reconnected + 38));
  BOOST_TEST((port == clusterNodePort(2) || port == clusterNodePort(3)), log);
  stackCommand("start", "nats-1");
  run.finish();
}

BOOST_AUTO_TEST_CASE(a_stream_that_exists_with_other_replicas_is_left_as_it_is_with_a_warning) {
  stackCommand("start", "nats-cluster");
  TestDatabase database("replicas");
  SourceSpec r3{uniqueName("repl", database), &database, {{"replicas", "3"}}};
  std::string config = writeConfig({r3}, clusterNatsToml(clusterUrls()));
  migrate(config);
  insertRows(database.sql(), r3.outboxTable(), 10);
  {
    BridgeProcess bridge(config);
    bridge.start();
    BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(r3.name).publishedThrough == 10; }, 30s), bridge.log());
    BOOST_TEST(bridge.stop() == 0);
  }
  SourceSpec r1 = r3;
  r1.extra["replicas"] = "1";
  BridgeProcess bridge(writeConfig({r1}, clusterNatsToml(clusterUrls())));
  bridge.start();
  insertRows(database.sql(), r3.outboxTable(), 10, 10);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(r3.name).publishedThrough == 20; }, 30s), bridge.log());
  BOOST_TEST(bridge.log().find(fmt::format("stream {} exists with 3 replica(s), this source's config says replicas = 1",
                                           r3.stream())) != std::string::npos,
             bridge.log());
  StreamReader reader(clusterUrls());
  BOOST_TEST(reader.state(r3.stream()).replicas == 3);
  BOOST_TEST(bridge.stop() == 0);
  BOOST_TEST(checkDenseOnce(reader.readAll(r3.stream(), "control." + r3.name), r3.name, 20) == "");
}

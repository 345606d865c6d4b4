#define BOOST_TEST_MODULE cluster_nats
#include <boost/test/unit_test.hpp>

#include <thread>

#include <fmt/format.h>

#include "cluster_support.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

// Issue 11: a three-node nats-server cluster, the source's stream R3, producers writing the whole
// time; after each fault every row of the table is in the stream once, dense, in entity order.

BOOST_AUTO_TEST_CASE(the_stream_leader_sigkilled_mid_drain_then_restarted) {
  ClusterRun run("leaderkill", clusterUrls());
  const int leader = run.streamLeader();
  BOOST_REQUIRE(leader != 0);
  stackCommand("kill", fmt::format("nats-{}", leader));
  // Two nodes of three elect a new stream leader; publishing goes on.
  BOOST_TEST(run.advances(1000, 60s), run.bridge().log());
  BOOST_TEST(run.streamLeader() != leader);
  stackCommand("start", fmt::format("nats-{}", leader));
  BOOST_TEST(run.advances(500, 30s));
  run.finish();
}

BOOST_AUTO_TEST_CASE(one_node_frozen_for_thirty_seconds_then_resumed) {
  ClusterRun run("frozen", clusterUrls());
  const int leader = run.streamLeader();
  BOOST_REQUIRE(leader != 0);
  const auto frozenAt = std::chrono::steady_clock::now();
  {
    FrozenProcess frozen(readFile(clusterPidFile(leader)));
    BOOST_TEST(run.advances(1000, 30s), run.bridge().log());  // the other two carry on
    std::this_thread::sleep_until(frozenAt + 30s);
  }
  BOOST_TEST(run.advances(500, 30s), run.bridge().log());
  run.finish();
}

BOOST_AUTO_TEST_CASE(the_whole_cluster_restarted_mid_drain) {
  ClusterRun run("clusterrestart", clusterUrls());
  stackCommand("stop", "nats-cluster");
  std::this_thread::sleep_for(2s);  // the producers go on; the bridge retries
  stackCommand("start", "nats-cluster");
  BOOST_TEST(run.advances(1000, 90s), run.bridge().log());
  run.finish();
}


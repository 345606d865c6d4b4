#define BOOST_TEST_MODULE fault_many_sources
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "harness.h"

// Connections that do not grow with sources (docs/design.md, "Connections"; issue 33): the
// sources of a server share a few connections, so 200 sources served by two bridges stay within
// 32 connections to the server in all, while every row of every source is published once, in
// order, and a bridge SIGKILLed leaves its sources to the other. Real MariaDB and nats-server.

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

constexpr int kSources = 200;
// Two bridges: relays 8 + leases 3 + probes 2 + the idle check 1 + the doorbell 1, and 1 more
// while it reads its lag, each, at most (docs/design.md, "Connections"; the issue asks for 40 in
// all).
constexpr uint64_t kTwoBridgesBound = 32;

// One transaction of two rows ('a' then 'b', payloads n and n + 1) into each source's table, and
// one rolled back (a hole the scan must close).
void insertRound(db::Connection& producer, const std::vector<SourceSpec>& sources, int round) {
  for (const auto& s : sources) {
    BOOST_REQUIRE(producer.begin().isOk());
    BOOST_REQUIRE(producer
                      .exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('item', 'a', "
                                        "'upsert', '{{\"n\":{}}}'), ('item', 'b', 'upsert', '{{\"n\":{}}}')",
                                        s.outboxTable(), 2 * round, 2 * round + 1))
                      .isOk());
    BOOST_REQUIRE(producer.commit().isOk());
    BOOST_REQUIRE(producer.begin().isOk());
    BOOST_REQUIRE(producer
                      .exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('item', "
                                        "'gone', 'upsert', '{{}}')",
                                        s.outboxTable()))
                      .isOk());
    producer.rollback();
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(two_hundred_sources_and_two_bridges_stay_within_thirty_two_connections_and_lose_nothing) {
  TestDatabase database("many_sources");
  std::vector<SourceSpec> sources;
  for (int i = 0; i < kSources; ++i) sources.push_back({fmt::format("m{}_{}", i, uniqueName("s", database)), &database, {}});
  // A short lease: the SIGKILLed bridge's sources move within seconds.
  const std::string config = writeConfig(sources, "[lease]\nttl = \"6s\"\nheartbeat = \"2s\"\n");
  migrate(config);
  BridgeProcess first(config), second(config);
  first.start();
  second.start();
  auto producer = database.connect();
  auto watcher = database.connect();
  const uint64_t producerId = producer->queryU64("SELECT CONNECTION_ID()").value().value_or(0);
  const uint64_t watcherId = watcher->queryU64("SELECT CONNECTION_ID()").value().value_or(0);
  // The bridges' connections to the test's database: every one but the test's own.
  auto connections = [&] {
    auto n = watcher->queryU64(fmt::format(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = '{}' AND ID NOT IN ({}, {}, "
        "CONNECTION_ID())",
        database.name(), producerId, watcherId));
    return n.isOk() ? n->value_or(0) : 0;  // no assertion: the sampler thread calls it too
  };
  auto allPublished = [&](uint64_t through, std::chrono::seconds within) {
    for (const auto& s : sources) {
      BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(s.name).publishedThrough == through; }, within),
                            s.name << " did not reach " << through << "\nfirst:\n"
                                   << first.log() << "\nsecond:\n"
                                   << second.log());
    }
  };
  // Both bridges up and every source led (the start's one check connection closed): from here on.
  insertRound(*producer, sources, 0);
  allPublished(2, 120s);
  std::atomic<uint64_t> most{connections()};
  std::atomic<bool> counting{true};
  // Sampled on the watcher's connection only here while the sampler runs.
  std::thread sampler([&] {
    while (counting) {
      uint64_t now = connections();
      uint64_t seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(100ms);
    }
  });
  insertRound(*producer, sources, 1);
  allPublished(4, 120s);
  BOOST_TEST_MESSAGE("two bridges, " << kSources << " sources: at most " << most.load() << " connections");
  // /metrics shows each pool's connections and its limit. Which bridge leads sources (and so holds
  // relay connections) at this moment is the leases' choice: the second once showed none open here
  // (a full run's load beside it); the two together hold at least one.
  const std::string page = httpRequest(second.httpPort(), "GET", "/metrics").body;
  const std::string firstPage = httpRequest(first.httpPort(), "GET", "/metrics").body;
  BOOST_TEST(metricSample(page, "outbox_db_connections_limit{purpose=\"relay\"}") == 8);
  BOOST_TEST(metricSample(page, "outbox_db_connections{purpose=\"relay\"}") +
                 metricSample(firstPage, "outbox_db_connections{purpose=\"relay\"}") >= 1);
  BOOST_TEST(metricSample(page, "outbox_db_connections{purpose=\"relay\"}") <= 8);
  BOOST_TEST(metricSample(firstPage, "outbox_db_connections{purpose=\"relay\"}") <= 8);
  BOOST_TEST(metricSample(page, "outbox_db_connections{purpose=\"lease\"}") <= 3);
  BOOST_TEST(most.load() <= kTwoBridgesBound);

  // The first bridge dies mid-flight: the second takes its sources over, and nothing is lost or
  // published twice.
  insertRound(*producer, sources, 2);
  first.kill();
  insertRound(*producer, sources, 3);
  allPublished(8, 120s);
  counting = false;
  sampler.join();
  BOOST_TEST(most.load() <= kTwoBridgesBound);
  // The killed bridge's connections leave the list once the server notices (a statement of its
  // that waits for a lock runs to its end first).
  uint64_t left = 0;
  BOOST_TEST(waitUntil([&] { return (left = connections()) <= kTwoBridgesBound / 2; }, 30s),
             "one bridge left: " << left << " connections");
  StreamReader reader;
  for (const auto& s : sources) {
    requireDenseOnce(s, 8);
    auto messages = reader.readAll(s.stream(), "control." + s.name);
    BOOST_REQUIRE_EQUAL(messages.size(), 8u);
    for (size_t i = 0; i < messages.size(); ++i) {
      BOOST_TEST(messages[i].data.find(fmt::format("\"n\":{}", i)) != std::string::npos, s.name << " " << i);
    }
  }
}

#pragma once

// What the fault_wake cases share (wake_test.cpp, wake_sources_test.cpp): a source its bridge
// watches through the binlog doorbell, with its producer, its wakeups and its metrics.

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "bridged_source.h"
#include "harness.h"

namespace outbox::test {

using namespace std::chrono_literals;

// A source with poll_interval 10 s (so only a ring explains a row published at once), its bridge
// (started by start()), and a producer's connection.
struct WatchedSource : BridgedSource {
  uint64_t inserted = 0;

  explicit WatchedSource(const std::string& purpose, std::map<std::string, std::string> extra = {})
      : BridgedSource(purpose, "wk", withPollInterval(std::move(extra))) {}
  static std::map<std::string, std::string> withPollInterval(std::map<std::string, std::string> extra) {
    extra.try_emplace("poll_interval", "\"10s\"");
    return extra;
  }
  std::string page() { return httpRequest(port, "GET", "/metrics").body; }
  double metric(const std::string& name) { return sourceMetric(port, name, source.name); }
  double wakeups(const std::string& by) {
    return metricSample(page(), fmt::format("outbox_wakeups_total{{source=\"{}\",by=\"{}\"}}", source.name, by));
  }
  // Rows published within 50 ms of their INSERT (created_at) so far.
  double within50ms() {
    return metricSample(page(), fmt::format("outbox_commit_to_ack_seconds_bucket{{source=\"{}\",le=\"0.05\"}}",
                                            source.name));
  }
  void insertOne() {
    BOOST_REQUIRE(producer->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('item', "
                                             "'k{}', 'upsert', '{{\"n\":{}}}')",
                                             table, inserted, inserted))
                      .isOk());
    ++inserted;
  }
  bool published(std::chrono::milliseconds within) {
    return waitUntil([&] { return database.state(source.name).publishedThrough == inserted; }, within);
  }
  void requireDoorbell(bool up, std::chrono::milliseconds within = 30s) {
    // The gauge follows the relay's polls, and the doorbell rings every source when it comes or goes.
    BOOST_REQUIRE_MESSAGE(waitUntil([&] { return metric("outbox_doorbell_up") == (up ? 1 : 0); }, within),
                          bridge.log());
  }
  // A row committed now is in the stream at once, woken by the doorbell (poll_interval and the
  // idle check are 10 s): marked within 3 s (the mark of a lone row waits 500 ms; the rest is
  // room for a machine that stalls), after a binlog ring. Returns whether it took at most 50 ms
  // (commit to ack): what "at once" is, counted by the callers.
  bool requireRungAtOnce(const std::string& when) {
    bool fast = false;
    BOOST_TEST_CONTEXT(when) {
      // A ring as the doorbell connects can still be followed by its poll's retries: let them pass.
      std::this_thread::sleep_for(200ms);
      const double before = within50ms();
      const double rung = wakeups("binlog");
      insertOne();
      BOOST_REQUIRE_MESSAGE(published(3s), bridge.log());
      BOOST_TEST(wakeups("binlog") >= rung + 1);
      fast = within50ms() == before + 1;
    }
    return fast;
  }
  // No scan of its own while quiet: the relay waits for a ring (or its minute-long quiet poll).
  void requireNoScansFor(std::chrono::milliseconds quiet) {
    const double scans = metric("outbox_scans_total");
    std::this_thread::sleep_for(quiet);
    BOOST_TEST(metric("outbox_scans_total") == scans);
  }
  // The Id of the doorbell's dump on the server (0: none).
  uint64_t dumpThread() {
    return database.scalar(
        "SELECT COALESCE(MAX(ID), 0) FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'");
  }
};

}  // namespace outbox::test

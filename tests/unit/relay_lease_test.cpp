// A relay that leads by a lease (docs/design.md, "Several instances: the lease"): it hands the
// source over to a lighter instance, stops reporting a halt once it no longer leads, and says it
// leads once a lease, not at every recheck of a halt.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include <spdlog/sinks/ostream_sink.h>

#include "common/log.h"
#include "relay_harness.h"

using namespace outbox;
using outbox::test::Harness;
using outbox::test::SharedLeaseStore;
using namespace std::chrono_literals;

// Issue 11: a leader that learns of an instance leading fewer sources ends its session, settles
// the acks in flight (every published version marked), gives the lease up and stays a candidate;
// it publishes nothing while the other leads, and takes the source back when that one is gone.
BOOST_AUTO_TEST_CASE(a_leader_told_of_a_lighter_instance_settles_its_acks_then_hands_the_source_over) {
  Harness h;
  h.leadByLease();
  SharedLeaseStore& leases = *h.leases;
  h.store.add(100);
  h.start(/*ackTimeout=*/std::chrono::hours(1));  // acks held back are late, never abandoned
  BOOST_REQUIRE(h.waitFor([&] { return h.store.snapshot().publishedThrough == 100; }));
  BOOST_TEST(h.metrics.leader.load());
  // 20 more in the stream, their acks in flight, when the relay learns of the lighter instance;
  // they arrive from then on, so only a settle before the release marks them.
  h.publisher.holdAcks = true;
  h.store.add(20);
  BOOST_REQUIRE(h.waitFor([&] { return h.publisher.copy().size() == 120; }));
  BOOST_TEST(h.store.snapshot().publishedThrough == 100u);
  {
    std::lock_guard lock(leases.mu);
    leases.marked = [&] { return h.store.snapshot().publishedThrough; };
    leases.onLighter = [&] { h.publisher.holdAcks = false; };
    leases.lighter = "other";
  }
  BOOST_REQUIRE(h.waitFor([&] {
    std::lock_guard lock(leases.mu);
    return leases.released == 1;
  }));
  BOOST_REQUIRE(h.waitFor([&] { return !h.metrics.leader.load(); }));
  {
    std::lock_guard lock(leases.mu);
    BOOST_TEST(leases.markedAtRelease == 120u);  // everything acked was marked before the lease went
  }
  {
    std::lock_guard lock(leases.mu);  // the lighter instance takes the source
    BOOST_TEST(leases.withdrawn == 0);
    leases.holder = "other";
    ++leases.epoch;
    leases.expires = h.clock.now() + 1h;
    leases.lighter.clear();
  }
  h.store.add(20);
  std::this_thread::sleep_for(200ms);  // the relay's clock runs on meanwhile
  BOOST_TEST(h.publisher.copy().size() == 120u);
  BOOST_TEST(!h.metrics.leader.load());
  {
    std::lock_guard lock(leases.mu);  // the other instance is gone
    leases.expires = h.clock.now();
  }
  BOOST_REQUIRE(h.waitFor([&] { return h.store.snapshot().publishedThrough == 140; }));
  BOOST_TEST(h.streamIsDense(140));
  BOOST_TEST(h.metrics.leader.load());
}

// A leader halted on a poison row that loses its lease says nothing more of the source: its
// halted (and hole) gauges would otherwise keep OutboxSourceHalted firing — `max by (source)`
// over every bridge — after the new leader has resumed it.
BOOST_AUTO_TEST_CASE(a_halted_leader_that_loses_its_lease_stops_reporting_the_halt) {
  Harness h;
  h.leadByLease();
  SharedLeaseStore& leases = *h.leases;
  h.store.add(2);
  h.store.add(1, "bad.type");
  h.start();
  BOOST_REQUIRE(h.waitFor([&] { return h.metrics.halted.load(); }));
  BOOST_TEST(h.metrics.leader.load());
  {
    std::lock_guard lock(leases.mu);  // another instance takes the lease
    leases.holder = "other";
    ++leases.epoch;
    leases.expires = h.clock.now() + 1h;
  }
  BOOST_REQUIRE(h.waitFor([&] { return !h.metrics.leader.load(); }));
  BOOST_REQUIRE(h.waitFor([&] { return !h.metrics.halted.load(); }));
  BOOST_TEST(!h.metrics.paused.load());
  BOOST_TEST(h.metrics.openHoles.load() == 0u);
  BOOST_TEST(h.metrics.oldestOpenHoleMillis.load() == 0u);
}

// A leader halted on a poison row checks again every haltRecheck, each time a new session under
// the same lease: "leader" is logged once for it (it was logged at every recheck, once a second
// in a real bridge, burying the halt's own line).
BOOST_AUTO_TEST_CASE(a_halted_leader_says_it_leads_once_not_at_every_recheck) {
  std::ostringstream logged;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(logged);
  auto logger = outbox::sourceLogger("s");
  logger->sinks().push_back(sink);
  struct Unsink {
    std::shared_ptr<spdlog::logger> logger;
    std::shared_ptr<spdlog::sinks::sink> sink;
    ~Unsink() {
      auto& sinks = logger->sinks();
      sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
    }
  } unsink{logger, sink};
  Harness h;
  h.leadByLease();
  h.store.add(1, "bad.type");
  h.start();
  BOOST_REQUIRE(h.waitFor([&] { return h.metrics.halted.load(); }));
  const int loadsAtHalt = h.store.loads.load();
  BOOST_REQUIRE(h.waitFor([&] { return h.store.loads.load() >= loadsAtHalt + 5; }));  // five rechecks at least
  h.stop.request();
  h.thread.join();
  const std::string text = logged.str();
  size_t said = 0;
  for (auto at = text.find("leader (lease epoch"); at != std::string::npos; at = text.find("leader (lease", at + 1)) {
    ++said;
  }
  BOOST_TEST(said == 1u, text);
  BOOST_TEST(text.find("halted:") != std::string::npos, text);
}

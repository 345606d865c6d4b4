#define BOOST_TEST_MODULE settle_repair
#include <boost/test/unit_test.hpp>

// The settled stream after an operator's hand on the streams (issue 36; README, "The settled
// stream"): a purge or deletion of the settled stream, and rows whose settled message would not
// fit. The real MariaDB and nats-server.

#include <thread>

#include "settle_support.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

// A purge of the settled stream, then a restart within the server's duplicate window (2 min): the
// new leader replays the versions it settled before the purge under the same message ids, which
// the server still remembers. Those are settled already (none twice), and settling goes on: a key
// changed after the restart settles within its window.
BOOST_AUTO_TEST_CASE(a_purged_settled_stream_goes_on_settling_after_a_restart) {
  SettlingSource s("settlerp", "\"500ms\"", "\"30s\"");
  s.bridge.start();
  changeKeys(*s.producer, s.source.outboxTable(), {0, 1, 2, 3, 4}, 0);  // versions 1 to 5
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return settledMessages(s.reader, s.source).size() == 5; }, 20s),
                        s.bridge.log());
  BOOST_TEST(s.bridge.stop() == 0);
  BOOST_REQUIRE(s.reader.js().purgeStream(settledStreamOf(s.source)).isOk());
  s.bridge.start();
  changeKeys(*s.producer, s.source.outboxTable(), {9}, 1);  // version 6
  s.requirePublished(6);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return !settledMessages(s.reader, s.source).empty(); }, 10s), s.bridge.log());
  std::this_thread::sleep_for(1s);  // nothing more comes
  const auto settled = settledMessages(s.reader, s.source);
  BOOST_REQUIRE_EQUAL(settled.size(), 1u);
  BOOST_TEST(settled[0].key == "k9");
  BOOST_TEST(settled[0].version == 6u);
  BOOST_TEST(s.bridge.log().find("was settled before") != std::string::npos, s.bridge.log());  // replayed, once
  BOOST_TEST(s.bridge.log().find("recovering in") == std::string::npos, s.bridge.log());
  BOOST_TEST(s.bridge.stop() == 0);
}

// A settled stream deleted while keys are pending: the bridge makes it again at its start, and
// the new leader replays the main stream from settle_max before the stream's making, so the keys
// changed before it still settle (README, "The settled stream").
BOOST_AUTO_TEST_CASE(a_deleted_settled_stream_loses_no_pending_key) {
  SettlingSource s("settlerd", "\"2s\"", "\"20s\"", "[lease]\nttl = \"2s\"\nheartbeat = \"500ms\"\n");
  s.bridge.start();
  changeKeys(*s.producer, s.source.outboxTable(), {0, 1, 2}, 0);  // versions 1 to 3, pending
  s.requirePublished(3);
  s.bridge.kill();
  BOOST_REQUIRE(s.reader.js().deleteStream(settledStreamOf(s.source)).isOk());
  std::this_thread::sleep_for(1500ms);  // the stream is made again well after the changes
  s.bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return settledMessages(s.reader, s.source).size() == 3; }, 10s),
                        s.bridge.log());
  BOOST_TEST(checkSettledWhole(mainChanges(s.reader, s.source), settledMessages(s.reader, s.source)) == "");
  BOOST_TEST(s.bridge.stop() == 0);
}

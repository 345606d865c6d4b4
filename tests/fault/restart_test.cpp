#define BOOST_TEST_MODULE fault_restart
#include <boost/test/unit_test.hpp>

#include <thread>

#include <fmt/format.h>

#include "harness.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

// Drains `rows` rows while `fault` runs once the drain is under way; then checks the stream.
void drainThrough(const std::string& purpose, int rows, const std::function<void()>& fault) {
  TestDatabase database(purpose);
  SourceSpec source{uniqueName(purpose.substr(0, 3), database), &database, {{"batch_size", "500"}}};
  std::string config = writeConfig({source});
  migrate(config);
  insertRows(database.sql(), source.outboxTable(), rows, 0, "item", 150);
  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough >= 2000; }, 30s),
                        bridge.log());
  BOOST_REQUIRE_MESSAGE(database.state(source.name).publishedThrough < static_cast<uint64_t>(rows),
                        "the drain finished before the fault: make it longer");
  fault();
  // Rows written while and after the service came back are published too.
  insertRows(database.sql(), source.outboxTable(), 1000, rows, "item", 150);
  const uint64_t total = static_cast<uint64_t>(rows) + 1000;
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == total; }, 90s),
                        bridge.log());
  StreamReader reader;
  auto messages = reader.readAll(source.stream(), "control." + source.name);
  BOOST_REQUIRE_EQUAL(checkDenseOnce(messages, source.name, total), "");
  BOOST_TEST(database.state(source.name).haltedReason.empty());
  BOOST_TEST(bridge.stop() == 0);
}

}  // namespace

BOOST_AUTO_TEST_CASE(nats_server_restarted_mid_drain) {
  drainThrough("natsrestart", 60000, [] { stackCommand("restart", "nats"); });
}

// SIGKILL loses what nats-server acked but had not written to disk: the stream may fall behind
// published_through, and the bridge must publish the lost tail again from the table.
BOOST_AUTO_TEST_CASE(nats_server_killed_mid_drain) {
  drainThrough("natskill", 60000, [] {
    stackCommand("kill", "nats");
    std::this_thread::sleep_for(500ms);
    stackCommand("start", "nats");
  });
}

BOOST_AUTO_TEST_CASE(mariadb_restarted_mid_drain) {
  drainThrough("dbrestart", 60000, [] { stackCommand("restart", stack().mysqlService); });
}

BOOST_AUTO_TEST_CASE(mariadb_killed_mid_drain) {
  drainThrough("dbkill", 60000, [] {
    stackCommand("kill", stack().mysqlService);
    std::this_thread::sleep_for(300ms);
    stackCommand("start", stack().mysqlService);
  });
}

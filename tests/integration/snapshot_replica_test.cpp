// A replica following its source: it bootstraps again after an epoch bump and when it meets a gap,
// and strings come through the snapshot and the deltas exactly. Part of snapshot_integration
// (snapshot_test.cpp); the helpers are in snapshot.h.
#include <boost/test/unit_test.hpp>

#include <optional>
#include <string>
#include <vector>

#include "accounts_source.h"
#include "harness.h"
#include "replica/replica.h"
#include "snapshot.h"
#include "snapshot/document.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_CASE(the_replica_re_bootstraps_after_an_epoch_bump) {
  AccountsSource src("bump");
  BridgeProcess bridge(src.config);
  int port = src.seedAndStart(bridge, 10);
  auto conn = src.database.connect();
  Replica replica(replicaOptions(port, src.spec.name));
  BOOST_REQUIRE(replica.bootstrap().isOk());
  auto bump = runBridge({"epoch", "bump", "--config", src.config, "--source", src.spec.name, "--reason", "test"});
  BOOST_REQUIRE_MESSAGE(bump.exitCode == 0, bump.err);
  src.change(*conn, 11, "after the bump");
  BOOST_REQUIRE(waitUntil([&] { return src.published() == 11; }, 20s));
  BOOST_REQUIRE(stepUntil(replica, [&] { return replica.epoch() == 2 && replica.appliedVersion() == 11; }, 20s));
  BOOST_TEST(replica.counters().epochChanges >= 1u);
  BOOST_TEST(replica.counters().bootstraps == 2u);
  BOOST_TEST((replicaTable(replica) == src.table()));
  BOOST_TEST(bridge.stop() == 0);
}

BOOST_AUTO_TEST_CASE(the_replica_re_bootstraps_when_it_meets_a_gap) {
  AccountsSource src("gap");
  BridgeProcess bridge(src.config);
  int port = src.seedAndStart(bridge, 10);
  auto conn = src.database.connect();
  const std::string path = "/v1/sources/" + src.spec.name + "/control-snapshot";
  std::string atTen = httpRequest(port, "GET", path).body;  // a snapshot taken at watermark 10
  for (uint64_t i = 11; i <= 20; ++i) src.change(*conn, i, fmt::format("Account {}", i));
  BOOST_REQUIRE(waitUntil([&] { return src.published() == 20; }, 20s));
  // A gap: version 15 disappears from the stream.
  StreamReader reader;
  for (const auto& m : reader.readAll(src.spec.stream(), "control." + src.spec.name)) {
    if (headerU64(m, "Outbox-Version") == 15) BOOST_REQUIRE(reader.js().deleteMessage(src.spec.stream(), m.seq).isOk());
  }
  // The replica starts from the snapshot at 10 (served once by a proxy), so it reads 11..20
  // from the stream and meets the gap at 15.
  ForwardingProxy proxy(port, [&](int n, const std::string& target, std::string body) {
    return n == 0 && target == path ? atTen : body;
  });
  std::vector<std::string> lines;
  Replica replica(replicaOptions(proxy.port(), src.spec.name, &lines));
  BOOST_REQUIRE(replica.bootstrap().isOk());
  BOOST_TEST(replica.appliedVersion() == 10u);
  BOOST_REQUIRE(stepUntil(replica, [&] { return replica.counters().gaps > 0 && replica.appliedVersion() == 20; }, 20s));
  BOOST_TEST(replica.counters().bootstraps == 2u);
  bool sawGap = false;
  for (const auto& l : lines) sawGap = sawGap || l.find("gap: expected version 15, got 16") != std::string::npos;
  BOOST_TEST(sawGap);
  BOOST_TEST((replicaTable(replica) == src.table()));
  BOOST_TEST(bridge.stop() == 0);
}

// Quotes, backslashes, control characters, non-ASCII, empty strings and NULL survive the
// snapshot and the deltas exactly.
BOOST_AUTO_TEST_CASE(unusual_strings_round_trip_exactly) {
  AccountsSource src("strings");
  auto conn = src.database.connect();
  std::vector<std::optional<std::string>> names{
      std::string("quote \" and backslash \\"), std::string("tab\tnewline\ncr\rbell\x07"), std::string(""),
      std::nullopt, std::string("Zürich ☃ 東京 😀"), std::string("{\"looks\": \"like json\"}"), std::string("</script>")};
  for (size_t i = 0; i < names.size(); ++i) src.change(*conn, i + 1, names[i]);
  BridgeProcess bridge(src.config);
  bridge.start();
  int port = bridge.httpPort();
  BOOST_REQUIRE(waitUntil([&] { return src.published() == names.size(); }, 20s));
  auto snap = parseSnapshot(httpRequest(port, "GET", "/v1/sources/" + src.spec.name + "/control-snapshot").body, true);
  BOOST_REQUIRE_MESSAGE(snap.isOk(), snap.status().message());
  for (const auto& record : snap->records) {
    size_t index = std::stoul(*record[0]) - 1;
    BOOST_TEST((record[1] == names[index]), "record " << index + 1);
  }
  // The same strings through the deltas: a replica bootstrapped from an empty table.
  AccountsSource empty("strings2");
  BridgeProcess second(empty.config);
  second.start();
  int port2 = second.httpPort();
  Replica replica(replicaOptions(port2, empty.spec.name));
  BOOST_REQUIRE(waitUntil([&] { return httpRequest(port2, "GET", "/readyz").status == 200; }, 20s));
  BOOST_REQUIRE(replica.bootstrap().isOk());
  auto conn2 = empty.database.connect();
  for (size_t i = 0; i < names.size(); ++i) empty.change(*conn2, i + 1, names[i]);
  BOOST_REQUIRE(waitUntil([&] { return empty.published() == names.size(); }, 20s));
  BOOST_REQUIRE(stepUntil(replica, [&] { return replica.lastVerifiedVersion() == names.size(); }, 20s));
  BOOST_TEST((replicaTable(replica) == empty.table()));
  BOOST_TEST(bridge.stop() == 0);
  BOOST_TEST(second.stop() == 0);
}

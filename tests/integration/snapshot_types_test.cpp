// Column types whose text the snapshot must write as JSON can carry (snapshot_test.cpp has the
// document's watermark and checksum, snapshot_replica_test.cpp its strings).
#include <boost/test/unit_test.hpp>

#include <fmt/format.h>

#include "accounts_source.h"
#include "harness.h"
#include "snapshot/checksum.h"
#include "snapshot/document.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

// Found by the TypeScript producer's review (issue 34): a ZEROFILL column reads "000042", which
// the snapshot wrote as a bare number, and no JSON parser takes a number with leading zeros: the
// whole document was refused, and every replica of the source failed to bootstrap.
BOOST_AUTO_TEST_CASE(a_zerofill_column_is_a_string_with_its_zeros) {
  AccountsSource src("zerofill", "",
                     {{"snapshot_query", "\"SELECT id, display_name AS displayName, code FROM accounts\""}});
  auto conn = src.database.connect();
  for (uint64_t i = 1; i <= 3; ++i) src.change(*conn, i, fmt::format("Account {}", i));
  BOOST_REQUIRE(src.database.sql().exec("ALTER TABLE accounts ADD COLUMN code INT(6) UNSIGNED ZEROFILL NULL").isOk());
  BOOST_REQUIRE(src.database.sql().exec("UPDATE accounts SET code = id * 21").isOk());
  BridgeProcess bridge(src.config);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return src.published() == 3; }, 20s), bridge.log());
  auto reply = httpRequest(bridge.httpPort(), "GET", "/v1/sources/" + src.spec.name + "/control-snapshot");
  BOOST_REQUIRE_EQUAL(reply.status, 200);
  BOOST_TEST(reply.body.find("\"code\":\"000042\"") != std::string::npos, reply.body);
  auto snap = parseSnapshot(reply.body, true);
  BOOST_REQUIRE_MESSAGE(snap.isOk(), snap.status().message());
  uint64_t fresh = 0;
  for (const auto& record : snap->records) {
    BOOST_REQUIRE(record.size() == 3u);
    BOOST_TEST(*record[2] == fmt::format("{:06}", std::stoul(*record[0]) * 21));
    fresh += recordHash(record);
  }
  // The checksum is over the text, zeros and all: what the records say.
  BOOST_TEST(snap->checksum == fresh);
  BOOST_TEST(bridge.stop() == 0);
}

#define BOOST_TEST_MODULE summary_cache_integration
#include <boost/test/unit_test.hpp>

#include <future>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "accounts_source.h"
#include "harness.h"
#include "snapshot/document.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

constexpr uint64_t kRows = 5000;

// The rows the server read from the source's `accounts` table so far (MariaDB's user statistics,
// on for the test: a full scan adds kRows, the producer's few single-row reads one each).
struct RowsRead {
  TestDatabase& database;
  bool wasOn = false;
  explicit RowsRead(TestDatabase& d) : database(d) {
    wasOn = database.scalar("SELECT @@GLOBAL.userstat") != 0;
    BOOST_REQUIRE(database.sql().exec("SET GLOBAL userstat = 1").isOk());
  }
  ~RowsRead() {
    if (!wasOn) (void)database.sql().exec("SET GLOBAL userstat = 0");
  }
  uint64_t now() {
    return database.scalar(fmt::format("SELECT COALESCE(SUM(ROWS_READ), 0) FROM information_schema.TABLE_STATISTICS "
                                       "WHERE TABLE_SCHEMA = '{}' AND TABLE_NAME = 'accounts'",
                                       database.name()));
  }
};

// kRows accounts and their outbox rows in one transaction (the producer rule, in bulk).
void seed(AccountsSource& src) {
  auto conn = src.database.connect();
  for (const auto& q : {std::string("START TRANSACTION"),
                        fmt::format("INSERT INTO accounts SELECT seq, CONCAT('Account ', seq) FROM seq_1_to_{}", kRows),
                        fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) SELECT 'account', id, "
                                    "'upsert', JSON_OBJECT('id', id, 'displayName', display_name) FROM accounts "
                                    "ORDER BY id",
                                    src.spec.outboxTable()),
                        std::string("COMMIT")}) {
    BOOST_REQUIRE(conn->exec(q).isOk());
  }
}

std::string summaryPath(const AccountsSource& src) {
  return "/v1/sources/" + src.spec.name + "/control-snapshot?summary=true";
}

// outbox_summaries_total of the source, by `from` (0 before the first of that kind).
double summaries(int port, const AccountsSource& src, const char* from) {
  return std::max(0.0, metricSample(httpRequest(port, "GET", "/metrics").body,
                                    fmt::format("outbox_summaries_total{{source=\"{}\",from=\"{}\"}}", src.spec.name,
                                                from)));
}

}  // namespace

// Issue 34: five consumers asking ?summary=true every second read a 200,000-row table 235 times a
// minute. Sixteen requests at once now cost one read of the table (each would have read it, and
// all but max_snapshot_streams of them been refused); within summary_interval the summary kept is
// served with its own watermark, and it is what a full snapshot at that watermark says; after it,
// the next request reads again.
namespace {

// seed(src), `bridge` started, every row published: the bridge's HTTP port.
int seededAndPublished(AccountsSource& src, BridgeProcess& bridge) {
  seed(src);
  bridge.start();
  int port = bridge.httpPort();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return src.published() == kRows; }, 30s), bridge.log());
  return port;
}

}  // namespace

BOOST_AUTO_TEST_CASE(concurrent_summaries_share_one_read_and_the_interval_bounds_the_reads) {
  AccountsSource src("sumc", "", {{"summary_interval", "\"4s\""}});
  BridgeProcess bridge(src.config);
  const int port = seededAndPublished(src, bridge);
  RowsRead rows(src.database);

  // A whole snapshot at the quiet source's watermark, to compare the summaries with.
  const uint64_t before = rows.now();
  auto full = httpRequest(port, "GET", "/v1/sources/" + src.spec.name + "/control-snapshot");
  BOOST_REQUIRE_EQUAL(full.status, 200);
  auto snap = parseSnapshot(full.body, true);
  BOOST_REQUIRE_MESSAGE(snap.isOk(), snap.status().message());
  BOOST_TEST(snap->watermark == kRows);
  BOOST_TEST(rows.now() - before == kRows);  // the count works: one read of the table

  std::vector<std::future<HttpReply>> asked;
  auto start = std::chrono::steady_clock::now() + 200ms;
  for (int i = 0; i < 16; ++i) {
    asked.push_back(std::async(std::launch::async, [&] {
      std::this_thread::sleep_until(start);
      return httpRequest(port, "GET", summaryPath(src));
    }));
  }
  std::vector<HttpReply> replies;
  for (auto& a : asked) replies.push_back(a.get());
  BOOST_TEST(rows.now() - before == 2 * kRows);  // the snapshot's read and one summary's
  for (const auto& r : replies) {
    BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
    BOOST_TEST(r.body == replies.front().body);
  }
  auto summary = parseSnapshot(replies.front().body, false);
  BOOST_REQUIRE_MESSAGE(summary.isOk(), summary.status().message());
  BOOST_TEST(summary->watermark == snap->watermark);
  BOOST_TEST(summary->recordCount == snap->recordCount);
  BOOST_TEST(summary->checksum == snap->checksum);
  BOOST_TEST(summaries(port, src, "read") == 1);
  BOOST_TEST(summaries(port, src, "shared") + summaries(port, src, "cache") == 15);

  // The source moves on; within the interval the summary kept is served, at its own watermark.
  {
    auto conn = src.database.connect();
    src.change(*conn, 1, "Renamed");
  }
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return src.published() == kRows + 1; }, 20s), bridge.log());
  const uint64_t kept = rows.now();
  auto cached = httpRequest(port, "GET", summaryPath(src));
  BOOST_REQUIRE_EQUAL(cached.status, 200);
  BOOST_TEST(cached.body == replies.front().body);
  BOOST_TEST(cached.headers.count("Age") == 1u);
  BOOST_TEST(cached.headers["Outbox-Summary-Read-At"] == replies.front().headers.at("Outbox-Summary-Read-At"));
  BOOST_TEST(rows.now() == kept);  // no read
  const int freshFor = std::stoi(cached.headers.at("Outbox-Summary-Fresh-For"));
  BOOST_TEST(freshFor > 0);
  BOOST_TEST(freshFor <= 4000);

  // After the interval the next request reads again: the new watermark, and what a full snapshot
  // at it says.
  std::this_thread::sleep_for(std::chrono::milliseconds(freshFor + 100));
  auto fresh = httpRequest(port, "GET", summaryPath(src));
  BOOST_REQUIRE_EQUAL(fresh.status, 200);
  BOOST_TEST(fresh.headers["Age"] == "0");
  BOOST_TEST(rows.now() - kept == kRows);
  auto again = parseSnapshot(fresh.body, false);
  BOOST_REQUIRE(again.isOk());
  BOOST_TEST(again->watermark == kRows + 1);
  auto full2 = parseSnapshot(httpRequest(port, "GET", "/v1/sources/" + src.spec.name + "/control-snapshot").body, true);
  BOOST_REQUIRE(full2.isOk());
  BOOST_TEST(full2->watermark == again->watermark);
  BOOST_TEST(full2->checksum == again->checksum);
  BOOST_TEST(again->checksum != summary->checksum);
  BOOST_TEST(summaries(port, src, "read") == 2);
  BOOST_TEST(bridge.stop() == 0);
}

// summary_interval = "0": each request reads (the old way, for a source that wants it).
BOOST_AUTO_TEST_CASE(interval_zero_reads_for_each_request) {
  AccountsSource src("sum0", "", {{"summary_interval", "\"0\""}});
  BridgeProcess bridge(src.config);
  const int port = seededAndPublished(src, bridge);
  RowsRead rows(src.database);
  const uint64_t before = rows.now();
  for (int i = 0; i < 3; ++i) BOOST_TEST(httpRequest(port, "GET", summaryPath(src)).status == 200);
  BOOST_TEST(rows.now() - before == 3 * kRows);
  BOOST_TEST(summaries(port, src, "read") == 3);
  BOOST_TEST(bridge.stop() == 0);
}

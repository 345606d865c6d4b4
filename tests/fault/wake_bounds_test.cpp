// A doorbell that costs bounded memory and never holds the server's binary logs back (issue 33):
// an event larger than it reads (a big row elsewhere) ends its dump and it starts again at the end
// of the log, each source looking once; a doorbell read slowed far behind a fast writer jumps to
// the end, so PURGE BINARY LOGS is not held back. Real MariaDB and nats-server.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "harness.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

// The value of the first sample on `page` whose line starts with `name{` and holds `label`; -1: none.
double sampleWith(const std::string& page, const std::string& name, const std::string& label) {
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + "{", 0) == 0 && line.find(label) != std::string::npos) {
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return -1;
}

// The resident memory of `pid`, in bytes.
uint64_t residentBytes(pid_t pid) {
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

// A global variable of the server, set for the test and set back after.
class GlobalVariable {
 public:
  GlobalVariable(std::string name, const std::string& value)
      : root_(std::move(db::Connection::open(stackParams())).value()), name_(std::move(name)) {
    auto q = root_->query("SELECT @@global." + name_);
    BOOST_REQUIRE(q.isOk() && q->next());
    before_ = std::string(q->text(0));
    BOOST_REQUIRE(root_->exec(fmt::format("SET GLOBAL {} = {}", name_, value)).isOk());
  }
  ~GlobalVariable() { (void)root_->exec(fmt::format("SET GLOBAL {} = {}", name_, before_)); }

 private:
  std::unique_ptr<db::Connection> root_;
  std::string name_;
  std::string before_;
};

// A source at poll_interval 10 s (only a ring explains a row published at once), its bridge, and
// a producer's connection.
struct Watched {
  TestDatabase database;
  SourceSpec source;
  std::string config;
  BridgeProcess bridge;
  std::unique_ptr<db::Connection> producer;
  int port = 0;
  uint64_t inserted = 0;

  explicit Watched(const std::string& purpose)
      : database(purpose),
        source{uniqueName("wb", database), &database, {{"poll_interval", "\"10s\""}}},
        config(writeConfig({source})),
        bridge(config) {
    migrate(config);
  }
  void start() {
    bridge.start();
    port = bridge.httpPort();
    producer = database.connect();
    BOOST_REQUIRE_MESSAGE(waitUntil([&] { return sourceMetric(port, "outbox_doorbell_up", source.name) == 1; }, 30s),
                          bridge.log());
  }
  std::string page() { return httpRequest(port, "GET", "/metrics").body; }
  double doorbell(const std::string& name, const std::string& label = "") { return sampleWith(page(), name, label); }
  // A row committed now is published within 3 s, woken by the doorbell (poll_interval is 10 s;
  // the mark of a lone row waits 500 ms, the rest is room for a machine that stalls).
  void requireRungAtOnce(const std::string& when) {
    BOOST_TEST_CONTEXT(when) {
      std::this_thread::sleep_for(300ms);
      const double rung = metricSample(page(), fmt::format("outbox_wakeups_total{{source=\"{}\",by=\"binlog\"}}",
                                                           source.name));
      BOOST_REQUIRE(producer->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES "
                                               "('item', 'k{}', 'upsert', '{{}}')",
                                               source.outboxTable(), inserted))
                        .isOk());
      ++inserted;
      BOOST_REQUIRE_MESSAGE(
          waitUntil([&] { return database.state(source.name).publishedThrough == inserted; }, 3s), bridge.log());
      BOOST_TEST(metricSample(page(), fmt::format("outbox_wakeups_total{{source=\"{}\",by=\"binlog\"}}",
                                                  source.name)) >= rung + 1);
    }
  }
};

}  // namespace

// A 40 MB row on another table: the doorbell read each such event whole (the library's packet
// limit is 1 GiB), and kept the buffer. It reads at most 4 MiB now: the dump ends, a new one starts
// at the end of the log, and each source looks once; the bridge's memory stays where it was.
BOOST_AUTO_TEST_CASE(a_large_row_elsewhere_costs_bounded_memory_and_one_look) {
  GlobalVariable packet("max_allowed_packet", "128 * 1024 * 1024");
  Watched w("wake_big");
  BOOST_REQUIRE(w.database.sql().exec("CREATE TABLE blobs (id BIGINT AUTO_INCREMENT PRIMARY KEY, b LONGBLOB)").isOk());
  w.start();  // its producer connects after max_allowed_packet grew
  w.requireRungAtOnce("before");
  const uint64_t rssBefore = residentBytes(w.bridge.pid());
  for (int i = 0; i < 3; ++i) {
    BOOST_REQUIRE(w.producer->exec("INSERT INTO blobs (b) VALUES (REPEAT('x', 40 * 1024 * 1024))").isOk());
    std::this_thread::sleep_for(2s);  // read, or refused and the dump started again
    w.requireRungAtOnce(fmt::format("after blob {}", i));
  }
  const uint64_t rssAfter = residentBytes(w.bridge.pid());
  BOOST_TEST_MESSAGE("bridge RSS " << rssBefore / 1024 << " KiB before three 40 MiB rows, " << rssAfter / 1024
                                   << " KiB after");
  BOOST_TEST(rssAfter < rssBefore + (16ull << 20), "RSS grew from " << rssBefore << " to " << rssAfter);
  BOOST_TEST(w.doorbell("outbox_doorbell_jumps_total", "too_large") == 3);
  BOOST_TEST(w.bridge.log().find("larger than the 4 MiB the doorbell reads") != std::string::npos, w.bridge.log());
  requireDenseOnce(w.source, w.inserted);
}

// The doorbell's reading slowed (a test-only knob: 20 ms after each transaction) under a writer of 65 kB
// rows on another table, the binary log rotated as it goes: it falls behind, says so, starts again
// at the end, and the files it had not read are purged at once.
BOOST_AUTO_TEST_CASE(a_doorbell_far_behind_jumps_to_the_end_and_holds_no_log_back) {
  Watched w("wake_behind");
  BOOST_REQUIRE(w.database.sql().exec("CREATE TABLE busy (id BIGINT AUTO_INCREMENT PRIMARY KEY, b BLOB)").isOk());
  ::setenv("OUTBOX_TEST_DOORBELL_READ_DELAY_MS", "20", 1);
  w.start();
  ::unsetenv("OUTBOX_TEST_DOORBELL_READ_DELAY_MS");
  BOOST_TEST(w.doorbell("outbox_doorbell_lag_bytes") >= 0);  // shown per server
  auto writer = w.database.connect();
  double lagSeen = 0;
  const auto until = std::chrono::steady_clock::now() + 90s;
  for (int i = 0; std::chrono::steady_clock::now() < until; ++i) {
    BOOST_REQUIRE(writer->exec("INSERT INTO busy (b) VALUES (REPEAT('y', 65000))").isOk());
    if (i % 200 == 199) {
      BOOST_REQUIRE(writer->exec("FLUSH BINARY LOGS").isOk());
      lagSeen = std::max(lagSeen, w.doorbell("outbox_doorbell_lag_bytes"));
      if (w.doorbell("outbox_doorbell_jumps_total", "behind") >= 1) break;
    }
  }
  BOOST_TEST_MESSAGE("lag seen before the jump: " << lagSeen / (1 << 20) << " MiB");
  BOOST_REQUIRE_MESSAGE(w.doorbell("outbox_doorbell_jumps_total", "behind") >= 1, w.bridge.log());
  BOOST_TEST(lagSeen > 0);
  BOOST_TEST(w.bridge.log().find("behind the end of the binary log") != std::string::npos, w.bridge.log());
  // At the end now: every file before the current one goes (one a dump still read would stay).
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return w.doorbell("outbox_doorbell_lag_bytes") == 0; }, 20s), w.bridge.log());
  // (The dump reads the rotation a moment after FLUSH: a PURGE just then keeps the file it is
  // still in, so it is asked again for a few seconds.)
  auto& sql = w.database.sql();
  BOOST_REQUIRE(sql.exec("FLUSH BINARY LOGS").isOk());
  auto current = sql.query("SHOW MASTER STATUS");
  BOOST_REQUIRE(current.isOk() && current->next());
  const std::string newest(current->text(0));
  size_t left = 0;
  BOOST_TEST(waitUntil(
      [&] {
        if (!sql.exec(fmt::format("PURGE BINARY LOGS TO '{}'", newest)).isOk()) return false;
        auto files = sql.query("SHOW BINARY LOGS");
        left = 0;
        while (files.isOk() && files->next()) ++left;
        return left == 1u;
      },
      10s),
      left << " binary log files left after PURGE BINARY LOGS TO " << newest);
  w.requireRungAtOnce("after the jump");
  requireDenseOnce(w.source, w.inserted);
}

// One transaction of 200,000 INSERTs (ROW: a TABLE_MAP and a row event each): the doorbell kept
// every TABLE_MAP of the transaction in a list until its commit, and the list's memory after. Its
// table map is keyed by table id now: one entry, however long the transaction.
BOOST_AUTO_TEST_CASE(a_transaction_of_200000_statements_costs_the_doorbell_no_memory) {
  Watched w("wake_long");
  auto& sql = w.database.sql();
  BOOST_REQUIRE(sql.exec("CREATE TABLE other (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)").isOk());
  BOOST_REQUIRE(sql.exec("CREATE PROCEDURE fill(n INT) BEGIN DECLARE i INT DEFAULT 0; START TRANSACTION; "
                         "WHILE i < n DO INSERT INTO other (v) VALUES (i); SET i = i + 1; END WHILE; COMMIT; END")
                    .isOk());
  w.start();
  w.requireRungAtOnce("before");
  const uint64_t rssBefore = residentBytes(w.bridge.pid());
  BOOST_REQUIRE(w.producer->exec("SET SESSION binlog_format = 'ROW'").isOk());
  BOOST_REQUIRE(w.producer->exec("CALL fill(200000)").isOk());
  // A row after it rings only once the doorbell has read the whole transaction.
  w.requireRungAtOnce("after the long transaction");
  const uint64_t rssAfter = residentBytes(w.bridge.pid());
  BOOST_TEST_MESSAGE("bridge RSS " << rssBefore / 1024 << " KiB before a 200,000-statement transaction, "
                                   << rssAfter / 1024 << " KiB after");
  BOOST_TEST(rssAfter < rssBefore + (6ull << 20), "RSS grew from " << rssBefore << " to " << rssAfter);
  requireDenseOnce(w.source, w.inserted);
}

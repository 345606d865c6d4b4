#define BOOST_TEST_MODULE fault_wake_doorbell
// The doorbell's own account (issue 33): REPLICATION SLAVE shows every row change on the server,
// so the sources' account, whose grants stop at their tables, goes without it, and the doorbell
// reads the log as a [[doorbell]] account that holds nothing but REPLICATION SLAVE and BINLOG
// MONITOR. Real MariaDB and nats-server.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "harness.h"
#include "wake/doorbell.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

// An account of the test's, dropped at the end.
struct TestUser {
  db::Connection& sql;
  std::string name;
  std::string password;
  TestUser(db::Connection& sql, std::string n, std::string p) : sql(sql), name(std::move(n)), password(std::move(p)) {
    registerSecret(password);
    BOOST_REQUIRE(sql.exec(fmt::format("CREATE USER '{}'@'%' IDENTIFIED BY '{}'", name, password)).isOk());
  }
  ~TestUser() { (void)sql.exec(fmt::format("DROP USER IF EXISTS '{}'@'%'", name)); }
  void grant(const std::string& what) {
    BOOST_REQUIRE(sql.exec(fmt::format("GRANT {} TO '{}'@'%'", what, name)).isOk());
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(the_doorbell_reads_as_its_own_account_and_the_sources_need_no_replication_grant) {
  TestDatabase database("wake_acct");
  const std::string tag = database.name().substr(database.name().size() - 8);
  auto& sql = database.sql();
  // The sources' account: its database and PROCESS (README, "Which server a source reads"), no
  // replication grant at all.
  TestUser app(sql, "wa_" + tag, "wa-secret-" + tag);
  app.grant(fmt::format("ALL ON `{}`.*", database.name()));
  app.grant("PROCESS ON *.*");
  // The doorbell's: what reading the log takes, nothing of any database.
  TestUser bell(sql, "wd_" + tag, "wd-secret-" + tag);
  bell.grant("REPLICATION SLAVE, BINLOG MONITOR ON *.*");
  const std::string passwordFile = fmt::format("{}/doorbell-password-{}", tempDir(), tag);
  std::ofstream(passwordFile) << bell.password << "\n";

  SourceSpec source{uniqueName("wa", database), &database,
                    {{"dsn", fmt::format("\"mysql://{}@{}:{}/{}\"", app.name, stack().mysqlHost, stack().mysqlPort,
                                         database.name())},
                     {"password", fmt::format("\"{}\"", app.password)},
                     {"poll_interval", "\"10s\""}}};
  const std::string config =
      writeConfig({source}, fmt::format("[[doorbell]]\nname = \"bell\"\ndsn = \"mysql://{}@{}:{}/\"\n"
                                        "password_file = \"{}\"\n",
                                        bell.name, stack().mysqlHost, stack().mysqlPort, passwordFile));
  migrate(config);
  auto shown = runBridge({"check-config", "--config", config});
  BOOST_REQUIRE_MESSAGE(shown.exitCode == 0, shown.err);
  BOOST_TEST(shown.out.find(fmt::format("dsn = \"mysql://{}:****@", bell.name)) != std::string::npos, shown.out);
  BOOST_TEST(shown.out.find(bell.password) == std::string::npos);

  BridgeProcess bridge(config);
  bridge.start();
  const int port = bridge.httpPort();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return sourceMetric(port, "outbox_doorbell_up", source.name) == 1; }, 30s),
                        bridge.log());
  // The dump is the doorbell account's.
  BOOST_TEST(database.scalar(fmt::format("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND = "
                                         "'Binlog Dump' AND USER = '{}'",
                                         bell.name)) == 1u);
  BOOST_TEST(bridge.log().find(fmt::format("; as {})", bell.name)) != std::string::npos, bridge.log());

  // Rows ring their source at once, though its poll_interval is 10 s.
  auto producer = database.connect();
  auto wakeups = [&] {
    return metricSample(httpRequest(port, "GET", "/metrics").body,
                        fmt::format("outbox_wakeups_total{{source=\"{}\",by=\"binlog\"}}", source.name));
  };
  std::this_thread::sleep_for(1s);  // past the session's first polls
  for (int i = 0; i < 3; ++i) {
    const double rung = wakeups();
    BOOST_REQUIRE(producer->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('item', "
                                             "'k{}', 'upsert', '{{}}')",
                                             source.outboxTable(), i))
                      .isOk());
    BOOST_REQUIRE_MESSAGE(
        waitUntil([&] { return database.state(source.name).publishedThrough == static_cast<uint64_t>(i + 1); }, 3s),
        bridge.log());
    BOOST_TEST(wakeups() >= rung + 1);
  }
  BOOST_TEST(bridge.log().find("may not read the binary log") == std::string::npos, bridge.log());
  requireDenseOnce(source, 3);
}

// Issue 33: a [[doorbell]] whose dsn reaches another server than the sources' (a proxy that
// routes the replication account to a replica, a load balancer's other backend: config sees the
// same address) would ring for that server's commits. On connect the doorbell compares the
// dump's server (@@server_id, @@hostname) with a source connection's: it refuses to watch, names
// both, and leaves the sources to their polls. Config cannot make the two differ at one address,
// so the doorbell is built here as run.cpp builds it, its dsn on the stack's MariaDB at its
// defaults (server_id 3) and the source on the tuned one (server_id 1).
BOOST_AUTO_TEST_CASE(a_doorbell_whose_dsn_reaches_another_server_refuses_to_watch) {
  TestDatabase database("wake_other");
  stackCommand("start", "mariadb-defaults");  // started only when asked
  const char* otherPort = std::getenv("OUTBOX_TEST_MYSQL_DEFAULTS_PORT");
  BOOST_REQUIRE_MESSAGE(otherPort != nullptr, "OUTBOX_TEST_MYSQL_DEFAULTS_PORT is not set (tools/stack env)");
  BOOST_REQUIRE(std::to_string(stack().mysqlPort) != otherPort);
  SourceSpec spec{uniqueName("wo", database), &database, {}};
  const std::string path = writeConfig({spec});
  migrate(path);
  const Config config = loadConfig(path, processEnvironment());
  Dsn elsewhere = config.sources[0].dsn;
  elsewhere.port = static_cast<unsigned>(std::stoul(otherPort));
  elsewhere.database.clear();  // a [[doorbell]] names none

  std::ostringstream logged;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(logged);
  spdlog::default_logger()->sinks().push_back(sink);
  struct Unsink {
    std::shared_ptr<spdlog::sinks::sink> sink;
    ~Unsink() {
      auto& sinks = spdlog::default_logger()->sinks();
      sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
    }
  } unsink{sink};
  Wakeup wakeup;
  StopSignal stop;
  {
    BinlogDoorbell bell({WatchedSource{&config.sources[0], &wakeup}}, elsewhere, stop);
    bell.start();
    const std::string refusal = fmt::format("but source {}'s connection reaches server_id 1", spec.name);
    BOOST_TEST(waitUntil([&] { return logged.str().find(refusal) != std::string::npos; }, 15s), logged.str());
    BOOST_TEST(logged.str().find("its dsn reaches server_id 3") != std::string::npos, logged.str());
    BOOST_TEST(logged.str().find("watching the binary log") == std::string::npos, logged.str());
    BOOST_TEST(!wakeup.doorbell.load(), "the source is left to its polls");
    stop.request();
    bell.join();
  }
  // A doorbell on the sources' own server watches (the check passes).
  logged.str("");
  StopSignal stop2;
  {
    BinlogDoorbell bell({WatchedSource{&config.sources[0], &wakeup}}, config.sources[0].dsn, stop2);
    bell.start();
    BOOST_TEST(waitUntil([&] { return wakeup.doorbell.load(); }, 15s), logged.str());
    stop2.request();
    bell.join();
  }
}

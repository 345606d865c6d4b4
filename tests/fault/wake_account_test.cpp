#define BOOST_TEST_MODULE fault_wake_doorbell
// The doorbell's own account (issue 33): REPLICATION SLAVE shows every row change on the server,
// so the sources' account, whose grants stop at their tables, goes without it, and the doorbell
// reads the log as a [[doorbell]] account that holds nothing but REPLICATION SLAVE and BINLOG
// MONITOR. Real MariaDB and nats-server.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "harness.h"

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
  // The sources' account: its database and PROCESS (section 3a), no replication grant at all.
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
        waitUntil([&] { return database.state(source.name).publishedThrough == static_cast<uint64_t>(i + 1); }, 1s),
        bridge.log());
    BOOST_TEST(wakeups() >= rung + 1);
  }
  BOOST_TEST(bridge.log().find("may not read the binary log") == std::string::npos, bridge.log());
  requireDenseOnce(source, 3);
}

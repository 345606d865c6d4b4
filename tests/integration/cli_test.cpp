#define BOOST_TEST_MODULE cli
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness.h"

using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

std::string writeText(const std::string& name, const std::string& text) {
  std::string path = tempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

const char* kGood = R"(
[nats]
url = "nats://127.0.0.1:4222"
token = "nats-token-secret"

[[source]]
name = "account"
dsn = "mysql://bridge:dsn-password-secret@127.0.0.1:3306/app"
)";
const bool kNoted = (registerSecret("nats-token-secret"), registerSecret("dsn-password-secret"), true);

}  // namespace

BOOST_AUTO_TEST_CASE(bad_config_exits_2_naming_the_key_and_the_reason) {
  struct Case {
    std::string toml;
    std::string expected;
  };
  std::vector<Case> cases{
      {std::string(kGood) + "colour = \"blue\"\n", "config error: source.account.colour: unknown key"},
      {std::string(kGood) + "outbox_table = \"x; DROP TABLE y\"\n", "config error: source.account.outbox_table: 'x; DROP TABLE y' must match"},
      {std::string(kGood) + "batch_size = -5\n", "config error: source.account.batch_size: must be between 1 and 100000, got -5"},
      {std::string(kGood) + "poll_interval = \"soon\"\n", "config error: source.account.poll_interval: 'soon' is not a duration"},
      {"[[source]]\nname = \"a\"\ndsn = \"mysql://u@h:70000/db\"\n", "config error: source.a.dsn: bad port '70000'"},
      {"[nats]\nurl = 5\n[[source]]\nname = \"a\"\ndsn = \"mysql://u@h/db\"\n", "config error: nats.url: expected a string"},
      {"[[source]\n", "TOML syntax error at line 1"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    auto path = writeText(fmt::format("bad-{}.toml", i), cases[i].toml);
    auto r = runBridge({"check-config", "--config", path});
    BOOST_TEST(r.exitCode == 2, cases[i].expected);
    BOOST_TEST(r.err.find(cases[i].expected) != std::string::npos, r.err);
    auto run = runBridge({"run", "--config", path});
    BOOST_TEST(run.exitCode == 2);
  }
  auto missing = runBridge({"run", "--config", "/nonexistent/outbox.toml"});
  BOOST_TEST(missing.exitCode == 2);
  BOOST_TEST(missing.err.find("cannot read '/nonexistent/outbox.toml'") != std::string::npos, missing.err);
}

BOOST_AUTO_TEST_CASE(environment_overrides_are_validated_like_the_file) {
  auto path = writeText("env.toml", kGood);
  setenv("OUTBOX_BRIDGE_SOURCE_ACCOUNT_BATCH_SIZE", "lots", 1);
  auto r = runBridge({"check-config", "--config", path});
  unsetenv("OUTBOX_BRIDGE_SOURCE_ACCOUNT_BATCH_SIZE");
  BOOST_TEST(r.exitCode == 2);
  BOOST_TEST(r.err.find("source.account.batch_size: expected an integer, got 'lots'") != std::string::npos, r.err);
}

BOOST_AUTO_TEST_CASE(check_config_prints_the_effective_config_with_secrets_masked) {
  auto secretFile = writeText("admin-token", "admin-token-secret\n");
  auto path = writeText("good.toml", "[http]\nadmin_token_file = \"" + secretFile + "\"\n" + kGood);
  setenv("OUTBOX_BRIDGE_SOURCE_ACCOUNT_PASSWORD", "env-password-secret", 1);
  auto r = runBridge({"check-config", "--config", path});
  unsetenv("OUTBOX_BRIDGE_SOURCE_ACCOUNT_PASSWORD");
  BOOST_REQUIRE_MESSAGE(r.exitCode == 0, r.err);
  for (const char* secret : {"nats-token-secret", "dsn-password-secret", "admin-token-secret", "env-password-secret"}) {
    BOOST_TEST(r.out.find(secret) == std::string::npos, secret);
    BOOST_TEST(r.err.find(secret) == std::string::npos, secret);
  }
  BOOST_TEST(r.out.find("dsn = \"mysql://bridge:****@127.0.0.1:3306/app\"") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("token = \"****************\"") != std::string::npos);
  BOOST_TEST(r.out.find("stream = \"CONTROL_ACCOUNT\"") != std::string::npos);
  BOOST_TEST(r.out.find("duplicate_window = \"2m\"") != std::string::npos);
}

namespace {

// The subcommands a --help lists (CLI11's "Subcommands:" section: a line each, name first).
std::vector<std::string> listedSubcommands(const std::string& help) {
  constexpr std::string_view kHeading = "\nSubcommands:\n";
  std::vector<std::string> names;
  const size_t start = help.find(kHeading);
  if (start == std::string::npos) return names;
  std::istringstream lines(help.substr(start + kHeading.size()));
  for (std::string line; std::getline(lines, line) && line.rfind("  ", 0) == 0;) {
    std::istringstream words(line);
    names.emplace_back();
    words >> names.back();
  }
  return names;
}

}  // namespace

// Every command the binary has answers --help, found by asking it: `outbox-bridge --help` lists
// the subcommand table, and each of them its own (epoch: bump).
BOOST_AUTO_TEST_CASE(every_command_has_help_and_usage_errors_exit_2) {
  std::vector<std::vector<std::string>> commands{{}};
  std::vector<std::string> leaves;
  for (size_t i = 0; i < commands.size(); ++i) {
    std::vector<std::string> args = commands[i];
    args.push_back("--help");
    auto r = runBridge(args);
    const std::string name = i == 0 ? "outbox-bridge" : fmt::format("{}", fmt::join(commands[i], " "));
    BOOST_TEST(r.exitCode == 0, name);
    BOOST_TEST(r.out.find("Usage:") != std::string::npos, name);
    const std::vector<std::string> subs = listedSubcommands(r.out);
    if (i > 0 && subs.empty()) leaves.push_back(name);
    for (const auto& sub : subs) {
      commands.push_back(commands[i]);
      commands.back().push_back(sub);
    }
  }
  // The list is the binary's own; the packaging test `commands` holds README.md and the man page to it.
  BOOST_TEST(std::count(leaves.begin(), leaves.end(), "run") == 1, fmt::format("{}", fmt::join(leaves, ", ")));
  auto version = runBridge({"--version"});
  BOOST_TEST(version.exitCode == 0);
  BOOST_TEST(version.out.find("outbox-bridge 0.") != std::string::npos);
  BOOST_TEST(runBridge({}).exitCode == 2);
  BOOST_TEST(runBridge({"frobnicate"}).exitCode == 2);
  BOOST_TEST(runBridge({"run"}).exitCode == 2);
  BOOST_TEST(runBridge({"quarantine", "--config", "x.toml", "--source", "a", "--id", "abc", "--reason", "r"}).exitCode == 2);
  auto path = writeText("unknown-source.toml", kGood);
  auto r = runBridge({"epoch", "bump", "--config", path, "--source", "nope", "--reason", "x"});
  BOOST_TEST(r.exitCode == 2);
  BOOST_TEST(r.err.find("unknown source 'nope' (configured: account)") != std::string::npos, r.err);
}

BOOST_AUTO_TEST_CASE(secrets_never_reach_the_log) {
  TestDatabase database("logs");
  SourceSpec source{uniqueName("log", database), &database, {}};
  std::string config = writeConfig({source});
  migrate(config);
  insertRows(database.sql(), source.outboxTable(), 10);
  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE(waitUntil([&] { return database.state(source.name).publishedThrough == 10; }, 20s));
  // A failure path that names the connection: MariaDB goes away for a moment.
  stackCommand("restart", "mariadb");
  insertRows(database.sql(), source.outboxTable(), 10, 10);
  BOOST_REQUIRE(waitUntil([&] { return database.state(source.name).publishedThrough == 20; }, 30s));
  BOOST_TEST(bridge.stop() == 0);
  std::string log = bridge.log();
  BOOST_TEST(log.find(stack().mysqlPassword) == std::string::npos);
  BOOST_TEST(log.find(":****@") != std::string::npos);
}

// OUTBOX_BRIDGE_NATS_ULR (a typo) used to be ignored: the bridge then connected to the default URL.
BOOST_AUTO_TEST_CASE(an_unknown_outbox_bridge_variable_exits_2_naming_it) {
  auto path = writeText("typo.toml", kGood);
  setenv("OUTBOX_BRIDGE_NATS_ULR", "nats://elsewhere:4222", 1);
  auto check = runBridge({"check-config", "--config", path});
  // Bounded: a bridge that ignored the variable would run (exit 124 here) instead of refusing.
  auto run = runCommand(fmt::format("timeout 20 {} run --config {}", stack().bridgeBinary, path));
  unsetenv("OUTBOX_BRIDGE_NATS_ULR");
  BOOST_TEST(check.exitCode == 2);
  BOOST_TEST(check.err.find("config error: OUTBOX_BRIDGE_NATS_ULR: unknown environment variable") != std::string::npos,
             check.err);
  BOOST_TEST(run.exitCode == 2);
}

BOOST_AUTO_TEST_CASE(outbox_bridge_config_stands_for_the_config_option) {
  auto path = writeText("from-env.toml", kGood);
  setenv("OUTBOX_BRIDGE_CONFIG", path.c_str(), 1);
  auto r = runBridge({"check-config"});
  unsetenv("OUTBOX_BRIDGE_CONFIG");
  BOOST_TEST(r.exitCode == 0, r.err);
  BOOST_TEST(r.out.find("stream = \"CONTROL_ACCOUNT\"") != std::string::npos, r.out);
  auto none = runBridge({"check-config"});
  BOOST_TEST(none.exitCode == 2);
  BOOST_TEST(none.err.find("--config") != std::string::npos, none.err);
}

// The Docker image has no curl: its HEALTHCHECK is `outbox-bridge healthcheck`, which asks /readyz
// at the config's http.listen (a wildcard address is asked on loopback).
BOOST_AUTO_TEST_CASE(healthcheck_asks_readyz_of_a_running_bridge) {
  TestDatabase database("health");
  SourceSpec source{uniqueName("hc", database), &database, {}};
  int port = freeLoopbackPort();  // a fixed listen address, as a container has
  std::string config = writeConfig({source}, fmt::format("[http]\nlisten = \"0.0.0.0:{}\"\n", port));
  migrate(config);
  auto down = runBridge({"healthcheck", "--config", config});
  BOOST_TEST(down.exitCode == 1);
  BOOST_TEST(down.err.find(fmt::format("GET http://127.0.0.1:{}/readyz", port)) != std::string::npos, down.err);
  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE(bridge.httpPort() == port);
  CommandResult up;
  BOOST_TEST(waitUntil([&] {
    up = runBridge({"healthcheck", "--config", config});
    return up.exitCode == 0;
  }, 10s), up.err);
  BOOST_TEST(up.out.find("200 {\"status\":\"ready\"}") != std::string::npos, up.out);
  BOOST_TEST(runBridge({"healthcheck", "--url", fmt::format("http://127.0.0.1:{}", port), "--path", "/healthz"}).exitCode == 0);
  BOOST_TEST(runBridge({"healthcheck", "--url", fmt::format("http://127.0.0.1:{}", port), "--path", "/nope"}).exitCode == 1);
  BOOST_TEST(bridge.stop() == 0);
  BOOST_TEST(runBridge({"healthcheck", "--config", config}).exitCode == 1);
  BOOST_TEST(runBridge({"healthcheck"}).exitCode == 2);
}

// Where a refusal of the server sends the operator: a README section that explains it (the
// packaging suite's citations test checks the heading exists).
constexpr const char* kServerSection = "README, \"Which server a source reads\"";

// docs/design.md, "Contract v2: finding late commits": the bridge reads information_schema.INNODB_TRX, which needs the
// PROCESS privilege. Without it `run` exits 2 with the exact GRANT to run; with it, it starts.
BOOST_AUTO_TEST_CASE(run_without_the_process_privilege_exits_2_with_the_grant) {
  TestDatabase database("noproc");
  SourceSpec source{uniqueName("np", database), &database, {}};
  std::string config = writeConfig({source});
  migrate(config);
  const std::string user = "np_" + database.name().substr(database.name().size() - 8);
  auto& sql = database.sql();
  BOOST_REQUIRE(sql.exec(fmt::format("CREATE USER '{}'@'%' IDENTIFIED BY 'np-secret'", user)).isOk());
  struct DropUser {
    outbox::db::Connection& sql;
    std::string user;
    ~DropUser() { (void)sql.exec(fmt::format("DROP USER IF EXISTS '{}'@'%'", user)); }
  } dropUser{sql, user};
  BOOST_REQUIRE(sql.exec(fmt::format("GRANT SELECT, INSERT, UPDATE, DELETE ON `{}`.* TO '{}'@'%'", database.name(),
                                     user)).isOk());
  std::string upper;
  for (char c : source.name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::string env = fmt::format("OUTBOX_BRIDGE_SOURCE_{}_DSN='mysql://{}@{}:{}/{}' "
                                      "OUTBOX_BRIDGE_SOURCE_{}_PASSWORD=np-secret ",
                                      upper, user, stack().mysqlHost, stack().mysqlPort, database.name(), upper);
  auto refused = runCommand(env + fmt::format("timeout -s TERM 5 {} run --config {}", stack().bridgeBinary, config));
  BOOST_TEST(refused.exitCode == 2, refused.err);
  BOOST_TEST(refused.err.find(fmt::format("GRANT PROCESS ON *.* TO '{}'@'%';", user)) != std::string::npos,
             refused.err);
  BOOST_TEST(refused.err.find(source.name) != std::string::npos, refused.err);
  BOOST_TEST(refused.err.find(kServerSection) != std::string::npos, refused.err);

  BOOST_REQUIRE(sql.exec(fmt::format("GRANT PROCESS ON *.* TO '{}'@'%'", user)).isOk());
  auto started = runCommand(env + fmt::format("timeout -s TERM 3 {} run --config {}", stack().bridgeBinary, config));
  BOOST_TEST(started.exitCode == 124, started.err);  // ran until timeout stopped it
  BOOST_TEST(started.err.find("in step with stream") != std::string::npos, started.err);
}

// A replica (read_only on) cannot show the primary's open transactions: refused at start.
BOOST_AUTO_TEST_CASE(run_against_a_read_only_server_exits_2) {
  TestDatabase database("ro");
  SourceSpec source{uniqueName("ro", database), &database, {}};
  std::string config = writeConfig({source});
  migrate(config);
  auto& sql = database.sql();
  BOOST_REQUIRE(sql.exec("SET GLOBAL read_only = 1").isOk());
  struct Writable {
    outbox::db::Connection& sql;
    ~Writable() { (void)sql.exec("SET GLOBAL read_only = 0"); }
  } writable{sql};
  auto refused = runCommand(fmt::format("timeout -s TERM 5 {} run --config {}", stack().bridgeBinary, config));
  BOOST_TEST(refused.exitCode == 2, refused.err);
  BOOST_TEST(refused.err.find("read_only on: it is a replica") != std::string::npos, refused.err);
  BOOST_TEST(refused.err.find(kServerSection) != std::string::npos, refused.err);
}

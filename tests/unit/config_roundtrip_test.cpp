#define BOOST_TEST_MODULE config_roundtrip
#include <boost/test/unit_test.hpp>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>

#include "config/config.h"
#include "config/keys.h"

using namespace outbox;

// Issue 24, item 13: check-config's output is TOML that parses back to the config it shows (the
// masked secrets aside); values with quotes, newlines and control characters stay whole.
BOOST_AUTO_TEST_CASE(check_config_output_parses_back_to_the_same_config) {
  const std::string text = R"(
[nats]
url = "nats://n1:4222,tls://n2:4223"
user = "bob \"the\" builder"
password = "nats-pw"
connect_timeout = "1500ms"
ping_interval = "7s"
ack_timeout = "2m"
max_pending = 77

[http]
listen = "0.0.0.0:0"
metrics_listen = "[::1]:9090"
admin_token = "admin-token-0123456789"
max_snapshot_streams = 9
stuck_after = "10m"

[lease]
ttl = "1h"
heartbeat = "1m"

[database]
max_connections = 12

[log]
level = "debug"
format = "json"

[[source]]
name = "account"
dsn = "mysql://bridge:s3cret@db.internal:3307/app?ssl-mode=REQUIRED"
outbox_table = "acct_outbox"
snapshot_query = '''
-- the "accounts", as of now
SELECT id, 'a\tb' AS x
FROM accounts'''
stream = "ACCT"
subject_prefix = "ctl.acct"
batch_size = 50
poll_interval = "90s"
summary_interval = "5m"
snapshot_key = "id"
snapshot_path = "/account/control-snapshot"
on_poison = "quarantine"
wake = "binlog"
duplicate_window = "30s"
replicas = 3
max_age = "7d"
settle = "1500ms"
settle_max = "1m"
settled_stream = "ACCT_QUIET"
settle_max_keys = 5000

[[source]]
name = "stock"
dsn = "mysql://u@[::1]/shop"

[[doorbell]]
name = "db_internal"
dsn = "mysql://watcher:w4tch@DB.internal:3307/?ssl-mode=VERIFY_IDENTITY"
)";
  Config c = parseConfig(text, {{"OUTBOX_BRIDGE_SOURCE_STOCK_SNAPSHOT_KEY", "k\x01\x7f\"\\"}}, "test.toml");
  const std::string printed = renderMasked(c);
  Config back;
  BOOST_REQUIRE_NO_THROW(back = parseConfig(printed, {}, "printed.toml"));
  BOOST_TEST(renderMasked(back) == printed);
  for (const auto& key : config_detail::natsKeys()) BOOST_TEST(key.same(back.nats, c.nats), key.name);
  for (const auto& key : config_detail::httpKeys()) BOOST_TEST(key.same(back.http, c.http), key.name);
  for (const auto& key : config_detail::leaseKeys()) BOOST_TEST(key.same(back.lease, c.lease), key.name);
  for (const auto& key : config_detail::databaseKeys()) BOOST_TEST(key.same(back.database, c.database), key.name);
  for (const auto& key : config_detail::logKeys()) BOOST_TEST(key.same(back, c), key.name);
  BOOST_TEST(back.nats.password == std::string(16, '*'));
  BOOST_TEST(back.http.adminToken == std::string(16, '*'));
  BOOST_REQUIRE_EQUAL(back.sources.size(), c.sources.size());
  for (size_t i = 0; i < c.sources.size(); ++i) {
    const SourceConfig& a = c.sources[i];
    const SourceConfig& b = back.sources[i];
    for (const auto& key : config_detail::sourceKeys()) BOOST_TEST(key.same(a, b), key.name);
  }
  BOOST_TEST(c.sources[1].snapshotKey == "k\x01\x7f\"\\");
  // The settled stream's keys (issue 36): the first source's as given, the second's off.
  BOOST_TEST((back.sources[0].settle.count() == 1500 && back.sources[0].settledStream == "ACCT_QUIET" &&
              back.sources[0].settleMaxKeys == 5000));
  BOOST_TEST(!back.sources[1].settles());
  // The doorbell's account (issue 33): its password masked, the rest as given; the source on its
  // server reads through it, the other through its own.
  BOOST_REQUIRE_EQUAL(back.doorbells.size(), 1u);
  for (const auto& key : config_detail::doorbellKeys()) BOOST_TEST(key.same(back.doorbells[0], c.doorbells[0]), key.name);
  BOOST_TEST(back.doorbells[0].dsn.masked() == "mysql://watcher:****@DB.internal:3307/?ssl-mode=VERIFY_IDENTITY");
  BOOST_TEST(back.doorbells[0].dsn.password == "****");
  BOOST_TEST(printed.find("w4tch") == std::string::npos);
  BOOST_TEST(&c.doorbellDsn(c.sources[0]) == &c.doorbells[0].dsn);
  BOOST_TEST(&c.doorbellDsn(c.sources[1]) == &c.sources[1].dsn);
}

namespace {

using config_detail::Key;

// A table holding every declared key at its example.
template <typename T>
std::string everyKey(const std::string& header, const std::vector<Key<T>>& keys) {
  std::string text = header + "\n";
  for (const auto& key : keys) text += key.name + " = " + key.example + "\n";
  return text;
}

// For each declared key: its example is not the default, and check-config's output of the config
// holding every example parses back to the same value.
template <typename T>
void checkEveryKey(const std::vector<Key<T>>& keys, const T& defaults, const T& given, const T& back) {
  for (const auto& key : keys) {
    BOOST_TEST_CONTEXT("key " << key.name) {
      BOOST_TEST(!key.example.empty());
      BOOST_TEST(!key.same(given, defaults), "the example is the default, so the round trip proves nothing");
      BOOST_TEST(key.same(back, given));
    }
  }
}

// Each key of one of the single tables ([nats], ...) alone at its example, with what it needs
// (their logins exclude one another): not the default, and the same once check-config's output
// is parsed back.
template <typename T>
void checkEachKeyAlone(const std::string& header, const std::vector<Key<T>>& keys,
                       const std::function<const T&(const Config&)>& pick) {
  const std::string source = "[[source]]\nname = \"s\"\ndsn = \"mysql://u@h/db\"\n";
  const Config defaults = parseConfig(source, {}, "defaults.toml");
  for (const auto& key : keys) {
    BOOST_TEST_CONTEXT("key " << header << " " << key.name) {
      const std::string text = source + header + "\n" + key.name + " = " + key.example + "\n" + key.needs + "\n";
      Config given;
      Config back;
      BOOST_REQUIRE_NO_THROW(given = parseConfig(text, {}, "given.toml"));
      BOOST_REQUIRE_NO_THROW(back = parseConfig(renderMasked(given), {}, "printed.toml"));
      BOOST_TEST(!key.same(pick(given), pick(defaults)), "the example is the default, so the round trip proves nothing");
      BOOST_TEST(key.same(pick(back), pick(given)));
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_declared_key_of_the_single_tables_survives_check_config) {
  checkEachKeyAlone<NatsConfig>("[nats]", config_detail::natsKeys(), [](const Config& c) -> const NatsConfig& { return c.nats; });
  checkEachKeyAlone<HttpConfig>("[http]", config_detail::httpKeys(), [](const Config& c) -> const HttpConfig& { return c.http; });
  checkEachKeyAlone<LeaseConfig>("[lease]", config_detail::leaseKeys(),
                                 [](const Config& c) -> const LeaseConfig& { return c.lease; });
  checkEachKeyAlone<DatabaseConfig>("[database]", config_detail::databaseKeys(),
                                    [](const Config& c) -> const DatabaseConfig& { return c.database; });
  checkEachKeyAlone<Config>("[log]", config_detail::logKeys(), [](const Config& c) -> const Config& { return c; });
}

// Issue 37: the round trip walks the keys' declaration (config/keys.h), so a key added there is
// covered here without a line of this test, and one check-config forgets to print fails it.
BOOST_AUTO_TEST_CASE(every_declared_source_key_survives_check_config) {
  const Config defaults = parseConfig("[[source]]\nname = \"d\"\ndsn = \"mysql://u@h/db\"\n", {}, "defaults.toml");
  const Config given = parseConfig(everyKey("[[source]]", config_detail::sourceKeys()), {}, "given.toml");
  const std::string printed = renderMasked(given);
  Config back;
  BOOST_REQUIRE_NO_THROW(back = parseConfig(printed, {}, "printed.toml"));
  checkEveryKey(config_detail::sourceKeys(), defaults.sources[0], given.sources[0], back.sources[0]);
  BOOST_TEST(printed.find("pw-example-1") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(every_declared_doorbell_key_survives_check_config) {
  const std::string source = "[[source]]\nname = \"s\"\ndsn = \"mysql://u@db.internal:3307/app\"\n";
  const Config defaults = parseConfig(source + "[[doorbell]]\nname = \"d\"\ndsn = \"mysql://u@db.internal:3307/\"\n",
                                      {}, "defaults.toml");
  const Config given = parseConfig(source + everyKey("[[doorbell]]", config_detail::doorbellKeys()), {}, "given.toml");
  Config back;
  BOOST_REQUIRE_NO_THROW(back = parseConfig(renderMasked(given), {}, "printed.toml"));
  checkEveryKey(config_detail::doorbellKeys(), defaults.doorbells[0], given.doorbells[0], back.doorbells[0]);
}

// Every declared key but the name (which decides the variables' prefix) is read from its
// OUTBOX_BRIDGE_SOURCE_<NAME>_<KEY> variable as from the file.
BOOST_AUTO_TEST_CASE(every_declared_source_key_has_its_environment_variable) {
  const Config fromFile = parseConfig(everyKey("[[source]]", config_detail::sourceKeys()), {}, "given.toml");
  Environment env;
  for (const auto& key : config_detail::sourceKeys()) {
    if (key.name == "name") continue;
    BOOST_TEST_REQUIRE(key.example.find('\\') == std::string::npos, key.name);  // a plain value, unescaped below
    std::string value = key.example.front() == '"' ? key.example.substr(1, key.example.size() - 2) : key.example;
    std::string variable = "OUTBOX_BRIDGE_SOURCE_" + fromFile.sources[0].name + "_" + key.name;
    for (char& c : variable) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    env[variable] = value;
  }
  Config fromEnv;
  BOOST_REQUIRE_NO_THROW(fromEnv = parseConfig("[[source]]\nname = \"" + fromFile.sources[0].name + "\"\n", env, "t"));
  for (const auto& key : config_detail::sourceKeys()) {
    BOOST_TEST(key.same(fromEnv.sources[0], fromFile.sources[0]), key.name);
  }
}

// README's configuration reference names every [[source]] key, and only those: a key declared but
// not documented, or documented but not declared (nor so parsed, rendered or round-tripped), fails.
BOOST_AUTO_TEST_CASE(readme_names_every_declared_source_key) {
  const char* root = std::getenv("OUTBOX_TEST_SOURCE_ROOT");
  BOOST_REQUIRE_MESSAGE(root != nullptr, "OUTBOX_TEST_SOURCE_ROOT is not set (meson test sets it)");
  std::ifstream in(std::string(root) + "/README.md");
  BOOST_TEST_REQUIRE(in.good());
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string readme = buffer.str();
  const size_t start = readme.find("\n[[source]]\n", readme.find("## Configuration"));
  BOOST_TEST_REQUIRE(start != std::string::npos);
  const std::string block = readme.substr(start, readme.find("```", start) - start);
  std::set<std::string> documented;
  std::istringstream lines(block);
  const std::regex assignment("(?:^|; )([a-z_]+) = ");
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# ", 0) == 0) line = line.substr(2);   // an optional key, shown commented out
    line = line.substr(0, line.find("  #"));               // its comment
    for (std::sregex_iterator it(line.begin(), line.end(), assignment), end; it != end; ++it) {
      std::string key = (*it)[1];
      if (key.ends_with("_file")) key.resize(key.size() - 5);  // a secret's file form
      documented.insert(key);
    }
  }
  std::set<std::string> declared;
  for (const auto& key : config_detail::sourceKeys()) declared.insert(key.name);
  for (const auto& key : declared) BOOST_TEST(documented.count(key) == 1u, key << " is declared, not in README");
  for (const auto& key : documented) BOOST_TEST(declared.count(key) == 1u, key << " is in README, not declared");
}

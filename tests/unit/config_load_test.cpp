// What loading a config adds to its file: the environment's overrides and an unknown
// OUTBOX_BRIDGE_ variable, secrets read from files and masked, the credentials directory,
// durations, the log format, and subject templates and latest streams checked at load. Part of
// config (config_test.cpp); the helpers are in config_parse.h.
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <fstream>

#include "config/config.h"
#include "config_parse.h"

using namespace outbox;
using namespace outbox::test;

BOOST_AUTO_TEST_CASE(environment_overrides_every_key) {
  Environment env{{"OUTBOX_BRIDGE_NATS_URL", "nats://10.0.0.1:4222"},
                  {"OUTBOX_BRIDGE_HTTP_LISTEN", "0.0.0.0:9000"},
                  {"OUTBOX_BRIDGE_SOURCE_ACCOUNT_BATCH_SIZE", "50"},
                  {"OUTBOX_BRIDGE_SOURCE_ACCOUNT_PASSWORD", "from-env"},
                  {"OUTBOX_BRIDGE_SOURCE_ACCOUNT_POLL_INTERVAL", "1s"}};
  Config c = parseConfig(kMinimal, env, "test.toml");
  BOOST_TEST(c.nats.url == "nats://10.0.0.1:4222");
  BOOST_TEST(c.http.listen == "0.0.0.0:9000");
  BOOST_TEST(c.sources[0].batchSize == 50);
  BOOST_TEST(c.sources[0].dsn.password == "from-env");
  BOOST_TEST(c.sources[0].pollInterval.count() == 1000);
  BOOST_TEST(errorKey(kMinimal, {{"OUTBOX_BRIDGE_SOURCE_ACCOUNT_BATCH_SIZE", "many"}}) == "source.account.batch_size");
}

BOOST_AUTO_TEST_CASE(secrets_from_files_and_masked_output) {
  const char* path = "config_test_password.txt";
  {
    std::ofstream f(path);
    f << "file-secret\n";
  }
  Config c = parseConfig(std::string(kMinimal) + "password_file = \"" + path + "\"\n[http]\nadmin_token = \"tok-123-456-789-0\"\n",
                         {}, "test.toml");
  std::remove(path);
  BOOST_TEST(c.sources[0].dsn.password == "file-secret");
  std::string shown = renderMasked(c);
  BOOST_TEST(shown.find("file-secret") == std::string::npos);
  BOOST_TEST(shown.find("s3cret") == std::string::npos);
  BOOST_TEST(shown.find("tok-123-456-789-0") == std::string::npos);
  BOOST_TEST(shown.find("mysql://bridge:****@db.internal:3307/app") != std::string::npos);
  // The masked rendering is itself a valid config.
  BOOST_CHECK_NO_THROW(parseConfig(shown, {}, "rendered.toml"));
  BOOST_TEST(errorKey(std::string(kMinimal) + "password_file = \"/nonexistent/x\"\n") == "source.account.password_file");
  BOOST_TEST(errorKey(std::string(kMinimal) + "password = \"a\"\npassword_file = \"b\"\n") == "source.account.password");
}

// systemd's LoadCredential= puts a unit's secrets in $CREDENTIALS_DIRECTORY, a directory of the
// unit's own: one config serves the bridge's unit and the pruner's.
BOOST_AUTO_TEST_CASE(file_paths_may_begin_with_the_credentials_directory) {
  { std::ofstream("config_test_db-password") << "from-a-credential\n"; }
  { std::ofstream("config_test_ca.pem") << "-----BEGIN CERTIFICATE-----\n"; }
  const std::string toml = "[nats]\ntls_ca = \"${CREDENTIALS_DIRECTORY}/config_test_ca.pem\"\n" + std::string(kMinimal) +
                           "password_file = \"${CREDENTIALS_DIRECTORY}/config_test_db-password\"\n";
  Config c = parseConfig(toml, {{"CREDENTIALS_DIRECTORY", "."}}, "test.toml");
  BOOST_TEST(c.sources[0].dsn.password == "from-a-credential");
  BOOST_TEST(c.nats.tlsCa == "./config_test_ca.pem");
  // Outside such a unit the variable is not set: exit 2 naming the key and what sets it.
  BOOST_TEST(errorKey(toml) == "nats.tls_ca");
  const std::string only = std::string(kMinimal) + "password_file = \"${CREDENTIALS_DIRECTORY}/config_test_db-password\"\n";
  BOOST_TEST(errorKey(only) == "source.account.password_file");
  BOOST_TEST(errorText(only).find("LoadCredential=") != std::string::npos, errorText(only));
  BOOST_TEST(errorText(std::string(kMinimal) + "password_file = \"${CREDENTIALS_DIRECTORY}db-password\"\n",
                       {{"CREDENTIALS_DIRECTORY", "."}})
                 .find("a '/' and a file name follow it") != std::string::npos);
  // Only at the start of a path: elsewhere it is taken as it is written.
  BOOST_TEST(errorText(std::string(kMinimal) + "password_file = \"/x/${CREDENTIALS_DIRECTORY}\"\n",
                       {{"CREDENTIALS_DIRECTORY", "."}})
                 .find("/x/${CREDENTIALS_DIRECTORY}") != std::string::npos);
  std::remove("config_test_db-password");
  std::remove("config_test_ca.pem");
}

BOOST_AUTO_TEST_CASE(durations) {
  BOOST_TEST(parseDuration("k", "250ms").count() == 250);
  BOOST_TEST(parseDuration("k", "30s").count() == 30'000);
  BOOST_TEST(parseDuration("k", "2m").count() == 120'000);
  BOOST_TEST(parseDuration("k", "1h30m").count() == 5'400'000);
  BOOST_TEST(parseDuration("k", "0").count() == 0);
  BOOST_CHECK_THROW(parseDuration("k", "10"), ConfigError);
  BOOST_CHECK_THROW(parseDuration("k", "1x"), ConfigError);
  BOOST_CHECK_THROW(parseDuration("k", "s"), ConfigError);
  BOOST_CHECK_THROW(parseDuration("k", ""), ConfigError);
  BOOST_TEST(formatDuration(std::chrono::milliseconds(120'000)) == "2m");
  BOOST_TEST(formatDuration(std::chrono::milliseconds(250)) == "250ms");
}

// A typo in a variable name used to be ignored while the same typo in the file was an error.
BOOST_AUTO_TEST_CASE(an_unknown_outbox_bridge_variable_is_an_error_naming_it) {
  BOOST_TEST(errorKey(kMinimal, {{"OUTBOX_BRIDGE_NATS_ULR", "nats://x:4222"}}) == "OUTBOX_BRIDGE_NATS_ULR");
  BOOST_TEST(errorText(kMinimal, {{"OUTBOX_BRIDGE_NATS_ULR", "x"}}).find("unknown environment variable") !=
             std::string::npos);
  // A variable for a source the config does not have.
  BOOST_TEST(errorKey(kMinimal, {{"OUTBOX_BRIDGE_SOURCE_STOCK_DSN", "mysql://u@h/db"}}) == "OUTBOX_BRIDGE_SOURCE_STOCK_DSN");
  BOOST_TEST(errorKey(kMinimal, {{"OUTBOX_BRIDGE_SOURCE_ACCOUNT_BATCHSIZE", "5"}}) == "OUTBOX_BRIDGE_SOURCE_ACCOUNT_BATCHSIZE");
  // Every key's variable, *_file variants and OUTBOX_BRIDGE_CONFIG are known.
  Environment known{{"OUTBOX_BRIDGE_CONFIG", "/etc/outbox-bridge.toml"},
                    {"OUTBOX_BRIDGE_LOG_LEVEL", "warn"},
                    {"OUTBOX_BRIDGE_LOG_FORMAT", "json"},
                    {"OUTBOX_BRIDGE_LEASE_TTL", "40s"},
                    {"OUTBOX_BRIDGE_HTTP_ADMIN_TOKEN", "t123456789abcdef"},
                    {"OUTBOX_BRIDGE_SOURCE_ACCOUNT_ON_POISON", "quarantine"}};
  BOOST_TEST(errorKey(kMinimal, known) == "");
}

BOOST_AUTO_TEST_CASE(log_format_is_text_or_json) {
  BOOST_TEST((parseConfig(kMinimal, {}, "t").logFormat == LogFormat::kText));
  BOOST_TEST((parseConfig(std::string("[log]\nformat = \"json\"\n") + kMinimal, {}, "t").logFormat == LogFormat::kJson));
  BOOST_TEST((parseConfig(kMinimal, {{"OUTBOX_BRIDGE_LOG_FORMAT", "json"}}, "t").logFormat == LogFormat::kJson));
  BOOST_TEST(errorKey(std::string("[log]\nformat = \"yaml\"\n") + kMinimal) == "log.format");
  BOOST_TEST(renderMasked(parseConfig(kMinimal, {{"OUTBOX_BRIDGE_LOG_FORMAT", "json"}}, "t")).find("format = \"json\"") !=
             std::string::npos);
}

// Issue 24, items 5 and 9: durations by a loop, every sum and product checked.
BOOST_AUTO_TEST_CASE(durations_never_wrap) {
  BOOST_TEST(parseDuration("k", "7d").count() == 604'800'000);
  BOOST_TEST(parseDuration("k", "1m30s250ms").count() == 90'250);
  BOOST_TEST(parseDuration("k", "106751d").count() == 106751LL * 86'400'000);
  for (const char* bad : {"106751991167301d", "9223372036854775807ms1ms", "106752d", "99999999999999999999s"}) {
    try {
      parseDuration("k", bad);
      BOOST_ERROR(bad << " was taken");
    } catch (const ConfigError& e) {
      BOOST_TEST(e.reason().find("out of range") != std::string::npos, e.reason());
    }
  }
  BOOST_CHECK_THROW(parseDuration("k", std::string(50'000, '9') + "s"), ConfigError);
  for (const char* bad : {"1.5s", "-1s", "1s ", " 1s", "1S", "1sms", "ms"}) BOOST_CHECK_THROW(parseDuration("k", bad), ConfigError);
}

// Issue 21: the subject template and the latest stream are checked at load.
BOOST_AUTO_TEST_CASE(subject_templates_and_latest_streams_are_checked_at_load) {
  const std::string base = kMinimal;
  auto parsedSource = [&](const std::string& extra) { return parseConfig(base + extra, {}, "test.toml").sources[0]; };
  BOOST_TEST(parsedSource("subject = \"control.account.{entity_type}.{entity_key}\"\n").subject ==
             "control.account.{entity_type}.{entity_key}");
  BOOST_TEST(parsedSource("").subject.empty());
  BOOST_TEST(errorKey(base + "subject = \"other.{entity_key}\"\n") == "source.account.subject");
  BOOST_TEST(errorText(base + "subject = \"other.{entity_key}\"\n").find("'control.account.'") != std::string::npos);
  BOOST_TEST(errorKey(base + "subject = \"control.account.{key}\"\n") == "source.account.subject");
  BOOST_TEST(errorKey(base + "subject = \"control.account.{partition:2000}\"\n") == "source.account.subject");
  // The template follows subject_prefix, wherever the keys are in the table.
  BOOST_TEST(errorKey(base + "subject = \"acct.{entity_key}\"\nsubject_prefix = \"acct\"\n").empty());
  BOOST_TEST(parsedSource("latest_stream = \"ACCOUNT_LATEST\"\nsubject = \"control.account.{entity_type}.{entity_key}\"\n").latestStream ==
             "ACCOUNT_LATEST");
  BOOST_TEST(errorKey(base + "latest_stream = \"ACCOUNT_LATEST\"\n") == "source.account.latest_stream");
  BOOST_TEST(errorText(base + "latest_stream = \"ACCOUNT_LATEST\"\n").find("must name the entity type and key") !=
             std::string::npos);
  // Without the type, account 42 and invoice 42 would share one subject, and one message.
  BOOST_TEST(errorKey(base + "latest_stream = \"L\"\nsubject = \"control.account.{entity_key}\"\n") ==
             "source.account.latest_stream");
  BOOST_TEST(errorKey(base + "latest_stream = \"L\"\nsubject = \"control.account.{op}.{entity_key}\"\n") ==
             "source.account.latest_stream");
  BOOST_TEST(errorKey(base + "latest_stream = \"CONTROL_ACCOUNT\"\nsubject = \"control.account.{entity_type}.{entity_key}\"\n") ==
             "source.account.latest_stream");
  BOOST_TEST(errorKey(base + "latest_stream = \"a.b\"\nsubject = \"control.account.{entity_type}.{entity_key}\"\n") ==
             "source.account.latest_stream");
}

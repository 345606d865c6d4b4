// Items 13 and 14 of issue 24: check-config's output as TOML, and the smaller holes in flags and
// values.
#include <boost/test/unit_test.hpp>

#include "badinput.h"

using namespace outbox::badinput;

// Item 13: check-config printed values raw: a multi-line snapshot_query broke the TOML, and a
// newline in a value could forge a line (`password = ...`) in what operators read as the config.
BOOST_AUTO_TEST_CASE(check_config_prints_values_as_toml_strings) {
  check({
      {Via::kFile, "a multi-line snapshot_query", {"check-config", "--config", "{config}"},
       baseConfig("snapshot_query = '''\nSELECT id\nFROM t'''\n"), {}, 0,
       {"snapshot_query = \"SELECT id\\nFROM t\""}, {}},
      {Via::kFile, "a newline in a value forges a line", {"check-config", "--config", "{config}"},
       baseConfig("snapshot_key = \"bob\\npassword = \\\"forged\\\"\"\n"), {}, 0,
       {"snapshot_key = \"bob\\npassword = \\\"forged\\\"\""}, {"\npassword = \"forged\""}},
      {Via::kEnv, "a tab and a control character", {"check-config", "--config", "{config}"}, baseConfig(),
       {{"OUTBOX_BRIDGE_SOURCE_A_SNAPSHOT_KEY", "a\tb\x01"}}, 0, {"snapshot_key = \"a\\tb\\u0001\""}, {}},
  });
}

// Item 14: flags and values that were taken as they came.
BOOST_AUTO_TEST_CASE(flags_and_values_taken_as_they_came) {
  const std::string huge(200'000, 'q');
  const std::vector<std::string> replica{"replica", "--url", "http://127.0.0.1:1", "--source", "a"};
  auto with = [&](std::vector<std::string> base, std::vector<std::string> more) {
    base.insert(base.end(), more.begin(), more.end());
    return base;
  };
  check({
      {Via::kFlag, "replica --duration -1", with(replica, {"--duration", "-1"}), "", {}, 2, {"--duration"}, {}},
      {Via::kFlag, "replica --duration nan", with(replica, {"--duration", "nan"}), "", {}, 2, {"--duration"}, {}},
      {Via::kFlag, "replica --verify-interval inf", with(replica, {"--verify-interval", "inf"}), "", {}, 2,
       {"--verify-interval"}, {}},
      {Via::kFlag, "replica --dump into a missing directory", with(replica, {"--dump", "{tmp}/missing/dump.json"}), "",
       {}, 2, {"--dump"}, {}},
      {Via::kFlag, "replica --source \"\"", {"replica", "--url", "http://127.0.0.1:1", "--source", ""}, "", {}, 2,
       {"--source"}, {}},
      {Via::kFlag, "replica --source ../../admin", {"replica", "--url", "http://127.0.0.1:1", "--source", "../../admin"},
       "", {}, 2, {"--source"}, {}},
      {Via::kFlag, "healthcheck --path without '/'", {"healthcheck", "--url", "http://127.0.0.1:1", "--path", "readyz"},
       "", {}, 2, {"--path"}, {"1readyz"}},
      {Via::kFlag, "healthcheck --timeout nan", {"healthcheck", "--url", "http://127.0.0.1:1", "--timeout", "nan"}, "",
       {}, 2, {"--timeout"}, {}},
      {Via::kFlag, "prune --source \"\"", {"prune", "--config", "{config}", "--source", ""}, baseConfig(), {}, 2,
       {"--source"}, {}},
      {Via::kFlag, "epoch bump --reason \"\"", {"epoch", "bump", "--config", "{config}", "--source", "a", "--reason", ""},
       baseConfig(), {}, 2, {"--reason"}, {}},
      {Via::kFlag, "quarantine --reason \"  \"",
       {"quarantine", "--config", "{config}", "--source", "a", "--id", "1", "--reason", "  "}, baseConfig(), {}, 2,
       {"--reason"}, {}},
      {Via::kFlag, "quarantine --source \"\"",
       {"quarantine", "--config", "{config}", "--source", "", "--id", "1", "--reason", "r"}, baseConfig(), {}, 2,
       {"--source"}, {}},
      {Via::kFlag, "epoch bump --reason over 1,000 characters",
       {"epoch", "bump", "--config", "{config}", "--source", "a", "--reason", std::string(1001, 'r')}, baseConfig(), {},
       2, {"--reason", "1000"}, {std::string(200, 'r')}},
      {Via::kFile, "a 200 KB value is not echoed whole", {"check-config", "--config", "{config}"},
       "[log]\nlevel = \"" + huge + "\"\n" + baseConfig(), {}, 2, {"log.level", "200000 bytes"}, {std::string(300, 'q')}},
      {Via::kEnv, "a 100 KB value is not echoed whole", {"check-config", "--config", "{config}"}, baseConfig(),
       {{"OUTBOX_BRIDGE_SOURCE_A_STREAM", huge.substr(0, 100'000) + " x"}}, 2, {"source.a.stream"},
       {std::string(300, 'q')}},
      {Via::kEnv, "OUTBOX_BRIDGE_SOURCE_A_NAME", {"check-config", "--config", "{config}"}, baseConfig(),
       {{"OUTBOX_BRIDGE_SOURCE_A_NAME", "b"}}, 2, {"OUTBOX_BRIDGE_SOURCE_A_NAME"}, {}},
      {Via::kFile, "a DSN ending in '?'", {"check-config", "--config", "{config}"},
       "[[source]]\nname = \"a\"\ndsn = \"mysql://u@h/db?\"\n", {}, 2, {"source.a.dsn"}, {}},
      {Via::kFile, "a DSN ending in '&'", {"check-config", "--config", "{config}"},
       "[[source]]\nname = \"a\"\ndsn = \"mysql://u@h/db?ssl-mode=DISABLED&\"\n", {}, 2, {"source.a.dsn"}, {}},
      {Via::kEnv, "a DSN parameter given twice", {"check-config", "--config", "{config}"}, baseConfig(),
       {{"OUTBOX_BRIDGE_SOURCE_A_DSN", "mysql://u@h/db?ssl-mode=REQUIRED&ssl-mode=DISABLED"}}, 2,
       {"source.a.dsn", "ssl-mode", "twice"}, {}},
      {Via::kFlag, "a directory as config", {"check-config", "--config", "{tmp}/dir"}, "", {}, 2, {"is a directory"},
       {"at least one [[source]]"}},
  });
}

#define BOOST_TEST_MODULE config_settle
#include <boost/test/unit_test.hpp>

#include "config/config.h"

using namespace outbox;

// Issue 36: the settled stream's keys (README, "The settled stream"), each mistake refused at load
// naming its key.

namespace {

std::string source(const std::string& name, const std::string& extra = "") {
  return "[[source]]\nname = \"" + name + "\"\ndsn = \"mysql://u@127.0.0.1:1/db\"\n" + extra;
}

// The ConfigError's key, or "" when parsing succeeded.
std::string errorKey(const std::string& toml) {
  try {
    parseConfig(toml, {}, "test.toml");
  } catch (const ConfigError& e) {
    return e.key();
  }
  return "";
}

std::string errorText(const std::string& toml) {
  try {
    parseConfig(toml, {}, "test.toml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(settle_is_off_unless_set_and_takes_its_defaults) {
  const SourceConfig off = parseConfig(source("a"), {}, "t").sources[0];
  BOOST_TEST(!off.settles());
  BOOST_TEST(off.settledStream.empty());
  const SourceConfig on = parseConfig(source("a", "settle = \"2s\"\n"), {}, "t").sources[0];
  BOOST_TEST(on.settles());
  BOOST_TEST(on.settle.count() == 2000);
  BOOST_TEST(on.settleMax.count() == 30'000);
  BOOST_TEST(on.settledStream == "CONTROL_A_SETTLED");
  BOOST_TEST(on.settleMaxKeys == 100'000);
  const SourceConfig set = parseConfig(source("a", "stream = \"S\"\nsettle = \"250ms\"\nsettle_max = \"5s\"\n"
                                                   "settle_max_keys = 7\n"),
                                       {}, "t")
                               .sources[0];
  BOOST_TEST(set.settledStream == "S_SETTLED");
  BOOST_TEST((set.settle.count() == 250 && set.settleMax.count() == 5000 && set.settleMaxKeys == 7));
  // The environment, as for every source key.
  const SourceConfig env = parseConfig(source("a"),
                                       {{"OUTBOX_BRIDGE_SOURCE_A_SETTLE", "1s"},
                                        {"OUTBOX_BRIDGE_SOURCE_A_SETTLED_STREAM", "QUIET"}},
                                       "t")
                               .sources[0];
  BOOST_TEST((env.settle.count() == 1000 && env.settledStream == "QUIET"));
}

BOOST_AUTO_TEST_CASE(bad_windows_are_refused_naming_the_key) {
  BOOST_TEST(errorKey(source("a", "settle = \"0\"\n")) == "source.a.settle");
  BOOST_TEST(errorKey(source("a", "settle = \"0s\"\n")) == "source.a.settle");
  BOOST_TEST(errorKey(source("a", "settle = \"5s\"\nsettle_max = \"2s\"\n")) == "source.a.settle");
  BOOST_TEST(errorText(source("a", "settle = \"5s\"\nsettle_max = \"2s\"\n")).find("longer than settle_max") !=
             std::string::npos);
  // A settle_max of zero is that key's mistake.
  BOOST_TEST(errorKey(source("a", "settle = \"1s\"\nsettle_max = \"0\"\n")) == "source.a.settle_max");
  BOOST_TEST(errorText(source("a", "settle = \"1s\"\nsettle_max = \"0\"\n")).find("at least settle") !=
             std::string::npos);
  // Above settle_max's default.
  BOOST_TEST(errorKey(source("a", "settle = \"31s\"\n")) == "source.a.settle");
  BOOST_TEST(errorKey(source("a", "settle = \"30s\"\n")).empty());
  BOOST_TEST(errorKey(source("a", "settle = \"1s\"\nsettle_max = \"2h\"\n")) == "source.a.settle_max");
  // The keys that need settle.
  BOOST_TEST(errorKey(source("a", "settle_max = \"10s\"\n")) == "source.a.settle_max");
  BOOST_TEST(errorText(source("a", "settle_max = \"10s\"\n")).find("without settle") != std::string::npos);
  BOOST_TEST(errorKey(source("a", "settled_stream = \"Q\"\n")) == "source.a.settled_stream");
  BOOST_TEST(errorKey(source("a", "settle_max_keys = 10\n")) == "source.a.settle_max_keys");
  BOOST_TEST(errorKey(source("a", "settle = \"1s\"\nsettle_max_keys = 0\n")) == "source.a.settle_max_keys");
  // A main stream that expires what a new leader would replay.
  BOOST_TEST(errorKey(source("a", "settle = \"1s\"\nmax_age = \"40s\"\n")) == "source.a.settle");
  BOOST_TEST(errorKey(source("a", "settle = \"1s\"\nsettle_max = \"10s\"\nmax_age = \"15s\"\n")) ==
             "source.a.settle_max");
  BOOST_TEST(errorKey(source("a", "settle = \"1s\"\nsettle_max = \"10s\"\nmax_age = \"20s\"\n")).empty());
}

BOOST_AUTO_TEST_CASE(settled_streams_and_subjects_clashing_with_any_stream_are_refused) {
  // Its own streams.
  BOOST_TEST(errorKey(source("a", "settle = \"1s\"\nsettled_stream = \"CONTROL_A\"\n")) == "source.a.settled_stream");
  BOOST_TEST(errorKey(source("a", "settle = \"1s\"\nsettled_stream = \"L\"\nlatest_stream = \"L\"\n"
                                  "subject = \"control.a.{entity_type}.{entity_key}\"\n")) ==
             "source.a.settled_stream");
  BOOST_TEST(errorKey(source("a", "settle = \"1s\"\nsettled_stream = \"a.b\"\n")) == "source.a.settled_stream");
  // A default name too long for nats-server names the key to set.
  BOOST_TEST(errorKey(source("a", "settle = \"1s\"\nstream = \"" + std::string(250, 'S') + "\"\n")) ==
             "source.a.settled_stream");
  // Another source's main, latest or settled stream, either way round.
  const std::string settled = source("a", "settle = \"1s\"\n");
  BOOST_TEST(errorKey(settled + source("b", "stream = \"CONTROL_A_SETTLED\"\n")) == "source.b.stream");
  BOOST_TEST(errorKey(source("b", "stream = \"CONTROL_A_SETTLED\"\n") + settled) == "source.a.settled_stream");
  BOOST_TEST(errorKey(settled + source("b", "settle = \"1s\"\nsettled_stream = \"CONTROL_A_SETTLED\"\n")) ==
             "source.b.settled_stream");
  BOOST_TEST(errorKey(settled + source("b", "settle = \"1s\"\nsettled_stream = \"CONTROL_A\"\n")) ==
             "source.b.settled_stream");
  BOOST_TEST(errorKey(settled + source("b", "latest_stream = \"CONTROL_A_SETTLED\"\n"
                                            "subject = \"control.b.{entity_type}.{entity_key}\"\n")) ==
             "source.b.latest_stream");
  BOOST_TEST(errorText(settled + source("b", "stream = \"CONTROL_A_SETTLED\"\n")).find("source a (its settled_stream)") !=
             std::string::npos);
  // Subjects: a's settled subjects are control.a_settled.>.
  BOOST_TEST(errorKey(settled + source("b", "subject_prefix = \"control.a_settled\"\n")) == "source.b.subject_prefix");
  BOOST_TEST(errorKey(settled + source("b", "subject_prefix = \"control.a_settled.x\"\n")) ==
             "source.b.subject_prefix");
  BOOST_TEST(errorKey(source("b", "subject_prefix = \"control.a_settled.x\"\n") + settled) == "source.a.settle");
  BOOST_TEST(errorText(source("b", "subject_prefix = \"control.a_settled\"\n") + settled).find("settled subjects") !=
             std::string::npos);
  // Two settled prefixes: ctl settles as ctl_settled.>, which source c's prefix holds.
  BOOST_TEST(errorKey(source("b", "subject_prefix = \"ctl\"\nsettle = \"1s\"\n") +
                      source("c", "subject_prefix = \"ctl_settled.c\"\n")) == "source.c.subject_prefix");
  // Without settle the same names are free.
  BOOST_TEST(errorKey(source("a") + source("b", "subject_prefix = \"control.a_settled\"\nstream = \"CONTROL_A_SETTLED\"\n"))
                 .empty());
  // Two settling sources side by side.
  BOOST_TEST(errorKey(settled + source("b", "settle = \"1s\"\n")).empty());
}

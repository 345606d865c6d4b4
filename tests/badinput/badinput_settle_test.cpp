// Issue 36: the settled stream's keys against the binary. Each mistake is exit 2 naming its key,
// from check-config and from run, by file and by environment.
#include <boost/test/unit_test.hpp>

#include "badinput.h"

using namespace outbox::badinput;

namespace {

const std::vector<std::string> kCheck{"check-config", "--config", "{config}"};

Row refused(Via via, std::string what, std::string toml, std::vector<std::string> expected,
            std::map<std::string, std::string> env = {}) {
  return {via, std::move(what), kCheck, std::move(toml), std::move(env), 2, std::move(expected), {}};
}

Row accepted(std::string what, std::string toml, std::vector<std::string> expected = {}) {
  return {Via::kFile, std::move(what), kCheck, std::move(toml), {}, 0, std::move(expected), {}};
}

std::string source(const std::string& name, const std::string& extra = "") {
  return "[[source]]\nname = \"" + name + "\"\ndsn = \"mysql://u@127.0.0.1:1/db\"\n" + extra;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_settle_window_that_cannot_work_is_refused_naming_its_key) {
  check({
      refused(Via::kFile, "a window of 0", baseConfig("settle = \"0\"\n"), {"source.a.settle", "at least 1ms"}),
      refused(Via::kEnv, "a window of 0 by environment", baseConfig(), {"source.a.settle"},
              {{"OUTBOX_BRIDGE_SOURCE_A_SETTLE", "0s"}}),
      refused(Via::kFile, "settle above settle_max", baseConfig("settle = \"10s\"\nsettle_max = \"5s\"\n"),
              {"source.a.settle", "longer than settle_max"}),
      refused(Via::kFile, "settle_max of 0", baseConfig("settle = \"1s\"\nsettle_max = \"0\"\n"),
              {"source.a.settle_max", "at least settle"}),
      refused(Via::kFile, "settle above settle_max's default", baseConfig("settle = \"1m\"\n"),
              {"source.a.settle", "30s, its default"}),
      refused(Via::kFile, "settle_max without settle", baseConfig("settle_max = \"10s\"\n"),
              {"source.a.settle_max", "without settle"}),
      refused(Via::kEnv, "settled_stream without settle", baseConfig(), {"source.a.settled_stream", "without settle"},
              {{"OUTBOX_BRIDGE_SOURCE_A_SETTLED_STREAM", "Q"}}),
      refused(Via::kFile, "settle_max_keys of 0", baseConfig("settle = \"1s\"\nsettle_max_keys = 0\n"),
              {"source.a.settle_max_keys"}),
      refused(Via::kFile, "settle_max not well below max_age",
              baseConfig("settle = \"1s\"\nsettle_max = \"1m\"\nmax_age = \"90s\"\n"),
              {"source.a.settle_max", "half of max_age"}),
      refused(Via::kFile, "a window that is no duration", baseConfig("settle = \"soon\"\n"), {"source.a.settle"}),
      {Via::kFile, "the same under run", {"run", "--config", "{config}"}, baseConfig("settle = \"0\"\n"), {}, 2,
       {"config error:", "source.a.settle"}, {}},
      accepted("settle with its defaults shown", baseConfig("settle = \"2s\"\n"),
               {"settle = \"2s\"", "settle_max = \"30s\"", "settled_stream = \"CONTROL_A_SETTLED\"",
                "settle_max_keys = 100000"}),
  });
}

BOOST_AUTO_TEST_CASE(a_settled_stream_clashing_with_another_stream_is_refused_naming_its_key) {
  const std::string settling = source("a", "settle = \"1s\"\n");
  check({
      refused(Via::kFile, "the source's own stream", baseConfig("settle = \"1s\"\nsettled_stream = \"CONTROL_A\"\n"),
              {"source.a.settled_stream", "the source's stream"}),
      refused(Via::kFile, "another source's main stream", settling + source("b", "stream = \"CONTROL_A_SETTLED\"\n"),
              {"source.b.stream", "source a (its settled_stream)"}),
      refused(Via::kFile, "another source's settled stream",
              settling + source("b", "settle = \"1s\"\nsettled_stream = \"CONTROL_A_SETTLED\"\n"),
              {"source.b.settled_stream", "source a"}),
      refused(Via::kEnv, "another source's main stream by environment", source("a") + source("b"),
              {"source.b.settled_stream", "source a (its stream)"},
              {{"OUTBOX_BRIDGE_SOURCE_B_SETTLE", "1s"}, {"OUTBOX_BRIDGE_SOURCE_B_SETTLED_STREAM", "CONTROL_A"}}),
      refused(Via::kFile, "subjects under another source's settled subjects",
              settling + source("b", "subject_prefix = \"control.a_settled.b\"\n"),
              {"source.b.subject_prefix", "settled subjects control.a_settled.>"}),
      refused(Via::kFile, "settled subjects over another source's subjects",
              source("b", "subject_prefix = \"control.a_settled\"\n") + settling,
              {"source.a.settle", "its settled subjects control.a_settled.>"}),
      accepted("two settling sources", settling + source("b", "settle = \"1s\"\n")),
  });
}

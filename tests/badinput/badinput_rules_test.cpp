// Items 5, 6, 7, 8 and 12 of issue 24: values each valid alone that the servers would refuse, or
// that two sources cannot share.
#include <boost/test/unit_test.hpp>

#include "badinput.h"

using namespace outbox::badinput;

namespace {

const std::vector<std::string> kCheck{"check-config", "--config", "{config}"};

std::string source(const std::string& name, const std::string& extra = "") {
  return "[[source]]\nname = \"" + name + "\"\ndsn = \"mysql://u@127.0.0.1:1/db\"\n" + extra;
}

Row refused(Via via, std::string what, std::string toml, std::vector<std::string> expected,
            std::map<std::string, std::string> env = {}) {
  return {via, std::move(what), kCheck, std::move(toml), std::move(env), 2, std::move(expected), {}};
}

Row accepted(std::string what, std::string toml, std::vector<std::string> expected = {}) {
  return {Via::kFile, std::move(what), kCheck, std::move(toml), {}, 0, std::move(expected), {}};
}

}  // namespace

// Item 5: durations wrapped (max_age = "106751991167301d" became 30,592 s) and went unchecked
// against what nats-server takes.
BOOST_AUTO_TEST_CASE(durations_that_overflow_or_that_nats_server_refuses) {
  check({
      refused(Via::kFile, "max_age overflows", baseConfig("max_age = \"106751991167301d\"\n"),
              {"config error: source.a.max_age:", "out of range"}),
      refused(Via::kEnv, "the sum overflows", baseConfig(),
              {"config error: source.a.max_age:", "out of range"},
              {{"OUTBOX_BRIDGE_SOURCE_A_MAX_AGE", "9223372036854775807ms1ms"}}),
      {Via::kFlag, "prune --keep overflows", {"prune", "--config", "{config}", "--keep", "106751991167301d"},
       baseConfig(), {}, 2, {"--keep", "out of range"}, {}},
      refused(Via::kFile, "duplicate_window above max_age",
              baseConfig("duplicate_window = \"10m\"\nmax_age = \"5m\"\n"), {"source.a.duplicate_window", "max_age"}),
      refused(Via::kFile, "max_age 1ms", baseConfig("max_age = \"1ms\"\n"), {"source.a.max_age"}),
      refused(Via::kFile, "max_age 50ms", baseConfig("max_age = \"50ms\"\n"), {"source.a.max_age"}),
      accepted("an unset duplicate_window follows a shorter max_age", baseConfig("max_age = \"30s\"\n"),
               {"duplicate_window = \"30s\""}),
  });
}

// Issue 34: summary_interval is 0 (a read per request) or from 1s to 24h; the default is a minute.
BOOST_AUTO_TEST_CASE(summary_interval_is_zero_or_from_a_second_to_a_day) {
  check({
      refused(Via::kFile, "summary_interval 500ms", baseConfig("summary_interval = \"500ms\"\n"),
              {"config error: source.a.summary_interval:", "from 1s to 24h"}),
      refused(Via::kEnv, "summary_interval 2d", baseConfig(), {"config error: source.a.summary_interval:", "24h"},
              {{"OUTBOX_BRIDGE_SOURCE_A_SUMMARY_INTERVAL", "2d"}}),
      refused(Via::kFile, "summary_interval not a duration", baseConfig("summary_interval = \"soon\"\n"),
              {"source.a.summary_interval"}),
      accepted("summary_interval 0", baseConfig("summary_interval = \"0\"\n"), {"summary_interval = \"0\""}),
      accepted("summary_interval unset: a minute", baseConfig(), {"summary_interval = \"1m\""}),
  });
}

// Item 6: sources that would share a state row, a table, subjects or a route.
BOOST_AUTO_TEST_CASE(two_sources_that_would_share_something_are_refused_naming_both) {
  check({
      refused(Via::kFile, "names differing in case", source("fzcase") + source("FZCASE", "subject_prefix = \"x.y\"\nstream = \"OTHER\"\n"),
              {"source.FZCASE", "fzcase"}),
      refused(Via::kFile, "one outbox table", source("a", "outbox_table = \"t1\"\n") + source("b", "outbox_table = \"t1\"\n"),
              {"source.b.outbox_table", "source a"}),
      refused(Via::kEnv, "one outbox table", source("a", "outbox_table = \"t1\"\n") + source("b"),
              {"source.b.outbox_table", "source a"}, {{"OUTBOX_BRIDGE_SOURCE_B_OUTBOX_TABLE", "T1"}}),
      refused(Via::kFile, "a table that is another's versions table",
              source("a", "outbox_table = \"t1\"\n") + source("b", "outbox_table = \"t1_versions\"\n"),
              {"source.b.outbox_table", "source a"}),
      refused(Via::kFile, "one subject_prefix inside the other",
              source("a", "subject_prefix = \"x.y\"\n") + source("b", "subject_prefix = \"x.y.z\"\n"),
              {"source.b.subject_prefix", "source a"}),
      refused(Via::kFile, "equal subject_prefix",
              source("a", "subject_prefix = \"x.y\"\n") + source("b", "subject_prefix = \"x.y\"\n"),
              {"source.b.subject_prefix", "source a"}),
      refused(Via::kFile, "one snapshot_path", source("a", "snapshot_path = \"/s\"\n") + source("b", "snapshot_path = \"/s\"\n"),
              {"source.b.snapshot_path", "source a"}),
      refused(Via::kFile, "outbox_source_state", baseConfig("outbox_table = \"outbox_source_state\"\n"),
              {"source.a.outbox_table", "bridge's own"}),
      refused(Via::kFile, "outbox_bridge_lease", baseConfig("outbox_table = \"OUTBOX_BRIDGE_LEASE\"\n"),
              {"source.a.outbox_table", "bridge's own"}),
      refused(Via::kFile, "outbox_quarantine", baseConfig("outbox_table = \"outbox_quarantine\"\n"), {"bridge's own"}),
      refused(Via::kFile, "outbox_epoch_history", baseConfig("outbox_table = \"outbox_epoch_history\"\n"), {"bridge's own"}),
      refused(Via::kFile, "outbox_scan_holes", baseConfig("outbox_table = \"outbox_scan_holes\"\n"), {"bridge's own"}),
      refused(Via::kFile, "outbox_bump_removed", baseConfig("outbox_table = \"outbox_bump_removed\"\n"), {"bridge's own"}),
      refused(Via::kFile, "outbox_bridge_candidate", baseConfig("outbox_table = \"outbox_bridge_candidate\"\n"),
              {"bridge's own"}),
      refused(Via::kFile, "outbox_schema_migrations", baseConfig("outbox_table = \"outbox_schema_migrations\"\n"),
              {"bridge's own"}),
      accepted("one table name in two databases",
               source("a", "outbox_table = \"t1\"\n") +
                   "[[source]]\nname = \"b\"\ndsn = \"mysql://u@127.0.0.1:1/other\"\noutbox_table = \"t1\"\n"),
  });
}

// Item 8: an alias that shadows a built-in route.
BOOST_AUTO_TEST_CASE(a_snapshot_path_that_shadows_a_route_is_refused) {
  std::vector<Row> rows;
  for (const char* path : {"/metrics", "/healthz", "/readyz", "/", "/v1", "/v1/sources/a/control-snapshot",
                           "/v1/admin/leases", "/a b", "/a/../metrics", "/a?b"}) {
    rows.push_back(refused(Via::kFile, path, baseConfig(std::string("snapshot_path = \"") + path + "\"\n"),
                           {"source.a.snapshot_path"}));
  }
  rows.push_back(refused(Via::kEnv, "/metrics", baseConfig(), {"source.a.snapshot_path", "shadow"},
                         {{"OUTBOX_BRIDGE_SOURCE_A_SNAPSHOT_PATH", "/metrics"}}));
  rows.push_back(accepted("an alias of its own", baseConfig("snapshot_path = \"/account/control-snapshot\"\n")));
  check(rows);
}

// Item 7 (at load): snapshot_query is one SELECT statement.
BOOST_AUTO_TEST_CASE(a_snapshot_query_that_is_not_one_select_is_refused) {
  std::vector<Row> rows;
  for (const char* query : {"SELECT 1; DROP TABLE t", "DROP TABLE t", "DELETE FROM t", "UPDATE t SET x = 1",
                            "INSERT INTO t VALUES (1)", "CALL p()", "SET @a = 1", "WITH d AS (SELECT 1) DELETE FROM t",
                            "SELECT 1;;", "SELECT ';' ; SELECT 2", "-- x\nTRUNCATE t", "SELECT 'unclosed"}) {
    rows.push_back(refused(Via::kFile, query, baseConfig(std::string("snapshot_query = '''") + query + "'''\n"),
                           {"source.a.snapshot_query"}));
  }
  rows.push_back(refused(Via::kEnv, "two statements", baseConfig(), {"source.a.snapshot_query", "second statement"},
                         {{"OUTBOX_BRIDGE_SOURCE_A_SNAPSHOT_QUERY", "SELECT 1; DELETE FROM t"}}));
  for (const char* query : {"SELECT id FROM t WHERE s = ';'", "-- why\n  select id from t;", "/* x */ SELECT 1 ;  \n",
                            "WITH c AS (SELECT 1 AS id) SELECT id FROM c", "SELECT `a;b` FROM t # note"}) {
    rows.push_back(accepted(query, baseConfig(std::string("snapshot_query = '''") + query + "'''\n")));
  }
  check(rows);
}

// Item 12: what check-config passed and `run` could never do.
BOOST_AUTO_TEST_CASE(a_config_that_can_never_work_exits_2_from_check_config_and_run) {
  std::vector<Row> rows{
      refused(Via::kFile, "connect_timeout 0", "[nats]\nconnect_timeout = \"0\"\n" + baseConfig(),
              {"nats.connect_timeout"}),
      refused(Via::kFile, "subject_prefix $JS.API", baseConfig("subject_prefix = \"$JS.API\"\n"),
              {"source.a.subject_prefix"}),
      refused(Via::kEnv, "subject_prefix $X", baseConfig(), {"source.a.subject_prefix"},
              {{"OUTBOX_BRIDGE_SOURCE_A_SUBJECT_PREFIX", "$X.y"}}),
      refused(Via::kFile, "subject_prefix with a wildcard", baseConfig("subject_prefix = \"a.*\"\n"),
              {"source.a.subject_prefix"}),
      refused(Via::kEnv, "subject_prefix with a space", baseConfig(), {"source.a.subject_prefix"},
              {{"OUTBOX_BRIDGE_SOURCE_A_SUBJECT_PREFIX", "a b"}}),
      refused(Via::kFile, "an empty NATS URL", "[nats]\nurl = \"\"\n" + baseConfig(), {"nats.url"}),
      refused(Via::kEnv, "NATS port 99999", baseConfig(), {"nats.url"},
              {{"OUTBOX_BRIDGE_NATS_URL", "nats://127.0.0.1:99999"}}),
      refused(Via::kFile, "an empty server in the list", "[nats]\nurl = \"nats://a:4222,\"\n" + baseConfig(),
              {"nats.url"}),
      refused(Via::kEnv, "listen :18313", baseConfig(), {"http.listen"}, {{"OUTBOX_BRIDGE_HTTP_LISTEN", ":18313"}}),
      refused(Via::kEnv, "listen 0.0.0.0:99999", baseConfig(), {"http.listen"},
              {{"OUTBOX_BRIDGE_HTTP_LISTEN", "0.0.0.0:99999"}}),
      refused(Via::kEnv, "listen port 65536", baseConfig(), {"http.listen"},
              {{"OUTBOX_BRIDGE_HTTP_LISTEN", "127.0.0.1:65536"}}),
      refused(Via::kEnv, "listen with a trailing space", baseConfig(), {"http.listen"},
              {{"OUTBOX_BRIDGE_HTTP_LISTEN", "127.0.0.1:8080 "}}),
      refused(Via::kFile, "listen with a NUL", "[http]\nlisten = \"127.0.0.1:80\\u0000\"\n" + source("a"),
              {"http.listen"}),
      refused(Via::kEnv, "metrics_listen port 65536", baseConfig(), {"http.metrics_listen"},
              {{"OUTBOX_BRIDGE_HTTP_METRICS_LISTEN", "127.0.0.1:65536"}}),
      refused(Via::kFile, "a lease TTL past innodb_lock_wait_timeout", "[lease]\nttl = \"40000d\"\n" + baseConfig(),
              {"lease.ttl"}),
  };
  // `run` loads the config the same way: the same exit, before it connects to anything.
  for (size_t i = 0, n = rows.size(); i < n; ++i) {
    Row run = rows[i];
    run.args[0] = "run";
    run.what += " (run)";
    rows.push_back(run);
  }
  check(rows);
}

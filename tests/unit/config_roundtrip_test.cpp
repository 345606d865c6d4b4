#define BOOST_TEST_MODULE config_roundtrip
#include <boost/test/unit_test.hpp>

#include "config/config.h"

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
  BOOST_TEST(back.nats.url == c.nats.url);
  BOOST_TEST(back.nats.user == c.nats.user);
  BOOST_TEST(back.nats.password == std::string(16, '*'));
  BOOST_TEST((back.nats.connectTimeout == c.nats.connectTimeout && back.nats.pingInterval == c.nats.pingInterval &&
              back.nats.ackTimeout == c.nats.ackTimeout && back.nats.maxPending == c.nats.maxPending));
  BOOST_TEST(back.http.listen == c.http.listen);
  BOOST_TEST(back.http.metricsListen == c.http.metricsListen);
  BOOST_TEST(back.http.adminToken == std::string(16, '*'));
  BOOST_TEST((back.http.maxSnapshotStreams == c.http.maxSnapshotStreams && back.http.stuckAfter == c.http.stuckAfter));
  BOOST_TEST((back.lease.ttl == c.lease.ttl && back.lease.heartbeat == c.lease.heartbeat));
  BOOST_TEST(back.database.maxConnections == 12);
  BOOST_TEST((back.logLevel == c.logLevel && back.logFormat == c.logFormat));
  BOOST_REQUIRE_EQUAL(back.sources.size(), c.sources.size());
  for (size_t i = 0; i < c.sources.size(); ++i) {
    const SourceConfig& a = c.sources[i];
    const SourceConfig& b = back.sources[i];
    BOOST_TEST(b.name == a.name);
    BOOST_TEST(b.dsn.masked() == a.dsn.masked());
    BOOST_TEST((b.dsn.user == a.dsn.user && b.dsn.host == a.dsn.host && b.dsn.port == a.dsn.port &&
                b.dsn.database == a.dsn.database && b.dsn.sslMode == a.dsn.sslMode));
    BOOST_TEST(b.outboxTable == a.outboxTable);
    BOOST_TEST(b.snapshotQuery == a.snapshotQuery);
    BOOST_TEST(b.stream == a.stream);
    BOOST_TEST(b.subjectPrefix == a.subjectPrefix);
    BOOST_TEST(b.snapshotKey == a.snapshotKey);
    BOOST_TEST(b.snapshotPath == a.snapshotPath);
    BOOST_TEST((b.batchSize == a.batchSize && b.pollInterval == a.pollInterval && b.summaryInterval == a.summaryInterval &&
                b.onPoison == a.onPoison &&
                b.wake == a.wake && b.duplicateWindow == a.duplicateWindow && b.replicas == a.replicas && b.maxAge == a.maxAge));
    BOOST_TEST((b.settle == a.settle && b.settleMax == a.settleMax && b.settledStream == a.settledStream &&
                b.settleMaxKeys == a.settleMaxKeys));
  }
  BOOST_TEST(c.sources[1].snapshotKey == "k\x01\x7f\"\\");
  // The settled stream's keys (issue 36): the first source's as given, the second's off.
  BOOST_TEST((back.sources[0].settle.count() == 1500 && back.sources[0].settledStream == "ACCT_QUIET" &&
              back.sources[0].settleMaxKeys == 5000));
  BOOST_TEST(!back.sources[1].settles());
  // The doorbell's account (issue 33): its password masked, the rest as given; the source on its
  // server reads through it, the other through its own.
  BOOST_REQUIRE_EQUAL(back.doorbells.size(), 1u);
  BOOST_TEST(back.doorbells[0].name == "db_internal");
  BOOST_TEST(back.doorbells[0].dsn.masked() == "mysql://watcher:****@DB.internal:3307/?ssl-mode=VERIFY_IDENTITY");
  BOOST_TEST(back.doorbells[0].dsn.password == "****");
  BOOST_TEST(printed.find("w4tch") == std::string::npos);
  BOOST_TEST(&c.doorbellDsn(c.sources[0]) == &c.doorbells[0].dsn);
  BOOST_TEST(&c.doorbellDsn(c.sources[1]) == &c.sources[1].dsn);
}

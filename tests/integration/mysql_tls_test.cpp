#define BOOST_TEST_MODULE mysql_tls
#include <boost/test/unit_test.hpp>

#include <fmt/format.h>

#include "config/config.h"
#include "db/connection.h"
#include "harness.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

// The DSN's TLS settings (ssl-mode, ssl-ca, ssl-cert, ssl-key) against the stack's MariaDB, which
// tools/stack starts with a certificate for 127.0.0.1 signed by its own CA ($OUTBOX_STACK_DIR/tls).

namespace {

std::string tlsDir() { return stack().stackDir + "/tls"; }

// An account of the test database that must come over TLS (`require`: "SSL" or "X509"), dropped
// at the end.
struct TlsAccount {
  TestDatabase& database;
  std::string user;
  std::string password = "tls-pw-7c1e";
  // `grants`: "ALL" on the database, or the README's least privileges for the outbox table named
  // (without SLAVE MONITOR and the doorbell's grants unless `slaveMonitor`).
  TlsAccount(TestDatabase& db, const std::string& prefix, const std::string& require, const std::string& outboxTable = "",
             bool slaveMonitor = true)
      : database(db), user(uniqueName(prefix, db)) {
    registerSecret(password);
    exec(fmt::format("CREATE USER '{}'@'127.0.0.1' IDENTIFIED BY '{}' REQUIRE {}", user, password, require));
    if (outboxTable.empty()) {
      exec(fmt::format("GRANT ALL ON `{}`.* TO '{}'@'127.0.0.1'", db.name(), user));
    } else {
      // README "Production security", word for word but the names.
      exec(fmt::format("GRANT SELECT, DELETE ON `{}`.`{}` TO '{}'@'127.0.0.1'", db.name(), outboxTable, user));
      for (const std::string& table : {outboxTable + "_versions", std::string("outbox_source_state"),
                                      std::string("outbox_bridge_lease"), std::string("outbox_bridge_candidate"),
                                      std::string("outbox_quarantine"), std::string("outbox_epoch_history"),
                                      std::string("outbox_scan_holes"), std::string("outbox_bump_removed")}) {
        exec(fmt::format("GRANT SELECT, INSERT, UPDATE, DELETE ON `{}`.`{}` TO '{}'@'127.0.0.1'", db.name(), table, user));
      }
    }
    exec(fmt::format("GRANT PROCESS ON *.* TO '{}'@'127.0.0.1'", user));
    if (!outboxTable.empty() && slaveMonitor) {
      exec(fmt::format("GRANT SLAVE MONITOR ON *.* TO '{}'@'127.0.0.1'", user));
      exec(fmt::format("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{}'@'127.0.0.1'", user));
    }
  }
  void exec(const std::string& sql) {
    Status s = database.sql().exec(sql);
    if (!s.isOk()) throw std::runtime_error(s.message());
  }
  ~TlsAccount() { (void)database.sql().exec(fmt::format("DROP USER IF EXISTS '{}'@'127.0.0.1'", user)); }
  // `host`: how the DSN names the server (127.1 reaches 127.0.0.1 under a name its certificate lacks).
  std::string dsn(const std::string& params, const std::string& host = "127.0.0.1") const {
    return fmt::format("mysql://{}@{}:{}/{}{}", user, host, stack().mysqlPort, database.name(),
                       params.empty() ? "" : "?" + params);
  }
  Result<std::unique_ptr<db::Connection>> connect(const std::string& params, const std::string& host = "127.0.0.1") const {
    db::ConnectParams p = db::paramsFrom(Dsn::parse("dsn", dsn(params, host)));
    p.password = password;
    return db::Connection::open(p);
  }
};

// The cipher of a connection's session; empty when it is plain text.
std::string cipherOf(db::Connection& conn) {
  auto rows = conn.query("SHOW SESSION STATUS LIKE 'Ssl_cipher'");
  if (!rows.isOk() || !rows->next()) return "";
  return std::string(rows->text(1));
}

}  // namespace

BOOST_AUTO_TEST_CASE(an_account_that_requires_tls_connects_with_each_mode_but_disabled) {
  TestDatabase database("mytls");
  TlsAccount account(database, "tls", "SSL");
  const std::string ca = "ssl-ca=" + tlsDir() + "/ca.pem";
  for (const std::string& params : {std::string(""), std::string("ssl-mode=PREFERRED"), std::string("ssl-mode=REQUIRED"),
                                   "ssl-mode=VERIFY_CA&" + ca, "ssl-mode=VERIFY_IDENTITY&" + ca}) {
    BOOST_TEST_CONTEXT(params) {
      auto conn = account.connect(params);
      BOOST_REQUIRE_MESSAGE(conn.isOk(), conn.status().message());
      BOOST_TEST(!cipherOf(**conn).empty());
    }
  }
  // Refused by the server, and the error says which setting to change.
  auto plain = account.connect("ssl-mode=DISABLED");
  BOOST_REQUIRE(!plain.isOk());
  BOOST_TEST(plain.status().message().find("mysql error 1045") != std::string::npos, plain.status().message());
  BOOST_TEST(plain.status().message().find("ssl-mode=DISABLED") != std::string::npos, plain.status().message());
  BOOST_TEST(plain.status().message().find("REQUIRE SSL") != std::string::npos, plain.status().message());
  BOOST_TEST(plain.status().message().find(account.password) == std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_certificate_from_another_ca_is_refused_under_verify_ca) {
  TestDatabase database("mytlsca");
  TlsAccount account(database, "tlc", "SSL");
  const std::string dir = fmt::format("{}/wrongca-{}", tempDir(), database.name());
  makeCa(dir);
  for (const char* mode : {"VERIFY_CA", "VERIFY_IDENTITY"}) {
    BOOST_TEST_CONTEXT(mode) {
      auto conn = account.connect(fmt::format("ssl-mode={}&ssl-ca={}-ca.pem", mode, dir));
      BOOST_REQUIRE(!conn.isOk());
      const std::string& message = conn.status().message();
      BOOST_TEST(message.find("mysql error 2026") != std::string::npos, message);  // CR_SSL_CONNECTION_ERROR
      BOOST_TEST(message.find(fmt::format("ssl-ca={}-ca.pem", dir)) != std::string::npos, message);
    }
  }
}

// The stack's certificate names 127.0.0.1 and localhost. Reached as 127.1 (the same address),
// VERIFY_CA accepts it (the CA signed it) and VERIFY_IDENTITY refuses it (not the name asked for).
BOOST_AUTO_TEST_CASE(verify_identity_refuses_a_certificate_for_another_name_that_verify_ca_accepts) {
  TestDatabase database("mytlsid");
  TlsAccount account(database, "tli", "SSL");
  const std::string ca = "ssl-ca=" + tlsDir() + "/ca.pem";
  auto chainOnly = account.connect("ssl-mode=VERIFY_CA&" + ca, "127.1");
  BOOST_REQUIRE_MESSAGE(chainOnly.isOk(), chainOnly.status().message());
  BOOST_TEST(!cipherOf(**chainOnly).empty());
  auto identity = account.connect("ssl-mode=VERIFY_IDENTITY&" + ca, "127.1");
  BOOST_REQUIRE(!identity.isOk());
  BOOST_TEST(identity.status().message().find("mysql error 2026") != std::string::npos, identity.status().message());
  BOOST_TEST(identity.status().message().find("ssl-mode=VERIFY_IDENTITY") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_account_that_requires_a_client_certificate_connects_with_ssl_cert_and_ssl_key) {
  TestDatabase database("mytlsx");
  TlsAccount account(database, "tlx", "X509");
  const std::string client = fmt::format("{}/client-{}", tempDir(), database.name());
  makeCertificate(tlsDir() + "/ca.pem", tlsDir() + "/ca-key.pem", client, "");
  auto without = account.connect("ssl-mode=REQUIRED");
  BOOST_REQUIRE(!without.isOk());
  BOOST_TEST(without.status().message().find("mysql error 1045") != std::string::npos, without.status().message());
  auto with = account.connect(fmt::format("ssl-mode=VERIFY_IDENTITY&ssl-ca={0}/ca.pem&ssl-cert={1}.pem&ssl-key={1}-key.pem",
                                          tlsDir(), client));
  BOOST_REQUIRE_MESSAGE(with.isOk(), with.status().message());
  BOOST_TEST(!cipherOf(**with).empty());
}

// The whole bridge over a verified TLS connection, as an account that cannot connect otherwise
// and holds only the README's grants: relay, snapshot, prune (migrate runs as a deploy account
// would). No log line carries the password.
BOOST_AUTO_TEST_CASE(the_bridge_works_through_verify_identity_with_the_least_privileges) {
  TestDatabase database("mytlsbr");
  const std::string name = uniqueName("tlsb", database);
  SourceSpec deploy{name, &database, {}};
  migrate(writeConfig({deploy}));
  TlsAccount account(database, "tlb", "SSL", deploy.outboxTable());
  SourceSpec source{name, &database,
                    {{"dsn", fmt::format("\"{}\"", account.dsn("ssl-mode=VERIFY_IDENTITY&ssl-ca=" + tlsDir() + "/ca.pem"))},
                     {"password", fmt::format("\"{}\"", account.password)},
                     {"snapshot_query", fmt::format("\"SELECT id, op FROM {}_control_outbox\"", name)}}};
  std::string config = writeConfig({source});
  insertRows(database.sql(), source.outboxTable(), 50);
  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 50; }, 20s), bridge.log());
  BOOST_TEST(bridge.log().find("cannot read the replication status") == std::string::npos, bridge.log());
  // The binlog doorbell too, over the same verified TLS (issue 20).
  BOOST_TEST(waitUntil([&] { return bridge.log().find("watching the binary log") != std::string::npos; }, 10s),
             bridge.log());
  auto snapshot = httpRequest(bridge.httpPort(), "GET", "/v1/sources/" + source.name + "/control-snapshot");
  BOOST_TEST(snapshot.status == 200);
  BOOST_TEST(snapshot.body.find("\"recordCount\":50") != std::string::npos, snapshot.body.substr(0, 300));
  BOOST_TEST(bridge.stop() == 0);
  // Prune, as the same account: rows older than --keep and published go.
  allowOutboxUpdates(database, source.outboxTable());
  BOOST_REQUIRE(database.sql().exec(fmt::format("UPDATE {} SET created_at = NOW(6) - INTERVAL 2 HOUR",
                                                source.outboxTable())).isOk());
  auto pruned = runBridge({"prune", "--config", config});
  BOOST_TEST(pruned.exitCode == 0, pruned.err);
  BOOST_TEST(database.scalar("SELECT COUNT(*) FROM " + source.outboxTable()) == 0u, pruned.out << pruned.err);
  BOOST_TEST(bridge.log().find(account.password) == std::string::npos);
  BOOST_TEST(pruned.err.find(account.password) == std::string::npos);
  BOOST_TEST(bridge.log().find("ssl-mode=VERIFY_IDENTITY") != std::string::npos, bridge.log());  // the masked DSN
}

// Issue 19: SLAVE MONITOR lets the bridge see a promoted replica's stopped applier; a server
// without replication works without it, and the bridge says once what to grant.
BOOST_AUTO_TEST_CASE(the_bridge_works_without_slave_monitor_and_says_once_what_to_grant) {
  TestDatabase database("mytlsnm");
  const std::string name = uniqueName("tlsn", database);
  SourceSpec deploy{name, &database, {}};
  migrate(writeConfig({deploy}));
  TlsAccount account(database, "tln", "SSL", deploy.outboxTable(), /*slaveMonitor=*/false);
  SourceSpec source{name, &database,
                    {{"dsn", fmt::format("\"{}\"", account.dsn("ssl-mode=VERIFY_IDENTITY&ssl-ca=" + tlsDir() + "/ca.pem"))},
                     {"password", fmt::format("\"{}\"", account.password)}}};
  BridgeProcess bridge(writeConfig({source}));
  bridge.start();
  insertRows(database.sql(), source.outboxTable(), 20);
  auto open = database.connect();  // a hole the bridge probes: an id rolled back
  BOOST_REQUIRE(open->begin().isOk());
  BOOST_REQUIRE(open->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op) VALUES ('item', 'x', 'upsert')",
                                       source.outboxTable())).isOk());
  insertRows(database.sql(), source.outboxTable(), 30, 20);
  open->rollback();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 50; }, 20s), bridge.log());
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).scanFloor >= 51u; }, 20s), bridge.log());
  const std::string log = bridge.log();
  const auto first = log.find("GRANT SLAVE MONITOR ON *.*");
  BOOST_TEST(first != std::string::npos, log);
  BOOST_TEST(log.find("GRANT SLAVE MONITOR ON *.*", first + 1) == std::string::npos, log);
  BOOST_TEST(bridge.stop() == 0);
}

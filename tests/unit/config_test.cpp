#define BOOST_TEST_MODULE config
// The config file's keys: the defaults, DSNs, identifiers, NATS and HTTP security keys, and bad
// values naming their key. What loading adds (the environment, secrets from files, durations,
// subject templates) is in config_load_test.cpp; the helpers in config_parse.h.
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <fstream>

#include "config/config.h"
#include "config_parse.h"

using namespace outbox;
using namespace outbox::test;

BOOST_AUTO_TEST_CASE(defaults_follow_the_contract) {
  Config c = parseConfig(kMinimal, {}, "test.toml");
  BOOST_REQUIRE_EQUAL(c.sources.size(), 1u);
  const auto& s = c.sources[0];
  BOOST_TEST(s.outboxTable == "account_control_outbox");
  BOOST_TEST(s.stream == "CONTROL_ACCOUNT");
  BOOST_TEST(s.subjectPrefix == "control.account");
  BOOST_TEST(s.batchSize == 1000);
  BOOST_TEST(s.pollInterval.count() == 250);
  BOOST_TEST(s.duplicateWindow.count() == 120'000);
  BOOST_TEST(s.replicas == 1);
  BOOST_TEST(s.maxAge.count() == 0);
  BOOST_TEST((s.onPoison == OnPoison::kHalt));
  BOOST_TEST((s.wake == Wake::kAuto));
  BOOST_TEST(c.http.listen == "127.0.0.1:8080");
  BOOST_TEST(c.lease.ttl.count() == 30'000);
  BOOST_TEST(c.lease.heartbeat.count() == 10'000);
  BOOST_TEST(c.nats.pingInterval.count() == 5'000);
  BOOST_TEST(s.dsn.user == "bridge");
  BOOST_TEST(s.dsn.password == "s3cret");
  BOOST_TEST(s.dsn.host == "db.internal");
  BOOST_TEST(s.dsn.port == 3307u);
  BOOST_TEST(s.dsn.database == "app");
}

BOOST_AUTO_TEST_CASE(dsn_forms) {
  Dsn d = Dsn::parse("k", "mysql://u@localhost/db?socket=/run/mysqld/mysqld.sock");
  BOOST_TEST(d.user == "u");
  BOOST_TEST(d.password.empty());
  BOOST_TEST(d.port == 3306u);
  BOOST_TEST(d.socket == "/run/mysqld/mysqld.sock");
  Dsn e = Dsn::parse("k", "mysql://u%40x:p%3Aw%40d@h:1/db");
  BOOST_TEST(e.user == "u@x");
  BOOST_TEST(e.password == "p:w@d");
  BOOST_TEST(e.masked() == "mysql://u@x:****@h:1/db");
  BOOST_TEST(e.masked().find("p:w@d") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(dsn_tls_parameters_and_ipv6_hosts) {
  // TLS when the server offers it, by default over TCP; a local socket needs none.
  BOOST_TEST((Dsn::parse("k", "mysql://u@h/db").sslMode == SslMode::kPreferred));
  BOOST_TEST((Dsn::parse("k", "mysql://u@localhost/db?socket=/s").sslMode == SslMode::kDisabled));
  Dsn v = Dsn::parse("k", "mysql://u:pw@db.internal/app?ssl-mode=verify_identity&ssl-ca=/etc/ca%20s.pem"
                          "&ssl-cert=/c.pem&ssl-key=/k.pem");
  BOOST_TEST((v.sslMode == SslMode::kVerifyIdentity));
  BOOST_TEST(v.sslCa == "/etc/ca s.pem");
  BOOST_TEST(v.sslCert == "/c.pem");
  BOOST_TEST(v.sslKey == "/k.pem");
  BOOST_TEST(v.masked() == "mysql://u:****@db.internal:3306/app?ssl-mode=VERIFY_IDENTITY&ssl-ca=/etc/ca s.pem"
                           "&ssl-cert=/c.pem&ssl-key=/k.pem");
  // A CA given means a certificate to check; a client certificate means TLS.
  BOOST_TEST((Dsn::parse("k", "mysql://u@h/db?ssl-ca=/ca.pem").sslMode == SslMode::kVerifyCa));
  BOOST_TEST(Dsn::parse("k", "mysql://u@h/db?ssl-ca=/ca.pem").masked() == "mysql://u@h:3306/db?ssl-ca=/ca.pem");
  BOOST_TEST((Dsn::parse("k", "mysql://u@h/db?ssl-cert=/c.pem&ssl-key=/k.pem").sslMode == SslMode::kRequired));
  for (const char* mode : {"DISABLED", "PREFERRED", "REQUIRED"}) {
    BOOST_TEST(sslModeName(Dsn::parse("k", std::string("mysql://u@h/db?ssl-mode=") + mode).sslMode) == std::string(mode));
  }
  Dsn six = Dsn::parse("k", "mysql://u@[::1]:3307/db");
  BOOST_TEST(six.host == "::1");
  BOOST_TEST(six.port == 3307u);
  BOOST_TEST(six.masked() == "mysql://u@[::1]:3307/db");
}

BOOST_AUTO_TEST_CASE(dsn_errors_name_the_problem) {
  auto reason = [](const std::string& dsn) {
    try {
      Dsn::parse("source.a.dsn", dsn);
    } catch (const ConfigError& e) {
      BOOST_TEST(e.key() == "source.a.dsn");
      return e.reason();
    }
    return std::string();
  };
  BOOST_TEST(reason("postgres://u@h/db").find("must start with mysql://") != std::string::npos);
  BOOST_TEST(reason("mysql://h/db").find("no USER@") != std::string::npos);
  BOOST_TEST(reason("mysql://u@h").find("no /DATABASE") != std::string::npos);
  BOOST_TEST(reason("mysql://u@h:99999/db").find("bad port") != std::string::npos);
  BOOST_TEST(reason("mysql://u@h:x/db").find("bad port") != std::string::npos);
  BOOST_TEST(reason("mysql://u@h/db;drop").find("database") != std::string::npos);
  BOOST_TEST(reason("mysql://u@h/db?ssl=1").find("unknown DSN parameter 'ssl'") != std::string::npos);
  BOOST_TEST(reason("mysql://u@h/db?sslmode=require").find("known: socket, ssl-mode, ssl-ca") != std::string::npos);
  BOOST_TEST(reason("mysql://u@h/db?ssl-mode=ON").find("ssl-mode 'ON' is not one of DISABLED") != std::string::npos);
  BOOST_TEST(reason("mysql://u@h/db?ssl-mode=VERIFY_CA").find("needs ssl-ca") != std::string::npos);
  BOOST_TEST(reason("mysql://u@h/db?ssl-mode=DISABLED&ssl-ca=/ca.pem").find("ssl-mode is DISABLED") != std::string::npos);
  BOOST_TEST(reason("mysql://u@h/db?ssl-cert=/c.pem").find("go together") != std::string::npos);
  BOOST_TEST(reason("mysql://u@db.internal/db?socket=/run/mysqld.sock").find("needs the host localhost") !=
             std::string::npos);
  BOOST_TEST(reason("mysql://u@h/db?ssl-mode=PREFERRED&ssl-ca=/ca.pem").find("falls back to plain text") !=
             std::string::npos);
  BOOST_TEST(reason("mysql://u@h/db?ssl-ca=").find("'ssl-ca' has no value") != std::string::npos);
  BOOST_TEST(reason("mysql://u@::1/db").find("in brackets") != std::string::npos);
  BOOST_TEST(reason("mysql://u@[::1/db").find("closing ']'") != std::string::npos);
  BOOST_TEST(reason("mysql://u@[::1]x/db").find("after the IPv6 host") != std::string::npos);
  BOOST_TEST(reason("mysql://u:%zz@h/db").find("%-escape") != std::string::npos);
  BOOST_TEST(reason("mysql://@h/db").find("user is empty") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(identifiers) {
  BOOST_TEST(isSqlIdentifier("account_control_outbox"));
  BOOST_TEST(isSqlIdentifier("_x9"));
  BOOST_TEST(isSqlIdentifier(std::string(64, 'a')));
  BOOST_TEST(!isSqlIdentifier(std::string(65, 'a')));
  BOOST_TEST(!isSqlIdentifier(""));
  BOOST_TEST(!isSqlIdentifier("9abc"));
  BOOST_TEST(!isSqlIdentifier("a-b"));
  BOOST_TEST(!isSqlIdentifier("a`; DROP TABLE x; --"));
  BOOST_TEST(!isSqlIdentifier("tablé"));
  BOOST_TEST(isSubjectToken("account"));
  BOOST_TEST(!isSubjectToken("a.b"));
  BOOST_TEST(!isSubjectToken("a b"));
  BOOST_TEST(!isSubjectToken("*"));
  BOOST_TEST(!isSubjectToken(">"));
  BOOST_TEST(!isSubjectToken(""));
}

// Issue 10: NATS over TLS, with creds, an nkey, or a cluster's URLs; HTTPS and a metrics listener.
BOOST_AUTO_TEST_CASE(nats_and_http_security_keys) {
  const std::string readable = "config_test_readable.pem";
  std::ofstream(readable) << "x\n";
  Config c = parseConfig("[nats]\nurl = \"tls://a:4222,tls://b:4222\"\nnkey_seed_file = \"" + readable +
                             "\"\ntls_ca = \"" + readable + "\"\ntls_server_name = \"nats.internal\"\njs_domain = \"hub\"\n"
                             "[http]\nmetrics_listen = \"0.0.0.0:9090\"\n" + kMinimal,
                         {}, "test.toml");
  BOOST_TEST(c.nats.url == "tls://a:4222,tls://b:4222");
  BOOST_TEST(c.nats.nkeySeedFile == readable);
  BOOST_TEST(c.nats.tlsServerName == "nats.internal");
  BOOST_TEST(c.nats.jsDomain == "hub");
  BOOST_TEST(c.http.metricsListen == "0.0.0.0:9090");
  Config fromEnv = parseConfig(kMinimal, {{"OUTBOX_BRIDGE_NATS_CREDS_FILE", readable}}, "test.toml");
  BOOST_TEST(fromEnv.nats.credsFile == readable);
  auto nats = [&](const std::string& keys) { return errorKey("[nats]\n" + keys + std::string(kMinimal)); };
  BOOST_TEST(nats("url = \"nats://a:4222,http://b\"\n") == "nats.url");
  BOOST_TEST(nats("url = \"nats://bridge:pw@a:4222\"\n") == "nats.url");  // would be shown wherever the URL is
  BOOST_TEST(errorKey(std::string(kMinimal).replace(std::string(kMinimal).find("/app"), 4, "/app?ssl-ca=/nonexistent.pem")) ==
             "source.account.dsn");
  BOOST_TEST(nats("creds_file = \"/nonexistent/user.creds\"\n") == "nats.creds_file");
  BOOST_TEST(nats("tls_cert = \"" + readable + "\"\n") == "nats.tls_key");
  BOOST_TEST(nats("user = \"u\"\ntoken = \"t\"\n") == "nats");
  BOOST_TEST(nats("token = \"t\"\nnkey_seed_file = \"" + readable + "\"\n") == "nats");
  BOOST_TEST(errorKey("[http]\ntls_key = \"" + readable + "\"\n" + kMinimal) == "http.tls_cert");
  BOOST_TEST(errorKey(std::string("[http]\nmetrics_listen = \"9090\"\n") + kMinimal) == "http.metrics_listen");
  std::remove(readable.c_str());
}

BOOST_AUTO_TEST_CASE(bad_values_name_their_key) {
  BOOST_TEST(errorKey(std::string(kMinimal) + "outbox_table = \"x; drop\"\n") == "source.account.outbox_table");
  // `<outbox_table>_versions` must fit in 64 characters.
  BOOST_TEST(errorKey(std::string(kMinimal) + "outbox_table = \"" + std::string(56, 'o') + "\"\n") ==
             "source.account.outbox_table");
  BOOST_TEST(errorKey(std::string(kMinimal) + "outbox_table = \"" + std::string(55, 'o') + "\"\n").empty());
  BOOST_TEST(errorKey(std::string(kMinimal) + "batch_size = 0\n") == "source.account.batch_size");
  BOOST_TEST(errorKey(std::string(kMinimal) + "batch_size = \"ten\"\n") == "source.account.batch_size");
  BOOST_TEST(errorKey(std::string(kMinimal) + "poll_interval = \"fast\"\n") == "source.account.poll_interval");
  BOOST_TEST(errorKey(std::string(kMinimal) + "on_poison = \"drop\"\n") == "source.account.on_poison");
  BOOST_TEST(errorKey(std::string(kMinimal) + "wake = \"binlogs\"\n") == "source.account.wake");
  BOOST_TEST(errorKey(std::string(kMinimal) + "wake = \"poll\"\n").empty());
  BOOST_TEST(errorKey(std::string(kMinimal) + "stream = \"a.b\"\n") == "source.account.stream");
  BOOST_TEST(errorKey(std::string(kMinimal) + "subject_prefix = \"a.*\"\n") == "source.account.subject_prefix");
  BOOST_TEST(errorKey(std::string(kMinimal) + "snapshot_path = \"nope\"\n") == "source.account.snapshot_path");
  BOOST_TEST(errorKey(std::string(kMinimal) + "colour = \"blue\"\n") == "source.account.colour");
  BOOST_TEST(errorKey(std::string(kMinimal) + "[nats]\nurl = \"http://x\"\n") == "nats.url");
  BOOST_TEST(errorKey(std::string(kMinimal) + "[nats]\nurls = \"nats://x\"\n") == "nats.urls");
  BOOST_TEST(errorKey(std::string(kMinimal) + "[nats]\nping_interval = \"10ms\"\n") == "nats.ping_interval");
  BOOST_TEST(errorKey(std::string(kMinimal) + "[nats]\nping_interval = \"2s\"\n").empty());
  BOOST_TEST(errorKey(std::string(kMinimal) + "[lease]\nttl = \"10s\"\nheartbeat = \"10s\"\n") == "lease.ttl");
  BOOST_TEST(errorKey(std::string(kMinimal) + "[log]\nlevel = \"loud\"\n") == "log.level");
  BOOST_TEST(errorKey(std::string(kMinimal) + "[database]\nmax_connections = 1\n") == "database.max_connections");
  BOOST_TEST(errorKey(std::string(kMinimal) + "[database]\nmax_connections = 10001\n") == "database.max_connections");
  BOOST_TEST(errorKey(std::string(kMinimal) + "[database]\nmax_connections = \"8\"\n") == "database.max_connections");
  BOOST_TEST(errorKey(std::string(kMinimal) + "[database]\nconnections = 8\n") == "database.connections");
  BOOST_TEST(errorKey(std::string(kMinimal) + "[database]\nmax_connections = 2\n").empty());
  BOOST_TEST(errorKey(std::string(kMinimal) + "[extra]\n") == "extra");
  BOOST_TEST(errorKey("[[source]]\ndsn = \"mysql://u@h/db\"\n") == "source[0].name");
  BOOST_TEST(errorKey("[[source]]\nname = \"a b\"\ndsn = \"mysql://u@h/db\"\n") == "source[0].name");
  BOOST_TEST(errorKey("[[source]]\nname = \"a\"\n") == "source.a.dsn");
  BOOST_TEST(errorKey("") == "source");
  BOOST_TEST(errorKey(std::string(kMinimal) + kMinimal) == "source.account");
  BOOST_TEST(errorText("[[source]\n").find("TOML syntax error at line 1") != std::string::npos);
  BOOST_TEST(errorText(std::string(kMinimal) + "batch_size = 0\n").find("between 1 and") != std::string::npos);
}

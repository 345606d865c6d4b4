// The conformance suite over TLS with client certificates: the consumer reaches a nats-server of
// this test's own that verifies clients (--nats-ca, --nats-cert, --nats-key) and its inbox as an
// account that REQUIRE X509 (--inbox ...?ssl-mode=VERIFY_IDENTITY&ssl-ca&ssl-cert&ssl-key), the
// password by OUTBOX_REPLICA_INBOX_PASSWORD; the bridge publishes there over TLS too.
#include "conformance.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;
namespace data = boost::unit_test::data;

// (Not in an anonymous namespace: the data test cases are templates that use them.)
// A JetStream nats-server on a free loopback port that requires TLS with a client certificate
// signed by <base>-ca.pem (tests/integration/nats_tls_test.cpp's, without the nkey).
struct VerifyingNats {
  std::string base;
  int port = freeLoopbackPort();
  int monitorPort = freeLoopbackPort();
  Subprocess process;

  explicit VerifyingNats(const std::string& certBase) : base(certBase) {
    makeCa(base);
    makeCertificate(base + "-ca.pem", base + "-ca-key.pem", base + "-server", "IP:127.0.0.1");
    makeCertificate(base + "-ca.pem", base + "-ca-key.pem", base + "-client", "");
    const std::string conf = base + "-nats.conf";
    std::ofstream(conf) << fmt::format(R"(listen: 127.0.0.1:{0}
http: 127.0.0.1:{1}
jetstream {{ store_dir: "{2}-js" }}
tls {{
  cert_file: "{2}-server.pem"
  key_file: "{2}-server-key.pem"
  ca_file: "{2}-ca.pem"
  verify: true
  timeout: 2
}}
)",
                                       port, monitorPort, base);
    // Debian installs it in /usr/sbin, which a user's PATH may lack (tools/stack adds it).
    const std::string binary = ::access("/usr/sbin/nats-server", X_OK) == 0 ? "/usr/sbin/nats-server" : "nats-server";
    BOOST_REQUIRE(process.start({binary, "-c", conf}, base + "-nats.log"));
    BOOST_REQUIRE_MESSAGE(
        waitUntil([&] { return httpRequest(monitorPort, "GET", "/healthz?js-enabled-only=true").status == 200; }, 20s),
        "nats-server did not come up: " << readFile(base + "-nats.log"));
  }
  ~VerifyingNats() { process.terminate(std::chrono::seconds(5)); }
  std::string url() const { return fmt::format("tls://127.0.0.1:{}", port); }
  std::string bridgeToml() const {
    return fmt::format("[nats]\nurl = \"{0}\"\ntls_ca = \"{1}-ca.pem\"\ntls_cert = \"{1}-client.pem\"\ntls_key = "
                       "\"{1}-client-key.pem\"\nack_timeout = \"2s\"\n",
                       url(), base);
  }
};

// An account of the inbox's database that must come over TLS with a certificate the stack's CA
// signed; dropped at the end.
struct X509Account {
  TestDatabase& database;
  std::string user;
  std::string password = "inbox-x509-9d2f";
  std::string cert;
  X509Account(TestDatabase& db, const std::string& certBase) : database(db), user(uniqueName("ix", db)), cert(certBase) {
    registerSecret(password);
    const std::string tls = stack().stackDir + "/tls";
    makeCertificate(tls + "/ca.pem", tls + "/ca-key.pem", cert, "");
    for (const std::string& sql :
         {fmt::format("CREATE USER '{}'@'127.0.0.1' IDENTIFIED BY '{}' REQUIRE X509", user, password),
          fmt::format("GRANT ALL ON `{}`.* TO '{}'@'127.0.0.1'", db.name(), user)}) {
      Status s = db.sql().exec(sql);
      BOOST_REQUIRE_MESSAGE(s.isOk(), s.message());
    }
  }
  ~X509Account() { (void)database.sql().exec(fmt::format("DROP USER IF EXISTS '{}'@'127.0.0.1'", user)); }
  std::string dsn() const {
    const std::string tls = stack().stackDir + "/tls";
    return fmt::format("mysql://{0}@127.0.0.1:{1}/{2}?ssl-mode=VERIFY_IDENTITY&ssl-ca={3}/ca.pem&ssl-cert={4}.pem&"
                       "ssl-key={4}-key.pem",
                       user, stack().mysqlPort, database.name(), tls, cert);
  }
};

BOOST_DATA_TEST_CASE(tls_with_client_certificates_to_nats_server_and_the_inbox, data::make(consumerNames()), consumer) {
  TestDatabase scratch("cftls");  // names the certificates' files
  const std::string base = fmt::format("{}/conformance-tls-{}", tempDir(), scratch.name());
  VerifyingNats nats(base);
  AccountsSource src("cftls", nats.bridgeToml());
  InboxDatabase inbox;
  X509Account account(inbox.database, base + "-inbox");
  BridgeProcess bridge(src.config);
  int port = src.seedAndStart(bridge, 20);
  ConsumerRun run(consumer, src, port, account.dsn(),
                  {"--nats-ca", base + "-ca.pem", "--nats-cert", base + "-client.pem", "--nats-key",
                   base + "-client-key.pem"},
                  nats.url());
  ::setenv("OUTBOX_REPLICA_INBOX_PASSWORD", account.password.c_str(), 1);
  run.start();
  BOOST_REQUIRE_MESSAGE(run.saysWithin("] verified at version 20:", 30s), run.allText());
  auto conn = src.database.connect();
  for (uint64_t i = 1; i <= 5; ++i) src.change(*conn, i, fmt::format("Over TLS {}", i));
  src.change(*conn, 6, std::nullopt, true);
  uint64_t final = requireAllPublished(src, bridge);
  requireConverged(run, src, final);
  // What it keeps went over the X509 account: the inbox row is there, at the last version.
  BOOST_TEST(inbox.database.scalar(fmt::format("SELECT applied_version FROM outbox_inbox WHERE source = '{}'",
                                               src.spec.name)) == final);
  BOOST_TEST(run.allText().find(account.password) == std::string::npos);
  BOOST_TEST(bridge.stop() == 0);
}

#define BOOST_TEST_MODULE nats_tls
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <ctime>
#include <fstream>

#include <fmt/format.h>

#include "harness.h"
#include "nats/jetstream.h"
#include "nats/nkey.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

// The bridge against a nats-server of this test's own that wants TLS with a client certificate
// (verify) and a user nkey: certificates made by openssl, the key pair by nats/nkey.

namespace {

// <base>-<name>.pem and -<name>-key.pem, signed by <base>-ca.pem, for 127.0.0.1 and nats.internal.
void makeCertificate(const std::string& base, const std::string& name) {
  test::makeCertificate(base + "-ca.pem", base + "-ca-key.pem", base + "-" + name, "IP:127.0.0.1,DNS:nats.internal");
}

// A JetStream nats-server on a free loopback port that requires TLS with a client certificate
// signed by the test's CA, and the user nkey `publicKey`.
struct SecureNats {
  std::string base;
  int port = freeLoopbackPort();
  int monitorPort = freeLoopbackPort();
  Subprocess process;

  SecureNats(const std::string& certBase, const std::string& publicKey) : base(certBase) {
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
authorization {{ users: [ {{ nkey: "{3}" }} ] }}
)",
                                       port, monitorPort, base, publicKey);
    // Debian installs it in /usr/sbin, which a user's PATH may lack (tools/stack adds it).
    const std::string binary = ::access("/usr/sbin/nats-server", X_OK) == 0 ? "/usr/sbin/nats-server" : "nats-server";
    if (!process.start({binary, "-c", conf}, base + "-nats.log")) throw std::runtime_error("nats-server did not start");
    if (!waitUntil([&] { return httpRequest(monitorPort, "GET", "/healthz?js-enabled-only=true").status == 200; }, 20s)) {
      throw std::runtime_error("nats-server did not come up: " + readFile(base + "-nats.log"));
    }
  }
  ~SecureNats() { process.terminate(std::chrono::seconds(5)); }
  std::string url() const { return fmt::format("tls://127.0.0.1:{}", port); }
};

}  // namespace

namespace {

struct Fixture {
  TestDatabase database{"natstls"};
  std::string base = fmt::format("{}/nats-{}", tempDir(), database.name());
  nats::UserNkey key = nats::newUserNkey().value();
  SourceSpec source{uniqueName("nt", database), &database,
                    {{"snapshot_query", fmt::format("\"SELECT id, op FROM {}_control_outbox\"", uniqueName("nt", database))}}};
  std::unique_ptr<SecureNats> server;

  Fixture() {
    makeCa(base);
    makeCertificate(base, "server");
    makeCertificate(base, "client");
    makeCa(base + "-other");
    writeSeed(base + "-user.nk", key.seed + "\r");  // as an editor on another system may save it
    writeSeed(base + "-stranger.nk", nats::newUserNkey().value().seed);
    server = std::make_unique<SecureNats>(base, key.publicKey);
  }
  static void writeSeed(const std::string& path, const std::string& seed) {
    registerSecret(seed);
    std::ofstream(path) << seed << "\n";
    ::chmod(path.c_str(), 0600);
  }
  // The [nats] section: `url` (the server's by default) and `keys`.
  std::string config(const std::string& keys, const std::string& url = "") {
    return writeConfig({source}, fmt::format("[nats]\nurl = \"{}\"\nconnect_timeout = \"2s\"\n{}\n",
                                             url.empty() ? server->url() : url, keys));
  }
  std::string goodKeys() const {
    return fmt::format("tls_ca = \"{0}-ca.pem\"\ntls_cert = \"{0}-client.pem\"\ntls_key = \"{0}-client-key.pem\"\n"
                       "nkey_seed_file = \"{0}-user.nk\"\n",
                       base);
  }
  NatsConfig clientOptions() const {
    return NatsConfig{.url = server->url(), .nkeySeedFile = base + "-user.nk", .tlsCa = base + "-ca.pem",
                                .tlsCert = base + "-client.pem", .tlsKey = base + "-client-key.pem"};
  }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(the_bridge_and_the_replica_go_through_tls_with_a_client_certificate_and_an_nkey, Fixture) {
  // A cluster's list, its first server down; the certificate checked for the name given.
  std::string cfg = config(goodKeys() + "tls_server_name = \"nats.internal\"\n",
                           fmt::format("tls://127.0.0.1:{},{}", freeLoopbackPort(), server->url()));
  migrate(cfg);
  insertRows(database.sql(), source.outboxTable(), 20);
  BridgeProcess bridge(cfg);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 20; }, 20s), bridge.log());
  // The stream, read back through the same settings.
  auto nc = nats::Connection::connect(clientOptions());
  BOOST_REQUIRE_MESSAGE(nc.isOk(), nc.status().message());
  auto js = nats::JetStream::create(**nc, 5s, 16);
  BOOST_REQUIRE(js.isOk());
  auto state = (*js)->streamState(source.stream());
  BOOST_REQUIRE(state.isOk());
  BOOST_TEST(state->lastSeq == 20u);
  // The replica, by its --nats-* flags.
  const std::string log = base + "-replica.log";
  Subprocess replica;
  replica.start({stack().bridgeBinary, "replica", "--url", fmt::format("http://127.0.0.1:{}", bridge.httpPort()), "--source",
                 source.name, "--nats", server->url(), "--nats-ca", base + "-ca.pem", "--nats-cert", base + "-client.pem",
                 "--nats-key", base + "-client-key.pem", "--nats-nkey-seed", base + "-user.nk", "--verify-interval", "0.1"},
                log);
  BOOST_TEST(waitUntil([&] { return readFile(log).find("verified at version 20: 20 records") != std::string::npos; }, 20s),
             readFile(log));
  BOOST_TEST(replica.terminate(std::chrono::seconds(10)).value_or(-1) == 0);
  BOOST_TEST(bridge.stop() == 0);
  BOOST_TEST(bridge.log().find(key.seed) == std::string::npos);
  BOOST_TEST(readFile(log).find(key.seed) == std::string::npos);
}

// A wrong CA, an nkey the server does not know, a server name its certificate lacks: `run` stops
// at once (exit 2) with an error that names the settings it used. No client certificate: the server drops the handshake, which could
// be a server going down too, so the bridge keeps trying, saying which settings to add. Nothing is
// published either way.
BOOST_FIXTURE_TEST_CASE(each_wrong_setting_fails_naming_it_and_publishes_nothing, Fixture) {
  const std::string goodCa = fmt::format("tls_ca = \"{}-ca.pem\"\n", base);
  const std::string client = fmt::format("tls_cert = \"{0}-client.pem\"\ntls_key = \"{0}-client-key.pem\"\n", base);
  const std::string nkey = fmt::format("nkey_seed_file = \"{}-user.nk\"\n", base);
  const struct {
    const char* what;
    std::string keys;
    std::string named;  // in the error
    int exitCode;       // 124: still trying when `timeout` stopped it
  } cases[] = {
      {"another CA", fmt::format("tls_ca = \"{}-other-ca.pem\"\n", base) + client + nkey, "tls_ca=" + base + "-other-ca.pem",
       2},
      {"no client certificate", goodCa + nkey, "set nats.tls_cert and nats.tls_key", 124},
      {"an unknown nkey", goodCa + client + fmt::format("nkey_seed_file = \"{}-stranger.nk\"\n", base),
       "nkey_seed_file=" + base + "-stranger.nk", 2},
      {"a name the certificate does not carry", goodCa + client + nkey + "tls_server_name = \"other.internal\"\n",
       "tls_server_name=other.internal", 2},
  };
  bool migrated = false;
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      std::string cfg = config(c.keys);
      if (!migrated) {
        migrate(cfg);
        insertRows(database.sql(), source.outboxTable(), 5);
        migrated = true;
      }
      auto run = runCommand(fmt::format("timeout {} {} run --config {}", c.exitCode == 2 ? 20 : 3, stack().bridgeBinary, cfg));
      BOOST_TEST(run.exitCode == c.exitCode, run.exitCode << ": " << run.err);
      BOOST_TEST(run.err.find("connect to nats-server at " + server->url()) != std::string::npos, run.err);
      BOOST_TEST(run.err.find(c.named) != std::string::npos, run.err);
      BOOST_TEST(run.err.find(key.seed) == std::string::npos);
      BOOST_TEST(database.state(source.name).publishedThrough == 0u);
    }
  }
}

// Decentralised auth: an operator, an account with JetStream, a user JWT signed by the account,
// all made here (nats/nkey signs), and the user's creds file as `nsc` writes it.
namespace {

std::string base64url(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (char& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return out;
}

// A JWT with `claims` (its "nats" object and names; jti, iat, iss, sub added) signed by `issuer`.
std::string jwt(const nats::UserNkey& issuer, nats::NkeyKind issuerKind, const std::string& subject,
                const std::string& name, const std::string& natsClaims) {
  const std::string header = R"({"typ":"JWT","alg":"ed25519-nkey"})";
  const std::string claims =
      fmt::format(R"({{"jti":"{}","iat":{},"iss":"{}","name":"{}","sub":"{}","nats":{}}})", nats::newUserNkey()->publicKey,
                  std::time(nullptr), issuer.publicKey, name, subject, natsClaims);
  const std::string signingInput = base64url(header) + "." + base64url(claims);
  auto signature = nats::nkeySign(issuer.seed, signingInput, issuerKind);
  if (!signature.isOk()) throw std::runtime_error(signature.status().message());
  return signingInput + "." + base64url(*signature);
}

std::string credsFile(const std::string& userJwt, const std::string& seed) {
  return fmt::format("-----BEGIN NATS USER JWT-----\n{}\n------END NATS USER JWT------\n\n"
                     "************************* IMPORTANT *************************\n"
                     "NKEY Seed printed below can be used to sign and prove identity.\n\n"
                     "-----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
                     userJwt, seed);
}

struct OperatorNats {
  std::string base;
  nats::UserNkey op = nats::newNkey(nats::NkeyKind::kOperator).value();
  nats::UserNkey account = nats::newNkey(nats::NkeyKind::kAccount).value();
  nats::UserNkey system = nats::newNkey(nats::NkeyKind::kAccount).value();  // JetStream needs one
  int port = freeLoopbackPort();
  int monitorPort = freeLoopbackPort();
  Subprocess process;

  explicit OperatorNats(const std::string& b) : base(b) {
    const std::string operatorJwt =
        jwt(op, nats::NkeyKind::kOperator, op.publicKey, "test-operator", R"({"type":"operator","version":2})");
    const std::string accountJwt = jwt(
        op, nats::NkeyKind::kOperator, account.publicKey, "test-account",
        R"({"limits":{"subs":-1,"data":-1,"payload":-1,"imports":-1,"exports":-1,"wildcards":true,"conn":-1,"leaf":-1,)"
        R"("mem_storage":-1,"disk_storage":-1,"streams":-1,"consumer":-1},"default_permissions":{"pub":{},"sub":{}},)"
        R"("type":"account","version":2})");
    const std::string systemJwt = jwt(op, nats::NkeyKind::kOperator, system.publicKey, "SYS",
                                      R"({"limits":{"subs":-1,"data":-1,"payload":-1,"imports":-1,"exports":-1,)"
                                      R"("wildcards":true,"conn":-1,"leaf":-1},"type":"account","version":2})");
    const std::string conf = base + "-operator.conf";
    std::ofstream(conf) << fmt::format(
        "listen: 127.0.0.1:{}\nhttp: 127.0.0.1:{}\noperator: \"{}\"\nsystem_account: {}\nresolver: MEMORY\n"
        "resolver_preload: {{\n  {}: \"{}\"\n  {}: \"{}\"\n}}\njetstream {{ store_dir: \"{}-opjs\" }}\n",
        port, monitorPort, operatorJwt, system.publicKey, account.publicKey, accountJwt, system.publicKey, systemJwt, base);
    const std::string binary = ::access("/usr/sbin/nats-server", X_OK) == 0 ? "/usr/sbin/nats-server" : "nats-server";
    if (!process.start({binary, "-c", conf}, base + "-operator.log")) throw std::runtime_error("nats-server did not start");
    if (!waitUntil([&] { return httpRequest(monitorPort, "GET", "/healthz?js-enabled-only=true").status == 200; }, 20s)) {
      throw std::runtime_error("nats-server did not come up: " + readFile(base + "-operator.log"));
    }
  }
  ~OperatorNats() { process.terminate(std::chrono::seconds(5)); }

  // A creds file for a new user of `signer` (the server's account, or one it does not know).
  std::string userCreds(const nats::UserNkey& signer, const std::string& name) {
    auto user = nats::newUserNkey().value();
    registerSecret(user.seed);
    const std::string userJwt = jwt(signer, nats::NkeyKind::kAccount, user.publicKey, name,
                                    R"({"pub":{},"sub":{},"subs":-1,"data":-1,"payload":-1,"type":"user","version":2})");
    const std::string path = base + "-" + name + ".creds";
    std::ofstream(path) << credsFile(userJwt, user.seed);
    ::chmod(path.c_str(), 0600);
    return path;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(the_bridge_logs_in_with_a_creds_file_of_an_operator_signed_account) {
  TestDatabase database("natsjwt");
  const std::string base = fmt::format("{}/jwt-{}", tempDir(), database.name());
  OperatorNats server(base);
  SourceSpec source{uniqueName("nj", database), &database, {}};
  auto config = [&](const std::string& creds) {
    return writeConfig({source}, fmt::format("[nats]\nurl = \"nats://127.0.0.1:{}\"\ncreds_file = \"{}\"\n", server.port, creds));
  };
  const std::string good = config(server.userCreds(server.account, "bridge"));
  migrate(good);
  insertRows(database.sql(), source.outboxTable(), 10);
  // A user signed by an account the server does not know: refused, exit 2 naming the file.
  auto stranger = nats::newNkey(nats::NkeyKind::kAccount).value();
  const std::string strangerCreds = server.userCreds(stranger, "stranger");
  auto refused = runCommand(fmt::format("timeout 20 {} run --config {}", stack().bridgeBinary, config(strangerCreds)));
  BOOST_TEST(refused.exitCode == 2, refused.exitCode << ": " << refused.err);
  BOOST_TEST(refused.err.find("creds_file=" + strangerCreds) != std::string::npos, refused.err);
  BOOST_TEST(database.state(source.name).publishedThrough == 0u);

  BridgeProcess bridge(good);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 10; }, 20s), bridge.log());
  BOOST_TEST(bridge.stop() == 0);
}

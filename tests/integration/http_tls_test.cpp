#define BOOST_TEST_MODULE http_tls
#include <boost/test/unit_test.hpp>

#include <fstream>

#include <fmt/format.h>

#include "harness.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

// HTTPS on http.listen (http.tls_cert, http.tls_key), /metrics, /healthz and /readyz on
// http.metrics_listen, and the admin API's token and log, with certificates this test makes.

namespace {

const std::string kToken = "adm1n-t0ken-5e9a";
const bool kNoted = (registerSecret(kToken), true);

// A CA and a certificate for 127.0.0.1 it signed: <base>-ca.pem (and -ca-key.pem), <base>-cert.pem,
// <base>-cert-key.pem.
std::string makeServerCertificate(const std::string& base) {
  makeCa(base);
  makeCertificate(base + "-ca.pem", base + "-ca-key.pem", base + "-cert", "IP:127.0.0.1");
  return base;
}

// curl's answer: the HTTP status, or 0 with curl's exit code in `curlExit` when it got none.
int curlStatus(const std::string& args, int* curlExit = nullptr) {
  auto r = runCommand("curl -s -o /dev/null -w '%{http_code}' --max-time 5 " + args);
  if (curlExit != nullptr) *curlExit = r.exitCode;
  return std::atoi(r.out.c_str());
}

}  // namespace

BOOST_AUTO_TEST_CASE(https_for_snapshots_and_admin_and_plain_http_for_metrics_on_their_own_address) {
  TestDatabase database("httptls");
  SourceSpec source{uniqueName("ht", database), &database,
                    {{"snapshot_query", fmt::format("\"SELECT id, op FROM {}_control_outbox\"", uniqueName("ht", database))}}};
  const std::string base = makeServerCertificate(fmt::format("{}/https-{}", tempDir(), database.name()));
  const int metricsPort = freeLoopbackPort();
  std::string config = writeConfig(
      {source}, fmt::format("[http]\nlisten = \"127.0.0.1:0\"\ntls_cert = \"{0}-cert.pem\"\ntls_key = \"{0}-cert-key.pem\"\n"
                            "metrics_listen = \"127.0.0.1:{1}\"\nadmin_token = \"{2}\"\n",
                            base, metricsPort, kToken));
  migrate(config);
  insertRows(database.sql(), source.outboxTable(), 5);
  BridgeProcess bridge(config);
  bridge.start();
  const int port = bridge.loggedPort("http: listening on https://");
  BOOST_TEST(bridge.loggedPort("http: /metrics, /healthz and /readyz on http://") == metricsPort);
  BOOST_REQUIRE(waitUntil([&] { return database.state(source.name).publishedThrough == 5; }, 20s));
  const std::string https = fmt::format("https://127.0.0.1:{}", port);
  const std::string ca = fmt::format("--cacert {}-ca.pem ", base);

  // The snapshot over HTTPS, verified against the test's CA; refused without it, and in plain text.
  BOOST_TEST(curlStatus(ca + https + "/v1/sources/" + source.name + "/control-snapshot") == 200);
  int curlExit = 0;
  BOOST_TEST(curlStatus(https + "/v1/sources/" + source.name + "/control-snapshot", &curlExit) == 0);
  BOOST_TEST(curlExit == 60);  // peer certificate cannot be authenticated with known CA certificates
  BOOST_TEST(curlStatus(fmt::format("http://127.0.0.1:{}/v1/sources/{}/control-snapshot", port, source.name)) != 200);

  // The admin API: its token, over HTTPS only; each call logged without the token.
  const std::string admin = https + "/v1/admin/sources";
  BOOST_TEST(curlStatus(ca + admin) == 401);
  BOOST_TEST(curlStatus(ca + "-H 'Authorization: Bearer wrong' " + admin) == 401);
  BOOST_TEST(curlStatus(ca + fmt::format("-H 'Authorization: Bearer {}' ", kToken) + admin) == 200);
  BOOST_TEST(curlStatus(ca + fmt::format("-X POST -H 'Authorization: Bearer {}' ", kToken) + admin + "/" + source.name +
                        "/pause") == 200);
  BOOST_TEST(waitUntil([&] {
    return bridge.log().find(fmt::format("admin POST /v1/admin/sources/{}/pause from 127.0.0.1: 200", source.name)) !=
           std::string::npos;
  }, 5s), bridge.log());
  BOOST_TEST(bridge.log().find("admin GET /v1/admin/sources from 127.0.0.1: 401") != std::string::npos);

  // Metrics and health on their own plain listener, and only there.
  const std::string plain = fmt::format("http://127.0.0.1:{}", metricsPort);
  for (const char* path : {"/metrics", "/healthz", "/readyz"}) {
    BOOST_TEST_CONTEXT(path) {
      BOOST_TEST(curlStatus(plain + path) == 200);
      BOOST_TEST(curlStatus(ca + https + path) == 404);
    }
  }
  BOOST_TEST(curlStatus(plain + "/v1/admin/sources") == 404);
  BOOST_TEST(curlStatus("-X POST " + plain + "/metrics") == 405);  // at once, as on the main listener
  BOOST_TEST(curlStatus(plain + "/v1/sources/" + source.name + "/control-snapshot") == 404);
  auto metrics = httpRequest(metricsPort, "GET", "/metrics");
  BOOST_TEST(metrics.body.find(fmt::format("outbox_published_rows_total{{source=\"{}\"}} 5", source.name)) !=
             std::string::npos);
  // The healthcheck command asks the metrics listener.
  auto health = runBridge({"healthcheck", "--config", config});
  BOOST_TEST(health.exitCode == 0, health.err);

  BOOST_TEST(bridge.stop() == 0);
  BOOST_TEST(bridge.log().find(kToken) == std::string::npos);
}

// The metrics address already taken: run exits 1 saying so (it used to hang, its HTTPS listener
// serving, with no relay running).
BOOST_AUTO_TEST_CASE(a_metrics_address_in_use_exits_1) {
  TestDatabase database("httpbusy");
  SourceSpec source{uniqueName("hm", database), &database, {}};
  const std::string taken = stack().natsUrl.substr(stack().natsUrl.rfind('/') + 1);  // nats-server's
  std::string config = writeConfig({source}, fmt::format("[http]\nlisten = \"127.0.0.1:0\"\nmetrics_listen = \"{}\"\n", taken));
  migrate(config);
  auto run = runCommand(fmt::format("timeout 20 {} run --config {}", stack().bridgeBinary, config));
  BOOST_TEST(run.exitCode == 1, run.exitCode << ": " << run.err);
  BOOST_TEST(run.err.find("cannot listen on " + taken) != std::string::npos, run.err);
}

BOOST_AUTO_TEST_CASE(a_certificate_that_cannot_be_loaded_exits_2_naming_the_keys) {
  TestDatabase database("httpbad");
  SourceSpec source{uniqueName("hb", database), &database, {}};
  const std::string base = makeServerCertificate(fmt::format("{}/httpsbad-{}", tempDir(), database.name()));
  // The CA's key does not belong to the server's certificate.
  std::string config = writeConfig(
      {source}, fmt::format("[http]\nlisten = \"127.0.0.1:0\"\ntls_cert = \"{0}-cert.pem\"\ntls_key = \"{0}-ca-key.pem\"\n",
                            base));
  migrate(config);
  auto run = runBridge({"run", "--config", config});
  BOOST_TEST(run.exitCode == 2);
  BOOST_TEST(run.err.find("http.tls_cert") != std::string::npos, run.err);
  // A missing file, and one key without the other, are config errors before anything starts.
  std::string missing = writeConfig(
      {source}, "[http]\nlisten = \"127.0.0.1:0\"\ntls_cert = \"/nonexistent/cert.pem\"\ntls_key = \"/nonexistent/key.pem\"\n");
  auto check = runBridge({"check-config", "--config", missing});
  BOOST_TEST(check.exitCode == 2);
  BOOST_TEST(check.err.find("http.tls_cert: cannot read '/nonexistent/cert.pem'") != std::string::npos, check.err);
  std::string half = writeConfig({source}, fmt::format("[http]\nlisten = \"127.0.0.1:0\"\ntls_cert = \"{}-cert.pem\"\n", base));
  auto halfCheck = runBridge({"check-config", "--config", half});
  BOOST_TEST(halfCheck.exitCode == 2);
  BOOST_TEST(halfCheck.err.find("http.tls_key: tls_cert and tls_key go together") != std::string::npos, halfCheck.err);
}

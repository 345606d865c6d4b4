// The snapshot endpoint's clients: HTTP errors answered as JSON, a slow reader that holds up no
// one, and the `replica` command line. Part of snapshot_integration (snapshot_test.cpp).
#include <boost/test/unit_test.hpp>

#include <httplib.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "accounts_source.h"
#include "harness.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_CASE(http_errors_are_json_with_the_right_status) {
  AccountsSource src("http");
  BridgeProcess bridge(src.config);
  bridge.start();
  int port = bridge.httpPort();
  auto unknown = httpRequest(port, "GET", "/v1/sources/nope/control-snapshot");
  BOOST_TEST(unknown.status == 404);
  BOOST_TEST(unknown.body == R"({"error":"unknown source 'nope'"})");
  auto route = httpRequest(port, "GET", "/v2/whatever");
  BOOST_TEST(route.status == 404);
  BOOST_TEST(route.body.find("\"error\"") != std::string::npos);
  for (const char* method : {"POST", "PUT", "DELETE"}) {
    auto r = httpRequest(port, method, "/v1/sources/" + src.spec.name + "/control-snapshot");
    BOOST_TEST(r.status == 405, method);
    BOOST_TEST(r.headers["Allow"] == "GET, HEAD");
    BOOST_TEST(r.body.find("\"error\"") != std::string::npos);
  }
  BOOST_TEST(httpRequest(port, "POST", "/metrics").status == 405);
  auto badParam = httpRequest(port, "GET", "/v1/sources/" + src.spec.name + "/control-snapshot?summary=maybe");
  BOOST_TEST(badParam.status == 400);
  BOOST_TEST(badParam.body == R"({"error":"summary must be true or false"})");
  // Oversized: a body past the limit, and a URI past httplib's.
  auto big = httpRequest(port, "POST", "/v1/sources/x/anything", std::string(100 * 1024, 'x'));
  BOOST_TEST(big.status == 413);
  BOOST_TEST(big.body.find("\"error\"") != std::string::npos);
  auto longUri = httpRequest(port, "GET", "/v1/sources/" + std::string(20000, 'a') + "/control-snapshot");
  BOOST_TEST(longUri.status == 414);
  // Nothing that went wrong leaks SQL or credentials.
  for (const auto& body : {unknown.body, route.body, badParam.body, big.body}) {
    BOOST_TEST(body.find("SELECT") == std::string::npos);
    BOOST_TEST(body.find(stack().mysqlPassword) == std::string::npos);
  }
  BOOST_TEST(httpRequest(port, "GET", "/healthz").body == R"({"status":"ok"})");
  // Ready once its NATS connection is up, which on a busy machine may come after the requests above.
  BOOST_TEST(waitUntil([&] { return httpRequest(port, "GET", "/readyz").body == R"({"status":"ready"})"; }, 20s),
             httpRequest(port, "GET", "/readyz").body);
  BOOST_TEST(bridge.stop() == 0);
}

// A client that asks for a big snapshot and never reads it must not hold up anyone else.
BOOST_AUTO_TEST_CASE(a_slow_client_does_not_block_other_requests) {
  AccountsSource src("slow");
  BOOST_REQUIRE(src.database.sql()
                    .exec("INSERT INTO accounts SELECT seq, CONCAT('account number ', seq, ' ', REPEAT('x', 100)) "
                          "FROM seq_1_to_100000")
                    .isOk());
  BridgeProcess bridge(src.config);
  bridge.start();
  int port = bridge.httpPort();
  std::vector<int> sockets;
  for (int i = 0; i < 3; ++i) {  // three stalled readers of a ~13 MB document
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    BOOST_REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    std::string request = "GET /v1/sources/" + src.spec.name + "/control-snapshot HTTP/1.1\r\nHost: x\r\n\r\n";
    BOOST_REQUIRE(write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
    sockets.push_back(fd);
  }
  std::this_thread::sleep_for(500ms);
  auto begin = std::chrono::steady_clock::now();
  BOOST_TEST(httpRequest(port, "GET", "/healthz").status == 200);
  BOOST_TEST(httpRequest(port, "GET", "/metrics").status == 200);
  auto summary = httpRequest(port, "GET", "/v1/sources/" + src.spec.name + "/control-snapshot?summary=true");
  BOOST_TEST(summary.status == 200);
  BOOST_TEST(summary.body.find("\"recordCount\":100000") != std::string::npos);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - begin);
  BOOST_TEST(took.count() < 5000);
  for (int fd : sockets) close(fd);
  BOOST_TEST(bridge.stop() == 0);
}

// The command-line consumer: bootstraps, follows, verifies, dumps the replica.
BOOST_AUTO_TEST_CASE(the_replica_command_prints_its_state_changes_and_dumps_the_replica) {
  AccountsSource src("cli");
  BridgeProcess bridge(src.config);
  int port = src.seedAndStart(bridge, 5);
  auto conn = src.database.connect();
  std::string dump = tempDir() + "/replica-" + src.spec.name + ".json";
  Subprocess replica;
  std::string log = tempDir() + "/replica-" + src.spec.name + ".log";
  replica.start({stack().bridgeBinary, "replica", "--url", fmt::format("http://127.0.0.1:{}", port), "--source",
                 src.spec.name, "--nats", stack().natsUrl, "--dump", dump, "--verify-interval", "0.1"},
                log);
  auto logText = [&] {
    std::ifstream in(log);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return logText().find("bootstrapped: epoch 1, watermark 5") != std::string::npos; }, 20s),
                        logText());
  for (uint64_t i = 6; i <= 8; ++i) src.change(*conn, i, fmt::format("Account {}", i));
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return logText().find("verified at version 8: 8 records") != std::string::npos; }, 20s),
                        logText());
  BOOST_TEST(replica.terminate(std::chrono::seconds(10)).value_or(-1) == 0);
  std::ifstream in(dump);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST(text.find(R"("appliedVersion":8)") != std::string::npos, text);
  BOOST_TEST(text.find(R"({"id":8,"displayName":"Account 8"})") != std::string::npos, text);
  BOOST_TEST(logText().find("stopped at version 8") != std::string::npos);
  BOOST_TEST(bridge.stop() == 0);
}

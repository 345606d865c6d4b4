// Issue 24 (10, 11): a connection nats-server closes is made again, and the HTTP listener opens
// before nats-server and the databases answer.
#define BOOST_TEST_MODULE start_and_renew
#include <boost/test/unit_test.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include "harness.h"

using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

int natsPort() { return std::stoi(stack().natsUrl.substr(stack().natsUrl.rfind(':') + 1)); }

// A TCP port on loopback that completes connections and never says a word (a database that
// accepts but never answers): the kernel's backlog accepts, nobody reads.
class SilentListener {
 public:
  SilentListener() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd_, 64) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("silent listener: cannot listen");
    }
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

}  // namespace

// Before: nats.c gave up a connection the server closed ("-ERR 'Maximum Control Line Exceeded'"),
// and the bridge logged nothing, never published again, and /readyz gave no reason.
BOOST_AUTO_TEST_CASE(a_connection_nats_server_closes_is_made_again_logged_and_shown) {
  TestDatabase database("natsclosed");
  SourceSpec source{uniqueName("ncl", database), &database, {}};
  TcpProxy proxy(natsPort());
  const std::string config =
      writeConfig({source}, fmt::format("[nats]\nurl = \"nats://127.0.0.1:{}\"\nack_timeout = \"2s\"\n"
                                        "connect_timeout = \"1s\"\n",
                                        proxy.port()));
  migrate(config);
  BridgeProcess bridge(config);
  bridge.start();
  const int port = bridge.httpPort();
  insertRows(database.sql(), source.outboxTable(), 5);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return sourceMetric(port, "outbox_published_rows_total", source.name) >= 5; }, 30s),
                        bridge.log());

  proxy.cut();  // the new connection waits until heal(): meanwhile /readyz says why
  proxy.closeClients("-ERR 'Maximum Control Line Exceeded'\r\n");
  HttpReply ready;
  BOOST_TEST(waitUntil([&] {
    ready = httpRequest(port, "GET", "/readyz");
    return ready.status == 503 && ready.body.find("closed the connection") != std::string::npos;
  }, 10s), "/readyz: " << ready.status << " " << ready.body << "\n" << bridge.log());
  BOOST_TEST(ready.body.find("Maximum Control Line Exceeded") != std::string::npos, ready.body);
  BOOST_TEST(metricSample(httpRequest(port, "GET", "/metrics").body, "outbox_nats_connected") == 0);
  BOOST_TEST(bridge.log().find("nats-server closed the connection") != std::string::npos, bridge.log());
  BOOST_TEST(httpRequest(port, "GET", "/healthz").status == 200);  // alive: it heals by itself

  proxy.heal();
  BOOST_TEST(waitUntil([&] { return httpRequest(port, "GET", "/readyz").status == 200; }, 20s), bridge.log());
  insertRows(database.sql(), source.outboxTable(), 5, 5);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return sourceMetric(port, "outbox_published_rows_total", source.name) >= 10; }, 60s),
                        "publishing did not resume\n" << bridge.log());
  requireDenseOnce(source, 10);
  BOOST_TEST(bridge.log().find("connected anew") != std::string::npos, bridge.log());
  BOOST_TEST(metricSample(httpRequest(port, "GET", "/metrics").body, "outbox_nats_reconnects_total") >= 1);
  BOOST_TEST(bridge.stop() == 0);
}

// Before: with nats-server out of reach the listener never opened (connection refused).
BOOST_AUTO_TEST_CASE(the_listener_answers_while_nats_server_is_out_of_reach) {
  TestDatabase database("listenfirst");
  SourceSpec source{uniqueName("lfn", database), &database, {}};
  const std::string config =
      writeConfig({source}, fmt::format("[nats]\nurl = \"nats://127.0.0.1:{}\"\n", freeLoopbackPort()));
  BridgeProcess bridge(config);
  bridge.start();
  const int port = bridge.httpPort(3s);
  BOOST_TEST(httpRequest(port, "GET", "/healthz").status == 200);
  HttpReply ready = httpRequest(port, "GET", "/readyz");
  BOOST_TEST(ready.status == 503);
  BOOST_TEST(ready.body.find("nats-server is not connected") != std::string::npos, ready.body);
  BOOST_TEST(bridge.stop() == 0);
}

// Before: each source whose database accepted and never answered held the listener back for the
// connect timeout (5 s each; two sources: 10 s).
BOOST_AUTO_TEST_CASE(the_listener_answers_while_databases_are_silent) {
  TestDatabase database("listensilent");
  SilentListener silent;
  const std::string dsn = fmt::format("\"mysql://outbox@127.0.0.1:{}/{}\"", silent.port(), database.name());
  SourceSpec first{uniqueName("ls1", database), &database, {{"dsn", dsn}}};
  SourceSpec second{uniqueName("ls2", database), &database, {{"dsn", dsn}}};
  BridgeProcess bridge(writeConfig({first, second}));
  bridge.start();
  const int port = bridge.httpPort(3s);
  BOOST_TEST(httpRequest(port, "GET", "/healthz").status == 200);
  // (A stop while the start still waits on a silent database exits 1 after 5 s: not this test's.)
  bridge.kill();
}

// The HTTP listeners under hostile clients (issue 38), what they log and how they frame: admin
// errors of any status logged once a period, transfer codings that do not end in chunked, HTTP/1.0
// clients, large headers and Host. Part of http_load (http_load_test.cpp); the bridges are in
// http_load.h.
#include <boost/test/unit_test.hpp>

#include <sys/socket.h>
#include <simdjson.h>
#include <unistd.h>

#include <fmt/format.h>

#include "harness.h"
#include "http_load.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// The head of the first answer in `bytes` (status line and headers).
std::string headOf(const std::string& bytes) { return bytes.substr(0, bytes.find("\r\n\r\n") + 2); }

size_t countOf(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

// Only 401/403 were rate-limited: 404/405/400/413/414 under /v1/admin/ were logged every time with
// their path (up to 8 KB), 500 pipelined requests adding 4 MB to the log in 0.13 s.
BOOST_AUTO_TEST_CASE(unauthenticated_admin_errors_of_any_status_are_logged_once_a_period_with_short_paths) {
  LoadBridge& bridge = allOnOneListener();
  const size_t logBefore = bridge.process->log().size();
  const std::string longName(7000, 'p');
  std::string pipelined;
  for (int i = 0; i < 250; ++i) {
    pipelined += fmt::format("GET /v1/admin/{}{} HTTP/1.1\r\nHost: x\r\n\r\n", longName, i);  // 404
    pipelined += fmt::format("DELETE /v1/admin/sources?{}{} HTTP/1.1\r\nHost: x\r\n\r\n", longName, i);  // 405
  }
  auto answers = statuses(roundTrip(bridge.port, pipelined, 3000ms));
  BOOST_TEST(answers.size() == 500u);
  BOOST_TEST(std::count(answers.begin(), answers.end(), 404) == 250);
  // Errors that close their connection: a URI too long, headers too large, a malformed request.
  for (int i = 0; i < 20; ++i) {
    BOOST_TEST(statuses(roundTrip(bridge.port, "GET /v1/admin/" + std::string(9000, 'u') + " HTTP/1.1\r\nHost: x\r\n\r\n")) ==
               std::vector<int>{414});
    BOOST_TEST(statuses(roundTrip(bridge.port, "GET /v1/admin/sources HTTP/1.1\r\nHost: x\r\nX: " +
                                                  std::string(17000, 'h') + "\r\n\r\n")) == std::vector<int>{413});
  }
  std::string added = bridge.process->log().substr(logBefore);
  BOOST_TEST_MESSAGE(fmt::format("540 unauthenticated admin errors added {} bytes, {} lines to the log", added.size(),
                                 countOf(added, "\n")));
  BOOST_TEST(countOf(added, "admin ") <= 3u, added.substr(0, 4000));
  BOOST_TEST(added.size() < 8 * 1024u);
  // An authenticated caller's errors are each logged, the path cut short.
  const std::string withToken = "admin GET /v1/admin/" + std::string(7000, 'q');
  for (int i = 0; i < 3; ++i) {
    auto r = httpRequest(bridge.port, "GET", withToken.substr(10), "", {{"Authorization", std::string("Bearer ") + kToken}});
    BOOST_TEST(r.status == 404);
  }
  const std::string logged = withToken.substr(0, 40);
  BOOST_REQUIRE(waitUntil([&] { return countOf(bridge.process->log().substr(logBefore), logged) == 3; }, 5s));
  added = bridge.process->log().substr(logBefore);
  for (size_t at = added.find("admin GET /v1/admin/"); at != std::string::npos; at = added.find("admin GET /v1/admin/", at + 1)) {
    BOOST_TEST(added.find('\n', at) - at < 400u, "a logged path is not cut short");
  }
}

// RFC 9112 6.1 and 6.3: a transfer coding other than a final chunked cannot be framed; the bytes
// after such a request were answered as a second request (405 then 200 on one connection).
BOOST_AUTO_TEST_CASE(a_transfer_coding_that_does_not_end_in_chunked_is_refused_and_closes) {
  LoadBridge& bridge = allOnOneListener();
  const std::string next = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const std::string coding : {"gzip", "identity", "chunked, gzip"}) {
    BOOST_TEST(statuses(roundTrip(bridge.port, "POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + coding +
                                                  "\r\n\r\n" + next)) == std::vector<int>{400},
               "Transfer-Encoding: " << coding);
    BOOST_TEST(statuses(roundTrip(bridge.port, fmt::format("POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: {}\r\n"
                                                          "Content-Length: {}\r\n\r\n{}{}",
                                                          coding, next.size(), next, next))) == std::vector<int>{400},
               "Transfer-Encoding: " << coding << " with Content-Length");
  }
  // Chunked in an HTTP/1.0 request is faulty framing too (6.1).
  BOOST_TEST(statuses(roundTrip(bridge.port, "POST /healthz HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + next)) ==
             std::vector<int>{400});
}

// An HTTP/1.0 client got a chunked snapshot it cannot read, and its keep-alive request no
// `Connection: keep-alive` back (so it waited 5 s for the close).
BOOST_AUTO_TEST_CASE(an_http_1_0_client_gets_a_body_ended_by_the_close_and_keep_alive_only_when_it_asks) {
  LoadBridge& bridge = allOnOneListener();
  auto begin = Clock::now();
  std::string answer = roundTrip(bridge.port, "GET " + bridge.snapshotPath() + " HTTP/1.0\r\n\r\n", 3000ms);
  auto took = Clock::now() - begin;
  BOOST_TEST(statuses(answer) == std::vector<int>{200});
  BOOST_TEST(headOf(answer).find("Transfer-Encoding") == std::string::npos, headOf(answer));
  BOOST_TEST(headOf(answer).find("Connection: close") != std::string::npos, headOf(answer));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string body = answer.substr(answer.find("\r\n\r\n") + 4);
  BOOST_REQUIRE_MESSAGE(parser.parse(body).get(doc) == simdjson::SUCCESS, "not a JSON document: " << body);
  BOOST_TEST(doc["recordCount"].get_uint64().value() == 3u);
  BOOST_TEST((took < 1000ms), "the body's end (the close) came after " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");

  // Keep-alive when asked: said in the answer, and a second request on the connection answered.
  int fd = connectTo(bridge.port);
  BOOST_REQUIRE(fd >= 0);
  sendAll(fd, "GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  char buf[4096];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  std::string first(buf, n > 0 ? size_t(n) : 0);
  BOOST_TEST(statuses(first) == std::vector<int>{200});
  BOOST_TEST(first.find("Connection: keep-alive") != std::string::npos, first);
  sendAll(fd, "GET /healthz HTTP/1.0\r\n\r\n");
  begin = Clock::now();
  std::string second = readAll(fd, 3000ms);
  ::close(fd);
  BOOST_TEST(statuses(second) == std::vector<int>{200});
  BOOST_TEST((Clock::now() - begin < 1000ms), "an HTTP/1.0 answer without keep-alive was not closed at once");
}

// A header block past 16 KiB got 414 URI Too Long (the status was chosen after the request line
// had been consumed); a missing or repeated Host was accepted (RFC 9112 3.2: a server MUST answer
// 400).
BOOST_AUTO_TEST_CASE(large_headers_get_413_and_a_missing_or_repeated_host_gets_400) {
  LoadBridge& bridge = allOnOneListener();
  BOOST_TEST(statuses(roundTrip(bridge.port, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(16 * 1024, 'b') +
                                                "\r\n\r\n")) == std::vector<int>{413});
  BOOST_TEST(statuses(roundTrip(bridge.port, "GET /" + std::string(9000, 'u') + " HTTP/1.1\r\nHost: x\r\n\r\n")) ==
             std::vector<int>{414});
  BOOST_TEST(statuses(roundTrip(bridge.port, "GET /healthz HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")) ==
             std::vector<int>{400});
  BOOST_TEST(statuses(roundTrip(bridge.port, "GET /healthz HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n")) ==
             std::vector<int>{400});
  // HTTP/1.0 has no Host to require.
  BOOST_TEST(statuses(roundTrip(bridge.port, "GET /healthz HTTP/1.0\r\n\r\n")) == std::vector<int>{200});
}

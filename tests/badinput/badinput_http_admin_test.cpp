// Issue 24, items 18-19: admin requests over HTTP that are cut short, forge a log line, are denied
// by the hundred or come pipelined, oversized or not UTF-8, against the bridge binary with the
// stack's MariaDB and nats-server. Part of the badinput executable; the bridge is in
// badinput_http.h.
#include <fmt/format.h>
#include <simdjson.h>

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <map>
#include <thread>

#include "badinput_http.h"
#include "harness.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

size_t countOf(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

// Item 18: a POST whose body was shorter than its Content-Length was acted on after the read
// timeout (a pause set, a quarantine written) while the client and the audit log got 400.
BOOST_AUTO_TEST_CASE(an_admin_post_cut_short_is_not_acted_on) {
  Bridge bridge;
  const std::string pause =
      fmt::format("POST {} HTTP/1.1\r\nHost: x\r\n{}Content-Length: 10\r\n\r\n{{}}",
                  bridge.admin("pause"), bridge.auth());
  BOOST_TEST(answersTo(bridge.port, pause, 8000ms) == std::vector<int>{408});
  BOOST_TEST(bridge.database.state(bridge.source.name).paused == false);

  auto paused = httpRequest(bridge.port, "POST", bridge.admin("pause"), "",
                            {{"Authorization", std::string("Bearer ") + kToken}});
  BOOST_REQUIRE_EQUAL(paused.status, 200);
  insertRows(bridge.database.sql(), bridge.source.outboxTable(), 1);
  const uint64_t id =
      bridge.database.scalar("SELECT MAX(id) FROM `" + bridge.source.outboxTable() + "`");
  const std::string body = fmt::format(R"({{"id":{},"reason":"cut short"}})", id);
  const std::string quarantine =
      fmt::format("POST {} HTTP/1.1\r\nHost: x\r\n{}Content-Length: {}\r\n\r\n{}",
                  bridge.admin("quarantine"), bridge.auth(), body.size() + 20, body);
  BOOST_TEST(answersTo(bridge.port, quarantine, 8000ms) == std::vector<int>{408});
  BOOST_TEST(bridge.database.scalar("SELECT COUNT(*) FROM outbox_quarantine") == 0u);
  // The audit log says what the client got (written off the I/O thread: awaited).
  const std::string audited = "admin POST " + bridge.admin("quarantine") + " from 127.0.0.1: 408";
  waitUntil([&] { return countOf(bridge.process.log(), audited) > 0; }, 10s);
  BOOST_TEST(countOf(bridge.process.log(), audited) == 1u, bridge.process.log());
}

// Item 19: a quarantine reason reached the log raw (a newline forged a line, NUL bytes made the
// log binary).
BOOST_AUTO_TEST_CASE(a_quarantine_reason_cannot_forge_a_log_line) {
  Bridge bridge;
  const std::map<std::string, std::string> auth{{"Authorization", std::string("Bearer ") + kToken}};
  BOOST_REQUIRE_EQUAL(httpRequest(bridge.port, "POST", bridge.admin("pause"), "", auth).status,
                      200);
  insertRows(bridge.database.sql(), bridge.source.outboxTable(), 1);
  const uint64_t id =
      bridge.database.scalar("SELECT MAX(id) FROM `" + bridge.source.outboxTable() + "`");
  const std::string forged = "2030-01-01T00:00:00.000Z INFO  admin POST /forged from 10.9.9.9: 200";
  auto q = httpRequest(bridge.port, "POST", bridge.admin("quarantine"),
                       fmt::format(R"({{"id":{},"reason":"ok\n{}\u0000\u0001 end"}})", id, forged),
                       auth);
  BOOST_REQUIRE_EQUAL(q.status, 200);
  BOOST_REQUIRE(waitUntil(
      [&] {
        return bridge.process.log().find("quarantined by the admin API") != std::string::npos;
      },
      5s));
  std::string log = bridge.process.log();
  BOOST_TEST(log.find("\n" + forged) == std::string::npos, "a reason forged a log line");
  BOOST_TEST(log.find('\0') == std::string::npos, "the log holds a NUL byte");
  BOOST_TEST(log.find("ok\\x0a2030-01-01") != std::string::npos,
             "the reason is not in the log, escaped");
}

// Item 19: unauthenticated admin requests logged a line each (12,000 lines in 2 s).
BOOST_AUTO_TEST_CASE(denied_admin_requests_are_logged_once_a_period_with_a_count) {
  Bridge bridge;
  // Denied admin requests, as fast as four clients can send them for 2 s: a line or two, not one
  // each.
  std::atomic<int> denied{0};
  {
    std::vector<std::thread> clients;
    auto begin = Clock::now();
    for (int c = 0; c < 4; ++c) {
      clients.emplace_back([&] {
        while (Clock::now() - begin < 2s) {
          if (httpRequest(bridge.port, "GET", "/v1/admin/sources").status == 401) ++denied;
        }
      });
    }
    for (auto& t : clients) t.join();
  }
  const std::string deniedLine = "admin GET /v1/admin/sources from 127.0.0.1: 401";
  BOOST_TEST(denied.load() > 100);
  BOOST_TEST(countOf(bridge.process.log(), deniedLine) <= 2u,
             countOf(bridge.process.log(), deniedLine)
                 << " log lines for " << denied.load() << " denied requests");
  // Past the period (10 s) the next denied request is logged, with the count of those that were
  // not.
  std::this_thread::sleep_for(8500ms);
  BOOST_REQUIRE(waitUntil(
      [&] {
        httpRequest(bridge.port, "GET", "/v1/admin/sources");
        return bridge.process.log().find("more unauthenticated admin requests not logged") !=
               std::string::npos;
      },
      5s));
}

// Item 19: two pipelined requests got one answer; a 20 KB admin body got 400; an error body
// repeated a path's invalid UTF-8 (invalid JSON).
BOOST_AUTO_TEST_CASE(pipelined_oversized_and_non_utf8_requests_get_proper_answers) {
  Bridge bridge;
  const std::map<std::string, std::string> auth{{"Authorization", std::string("Bearer ") + kToken}};
  // Two pipelined requests get two answers.
  BOOST_TEST(
      answersTo(
          bridge.port,
          "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") ==
      (std::vector<int>{200, 200}));
  // A 20 KB admin body: 413.
  auto big =
      httpRequest(bridge.port, "POST", bridge.admin("quarantine"),
                  fmt::format(R"({{"id":1,"reason":"{}"}})", std::string(20 * 1024, 'r')), auth);
  BOOST_TEST(big.status == 413);
  // Invalid UTF-8 in a path: the error body is still valid JSON.
  for (const std::string method : {"GET", "POST"}) {
    auto reply = rawHttp(
        bridge.port,
        method + " /\xff\xfe/healthz\xc3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 3000ms);
    BOOST_TEST(reply.status == 404);
    simdjson::dom::parser parser;
    simdjson::dom::element parsed;
    BOOST_TEST(parser.parse(reply.body).get(parsed) == simdjson::SUCCESS,
               "not valid JSON: " << reply.body);
  }
  auto wrongMethod = rawHttp(
      bridge.port,
      "PUT /v1/sources/%ff\xfe/control-snapshot HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
      3000ms);
  BOOST_TEST(wrongMethod.status == 405);
  simdjson::dom::parser parser;
  simdjson::dom::element parsed;
  BOOST_TEST(parser.parse(wrongMethod.body).get(parsed) == simdjson::SUCCESS,
             "not valid JSON: " << wrongMethod.body);
}

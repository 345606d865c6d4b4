// Rows the stream cannot take (docs/design.md, "The message shaped by its row"): the poison rules,
// the message a row makes, and the halts on a poison row or one the server no longer takes.
#include <boost/test/unit_test.hpp>

#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "config/subject_template.h"
#include "relay/jetstream_publisher.h"
#include "relay/poison.h"
#include "relay/row_headers.h"
#include "relay_harness.h"

using namespace outbox;
using outbox::test::Harness;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_CASE(poison_rules) {
  SourceConfig source;
  source.name = "account";
  source.subjectPrefix = "control.account";
  OutboxRow ok{1, "account", "42", "upsert", std::string(R"({"id":42})"), 0, 0};
  const SubjectTemplate subject = SubjectTemplate::byEntityType(source.subjectPrefix);
  BOOST_TEST(!findPoison(source, subject, ok, 1 << 20).has_value());
  auto reason = [&](OutboxRow r, size_t max = 1 << 20) { return findPoison(source, subject, r, max).value_or(""); };
  OutboxRow r = ok;
  r.entityType = "a.b";
  BOOST_TEST(reason(r).find("not a valid NATS subject token") != std::string::npos);
  r = ok;
  r.entityType = "";
  BOOST_TEST(!reason(r).empty());
  r = ok;
  r.op = "merge";
  BOOST_TEST(reason(r).find("op 'merge'") != std::string::npos);
  r = ok;
  r.payload = "{\"id\": 42";
  BOOST_TEST(reason(r).find("not valid JSON") != std::string::npos);
  r = ok;
  r.payload.reset();
  BOOST_TEST(reason(r).find("NULL payload") != std::string::npos);
  r.op = "delete";
  BOOST_TEST(reason(r).empty());
  r = ok;
  r.entityKey = "a\r\nInjected: header";
  BOOST_TEST(reason(r).find("line break") != std::string::npos);
  r.entityKey = "";
  BOOST_TEST(reason(r).find("entity_key is empty") != std::string::npos);
  r.entityKey = "x\x01y";
  BOOST_TEST(reason(r).find("control character") != std::string::npos);
  r.entityKey = "tab\there";
  BOOST_TEST(reason(r).empty());
  r.entityKey = "a\xff" "b";  // issue 34: a column of bytes can hold it
  BOOST_TEST(reason(r).find("not valid UTF-8") != std::string::npos, reason(r));
  r.entityKey = "caf\xc3\xa9 \xf0\x9f\x99\x82";
  BOOST_TEST(reason(r).empty());
  r = ok;
  r.payload = "\"" + std::string(2000, 'x') + "\"";
  BOOST_TEST(reason(r, 1000).find("over the server's max_payload of 1000 bytes") != std::string::npos);
  BOOST_TEST(reason(r, 4000).empty());
  // Issue 21: the row's headers travel unless they cannot.
  r = ok;
  r.headers = R"({"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","x-tenant":"t1"})";
  BOOST_TEST(reason(r).empty());
  r.headers = "null";
  BOOST_TEST(reason(r).empty());
  r.headers = R"({"Nats-Msg-Id":"x"})";
  BOOST_TEST(reason(r).find("'Nats-Msg-Id' is reserved") != std::string::npos, reason(r));
  r.headers = R"({"outbox-version":"9"})";
  BOOST_TEST(reason(r).find("is reserved") != std::string::npos);
  r.headers = R"({"content-type":"text/plain"})";
  BOOST_TEST(reason(r).find("is reserved") != std::string::npos);
  r.headers = R"({"x-count":3})";
  BOOST_TEST(reason(r).find("the value of 'x-count' is not a string") != std::string::npos);
  r.headers = R"({"x-note":"a\r\nInjected: 1"})";
  BOOST_TEST(reason(r).find("control character") != std::string::npos, reason(r));
  r.headers = R"({"bad name":"v"})";
  BOOST_TEST(reason(r).find("is not a header name") != std::string::npos);
  r.headers = R"(["traceparent"])";
  BOOST_TEST(reason(r).find("not a JSON object") != std::string::npos);
  r.headers = R"({"x":)";
  BOOST_TEST(reason(r).find("headers is not valid JSON") != std::string::npos);
  // What NATS clients would read back changed: a blank at either end, a status header.
  r.headers = R"({"tracestate":" congo=1"})";
  BOOST_TEST(reason(r).find("begins or ends with a space or tab") != std::string::npos, reason(r));
  r.headers = R"({"x-note":"\t"})";
  BOOST_TEST(reason(r).find("begins or ends with a space or tab") != std::string::npos, reason(r));
  r.headers = R"({"status":"404"})";
  BOOST_TEST(reason(r).find("read it as a server status") != std::string::npos, reason(r));
  r.headers = R"({"traceparent":"a","TraceParent":"b"})";
  BOOST_TEST(reason(r).find("'TraceParent' is given twice") != std::string::npos, reason(r));
  r.headers = R"({"Description":"x"})";
  BOOST_TEST(reason(r).find("read it as a server status") != std::string::npos, reason(r));
  // An empty value adds no header (W3C: an empty tracestate is none), the others travel in order.
  r.headers = R"({"tracestate":"","traceparent":"00-1-2-01","x-b":"in side"})";
  BOOST_TEST(reason(r).empty());
  std::vector<RowHeader> parsedHeaders;
  BOOST_TEST(parseRowHeaders(*r.headers, parsedHeaders).empty());
  BOOST_TEST((parsedHeaders == std::vector<RowHeader>{{"traceparent", "00-1-2-01"}, {"x-b", "in side"}}));
  r.headers.reset();
  r.entityKey = " 42";
  BOOST_TEST(reason(r).find("begins or ends with a space or tab") != std::string::npos, reason(r));
  r.entityKey = "42\t";
  BOOST_TEST(reason(r).find("begins or ends with a space or tab") != std::string::npos, reason(r));
  r.entityKey = "4 2";
  BOOST_TEST(reason(r).empty());
  // A subject the server could not take is refused before it is published.
  r = ok;
  SubjectTemplate perKey = SubjectTemplate::forSource("control.account.{entity_type}.{entity_key}", "control.account");
  r.entityKey = std::string(1100, '.');  // 3 bytes each escaped
  BOOST_TEST(findPoison(source, perKey, r, 1 << 20).value_or("").find("over the 3072 bytes") != std::string::npos);
  r.entityKey = std::string(1000, '.');
  BOOST_TEST(!findPoison(source, perKey, r, 1 << 20).has_value());
}

// A row checked on the prefetch thread carries its subject and headers into its publish; a row
// read back for a republish has them worked out there: both make the same message.
BOOST_AUTO_TEST_CASE(a_checked_row_makes_the_message_an_unchecked_one_does) {
  SourceConfig source;
  source.name = "account";
  source.subjectPrefix = "control.account";
  const SubjectTemplate subject =
      SubjectTemplate::forSource("control.account.{entity_type}.{entity_key}.{op}", "control.account");
  OutboxRow row{7, "account", "a.b c", "upsert", std::string(R"({"id":1})"), 0, 0,
                std::string(R"({"traceparent":"00-1-2-01","tracestate":""})")};
  OutboxRow checked = row;
  BOOST_TEST(!findPoison(source, subject, checked, 1 << 20).has_value());
  BOOST_TEST(checked.subject == "control.account.account.a%2Eb%20c.upsert");
  row.version = checked.version = 12;
  for (bool fence : {false, true}) {
    auto a = toMessage(source, subject, row, 3, 40, fence);
    auto b = toMessage(source, subject, checked, 3, 40, fence);
    BOOST_TEST(a.subject == b.subject);
    BOOST_TEST(a.data == b.data);
    BOOST_TEST((a.headers == b.headers));
    BOOST_TEST((a.moreHeaders == b.moreHeaders));
    BOOST_TEST((b.moreHeaders == std::vector<RowHeader>{{"traceparent", "00-1-2-01"}}));
  }
  // Measured with the longest version it could get: version 0 (1 digit, and 0 - 1 = the longest
  // in Nats-Expected-Last-Msg-Id) -> 18446744073709551615 adds 19 bytes in Nats-Msg-Id and 19 in
  // Outbox-Version.
  OutboxRow big = row;
  big.version = 0;
  auto m = toMessage(source, subject, big, UINT64_MAX, UINT64_MAX, true);
  size_t bytes = m.data.size() + 12;
  for (const auto& [k, v] : m.headers) bytes += std::char_traits<char>::length(k) + v.size() + 4;
  for (const auto& [k, v] : m.moreHeaders) bytes += k.size() + v.size() + 4;
  OutboxRow fits = big;
  BOOST_TEST(!findPoison(source, subject, fits, bytes + 38).has_value());
  OutboxRow over = big;
  BOOST_TEST(findPoison(source, subject, over, bytes + 37).value_or("").find("over the server's max_payload") !=
             std::string::npos);
  BOOST_TEST(over.subject.empty());  // not readied
}

BOOST_AUTO_TEST_CASE(a_poison_row_halts_after_the_rows_before_it) {
  Harness h;
  h.store.add(3);
  h.store.add(1, "bad.type");
  h.store.add(3);
  h.start();
  BOOST_REQUIRE(h.waitFor([&] { return !h.store.snapshot().haltedReason.empty(); }));
  BOOST_REQUIRE(h.waitFor([&] { return h.store.snapshot().publishedThrough == 3; }));
  BOOST_TEST(h.store.snapshot().haltedReason.find("poison row id=4") == 0u);
  BOOST_TEST((h.store.snapshot().haltedRow == HaltedRow{4, std::nullopt}));
  {
    std::lock_guard lock(h.store.mu);
    h.store.quarantined.insert(4);
  }
  BOOST_REQUIRE(h.waitFor([&] { return h.store.snapshot().publishedThrough == 6; }));
  BOOST_TEST(h.streamIsDense(6));
  BOOST_TEST(h.store.snapshot().haltedReason.empty());
  BOOST_TEST(!h.store.snapshot().haltedRow.has_value());
}

// Issue 33: above the source's highest quarantined id when its session began, the read leaves the
// quarantine out, and a row an operator quarantined ahead of the scan since comes as a new one. A
// poison row is looked up alone before it halts the source or is quarantined: one the operator
// set aside is passed over; on_poison = "quarantine" sets aside the other, once.
BOOST_AUTO_TEST_CASE(a_poison_row_quarantined_ahead_of_the_scan_is_looked_up_before_it_halts) {
  for (OnPoison onPoison : {OnPoison::kHalt, OnPoison::kQuarantine}) {
    BOOST_TEST_CONTEXT("on_poison " << (onPoison == OnPoison::kHalt ? "halt" : "quarantine")) {
      Harness h;
      h.source.onPoison = onPoison;
      h.store.newRowsLeaveQuarantineOut = true;
      h.store.add(2);
      h.start();
      BOOST_REQUIRE(h.waitFor([&] { return h.store.snapshot().publishedThrough == 2; }));
      {
        std::lock_guard lock(h.store.mu);
        h.store.quarantined.insert(3);  // by the operator, ahead of the scan (here before it commits)
      }
      h.store.add(1, "bad.type");  // 3
      h.store.add(1);
      h.store.add(1, "bad.type");  // 5: not quarantined
      h.store.add(1);
      if (onPoison == OnPoison::kHalt) {
        BOOST_REQUIRE(h.waitFor([&] { return !h.store.snapshot().haltedReason.empty(); }));
        BOOST_TEST(h.store.snapshot().haltedReason.find("poison row id=5") == 0u, h.store.snapshot().haltedReason);
        BOOST_REQUIRE(h.waitFor([&] { return h.store.snapshot().publishedThrough == 3; }));
        std::lock_guard lock(h.store.mu);
        h.store.quarantined.insert(5);  // the operator's answer
      }
      BOOST_REQUIRE(h.waitFor([&] { return h.store.snapshot().publishedThrough == 4; }));
      BOOST_TEST(h.streamIsDense(4));
      BOOST_TEST(h.store.snapshot().haltedReason.empty());
      std::lock_guard lock(h.store.mu);
      // Halted on 5 alone, if at all (a halt on 3 would be lifted a recheck later: the end the same).
      BOOST_TEST(h.store.halts.size() == (onPoison == OnPoison::kHalt ? 1u : 0u));
      for (const auto& reason : h.store.halts) BOOST_TEST(reason.find("poison row id=5") == 0u, reason);
      BOOST_TEST((h.store.quarantined == std::set<uint64_t>{3, 5}));
      // The relay's own quarantine asked for 5 alone (3 was set aside already: asked again, its
      // operator's reason would be overwritten).
      BOOST_TEST((h.store.quarantinesAsked == (onPoison == OnPoison::kQuarantine ? std::vector<uint64_t>{5}
                                                                                : std::vector<uint64_t>{})));
      for (const auto& row : h.store.rows) BOOST_TEST((row.version == 0) == (row.id == 3 || row.id == 5), row.id);
    }
  }
}

// Issue 8: the server's max_payload shrank after rows were assigned. The tail publish failed as
// transient for ever, with no halted_reason; now the source halts naming the version and the row,
// and resumes by itself once the server takes the message again.
BOOST_AUTO_TEST_CASE(an_assigned_row_the_server_no_longer_takes_halts_with_its_version_and_id) {
  Harness h;
  h.store.add(5);
  h.store.rows[3].payload = fmt::format("{{\"pad\":\"{}\"}}", std::string(2000, 'x'));  // row id 4
  h.crashBetweenAckAndMark(2, 2);
  for (uint64_t v = 3; v <= 5; ++v) h.store.rows[v - 1].version = v;
  h.store.state.assignedThrough = 5;
  h.publisher.maxPayload = 1500;
  h.start();
  BOOST_REQUIRE(h.waitFor([&] { return !h.store.snapshot().haltedReason.empty(); }));
  std::string reason = h.store.snapshot().haltedReason;
  BOOST_TEST(reason.find("unpublishable version 4 (row id=4)") == 0u, reason);
  BOOST_TEST(reason.find("max_payload") != std::string::npos, reason);
  BOOST_TEST((h.store.snapshot().haltedRow == HaltedRow{4, 4}));
  BOOST_TEST(h.waitFor([&] { return h.store.snapshot().publishedThrough == 3; }));  // the rows before it went out
  BOOST_TEST(h.metrics.halted.load());
  h.publisher.maxPayload = 1024 * 1024;
  BOOST_REQUIRE(h.waitFor([&] { return h.store.snapshot().publishedThrough == 5; }));
  BOOST_TEST(h.store.snapshot().haltedReason.empty());
  BOOST_TEST(h.streamIsDense(5));
}

// An exception from a store (a bug: a column a result lacks) halts that source with the message,
// on the relay thread and on the prefetch thread alike, where it would end the process; once the
// store answers again the source goes on, every row published once.
BOOST_AUTO_TEST_CASE(an_exception_from_the_store_halts_the_source_not_the_process) {
  for (bool onWorker : {true, false}) {
    BOOST_TEST_CONTEXT((onWorker ? "a new-row read, on the prefetch thread" : "the state row, on the relay thread")) {
      Harness h;
      h.store.add(5);
      auto& throwing = onWorker ? h.store.throwingReads : h.store.throwingLoads;
      throwing = 1'000'000;
      h.start();
      BOOST_REQUIRE(h.waitFor([&] { return h.metrics.halted.load(); }));
      BOOST_TEST(h.inStream() == 0u);
      throwing = 0;  // mended: the next session goes on
      BOOST_REQUIRE(h.waitFor([&] { return h.inStream() == 5; }));
      BOOST_TEST(h.streamIsDense(5));
    }
  }
}

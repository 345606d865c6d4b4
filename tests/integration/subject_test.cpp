#define BOOST_TEST_MODULE subject
#include <boost/test/unit_test.hpp>

#include <map>
#include <set>

#include <fmt/format.h>

#include "config/subject_template.h"
#include "harness.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

// Issue 21 (docs/design.md, "The message shaped by its row"): the message shaped by its row.

namespace {

std::string sqlText(db::Connection& conn, const std::string& text) { return conn.quote(text); }

// Every message of the source, read whole.
std::vector<nats::StoredMessage> allMessages(const SourceSpec& source) {
  StreamReader reader;
  return reader.readAll(source.stream(), "control." + source.name);
}

// The messages of `filter`, which end at `lastSeq`.
std::vector<nats::StoredMessage> filtered(const SourceSpec& source, const std::string& filter, uint64_t lastSeq) {
  StreamReader reader;
  auto messages = reader.js().readRange(source.stream(), filter, 1, lastSeq, 5000ms);
  BOOST_REQUIRE_MESSAGE(messages.isOk(), messages.status().message());
  return *messages;
}

}  // namespace

// 10,000 changes over 1,000 keys and every class of key a token cannot hold: each message's
// subject names its key, escaped as documented and reversed exactly; a consumer filtered on one
// key's subject sees exactly that key's versions, in order.
BOOST_AUTO_TEST_CASE(per_key_subjects_let_a_consumer_follow_one_key) {
  TestDatabase database("perkey");
  SourceSpec source{uniqueName("pk", database), &database, {}};
  const std::string prefix = "control." + source.name;
  source.extra["subject"] = fmt::format("\"{}.{{entity_type}}.{{entity_key}}\"", prefix);
  std::string config = writeConfig({source});
  migrate(config);
  auto& sql = database.sql();
  // (An empty key, or one with a control character other than tab, is poison: the
  // Outbox-Entity-Key header cannot carry it. Their escaping is in subject_template_test.)
  const std::vector<std::string> oddKeys = {"a.b", "*", ">", "a b", "tab\there", "50%", "%41", "ключ.1", "..", "%"};
  const int kChanges = 10'000, kKeys = 1'000;
  for (int first = 0; first < kChanges; first += 1000) {
    std::string values;
    for (int i = first; i < first + 1000; ++i) {
      values += fmt::format("{}('item', 'k{}', 'upsert', '{{\"n\":{}}}')", values.empty() ? "" : ",", i % kKeys, i);
    }
    BOOST_REQUIRE(sql.exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES {}",
                                       source.outboxTable(), values))
                      .isOk());
  }
  for (int round = 0; round < 2; ++round) {
    for (const auto& key : oddKeys) {
      BOOST_REQUIRE(sql.exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('item', {}, "
                                         "'upsert', '{{\"round\":{}}}')",
                                         source.outboxTable(), sqlText(sql, key), round))
                        .isOk());
    }
  }
  const uint64_t total = kChanges + 2 * oddKeys.size();
  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == total; }, 60s),
                        bridge.log());
  auto messages = allMessages(source);
  requireDenseOnce(source, total);
  BOOST_REQUIRE_EQUAL(messages.size(), total);
  std::map<std::string, std::vector<uint64_t>> versionsOf;  // key -> versions in stream order
  std::map<std::string, uint64_t> lastSeqOf;
  for (const auto& m : messages) {
    const std::string& key = m.headers.at("Outbox-Entity-Key");
    const std::string head = prefix + ".item.";
    BOOST_REQUIRE_MESSAGE(m.subject.rfind(head, 0) == 0, m.subject);
    const std::string token = m.subject.substr(head.size());
    BOOST_TEST(token.find_first_of(". *>\t\r\n") == std::string::npos, token);  // one token, no wildcard
    BOOST_TEST(token == escapeSubjectToken(key));
    BOOST_TEST(unescapeSubjectToken(token).value_or("<none>") == key);
    versionsOf[key].push_back(headerU64(m, "Outbox-Version"));
    lastSeqOf[key] = m.seq;
  }
  BOOST_TEST(versionsOf.size() == static_cast<size_t>(kKeys) + oddKeys.size());  // no two keys merged
  for (const std::string& key : std::vector<std::string>{"k7", "k999", "a.b", "%", "*", "ключ.1"}) {
    auto mine = filtered(source, prefix + ".item." + escapeSubjectToken(key), lastSeqOf.at(key));
    std::vector<uint64_t> versions;
    for (const auto& m : mine) {
      BOOST_TEST(m.headers.at("Outbox-Entity-Key") == key);
      versions.push_back(headerU64(m, "Outbox-Version"));
    }
    BOOST_TEST(versions == versionsOf.at(key), "key '" << key << "'");
    BOOST_TEST(std::is_sorted(versions.begin(), versions.end()));
  }
  BOOST_TEST(versionsOf.at("k7").size() == 10u);
  BOOST_TEST(bridge.stop() == 0);
}

// {partition:8}: each key always in the partition the documented hash names; 8 filtered
// consumers together see every version once, each key in order.
BOOST_AUTO_TEST_CASE(eight_partition_consumers_share_the_keys) {
  TestDatabase database("part");
  SourceSpec source{uniqueName("pt", database), &database, {}};
  const std::string prefix = "control." + source.name;
  source.extra["subject"] = fmt::format("\"{}.{{partition:8}}.{{entity_key}}\"", prefix);
  std::string config = writeConfig({source});
  migrate(config);
  const int kChanges = 2'000, kKeys = 200;
  std::string values;
  for (int i = 0; i < kChanges; ++i) {
    values += fmt::format("{}('item', 'key-{}', '{}', {})", values.empty() ? "" : ",", i % kKeys,
                          i % 10 == 9 ? "delete" : "upsert", i % 10 == 9 ? "NULL" : fmt::format("'{{\"n\":{}}}'", i));
  }
  BOOST_REQUIRE(database.sql()
                    .exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES {}",
                                      source.outboxTable(), values))
                    .isOk());
  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == kChanges; }, 60s),
                        bridge.log());
  auto messages = allMessages(source);
  BOOST_REQUIRE_EQUAL(messages.size(), static_cast<size_t>(kChanges));
  std::map<int, uint64_t> lastSeq;
  for (const auto& m : messages) {
    const uint32_t p = keyPartition(m.headers.at("Outbox-Entity-Key"), 8);
    BOOST_TEST(m.subject == fmt::format("{}.{}.{}", prefix, p, m.headers.at("Outbox-Entity-Key")));
    lastSeq[static_cast<int>(p)] = m.seq;
  }
  BOOST_REQUIRE_EQUAL(lastSeq.size(), 8u);  // 200 keys reach every partition
  std::multiset<uint64_t> seen;
  std::map<std::string, int> partitionOf;
  for (int p = 0; p < 8; ++p) {
    std::map<std::string, uint64_t> lastVersion;
    for (const auto& m : filtered(source, fmt::format("{}.{}.>", prefix, p), lastSeq.at(p))) {
      const std::string& key = m.headers.at("Outbox-Entity-Key");
      const uint64_t version = headerU64(m, "Outbox-Version");
      BOOST_TEST(version > lastVersion[key], "key " << key << " out of order in partition " << p);
      lastVersion[key] = version;
      BOOST_TEST(partitionOf.emplace(key, p).first->second == p, "key " << key << " in two partitions");
      seen.insert(version);
    }
  }
  BOOST_TEST(seen.size() == static_cast<size_t>(kChanges));
  BOOST_TEST(std::set<uint64_t>(seen.begin(), seen.end()).size() == static_cast<size_t>(kChanges));  // once each
  BOOST_TEST(partitionOf.size() == static_cast<size_t>(kKeys));
  BOOST_TEST(bridge.stop() == 0);
}

// The row's headers travel (W3C trace context, a custom one); NULL or {} add none; every upsert
// carries Content-Type. A reserved name stops the source at that row, with the reason.
BOOST_AUTO_TEST_CASE(headers_from_the_row_arrive_and_a_reserved_one_is_poison) {
  TestDatabase database("rowhdr");
  SourceSpec source{uniqueName("rh", database), &database, {}};
  std::string config = writeConfig({source});
  migrate(config);
  auto& sql = database.sql();
  const std::string traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  BOOST_REQUIRE(sql.exec(fmt::format(
                           "INSERT INTO {} (entity_type, entity_key, op, payload, headers) VALUES "
                           "('account', '1', 'upsert', '{{\"id\":1}}', JSON_OBJECT('traceparent', '{}', 'tracestate', "
                           "'congo=t61rcWkgMzE', 'x-tenant', 'acme')),"
                           "('account', '2', 'upsert', '{{\"id\":2}}', NULL),"
                           "('account', '3', 'delete', NULL, '{{}}')",
                           source.outboxTable(), traceparent))
                    .isOk());
  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 3; }, 20s), bridge.log());
  auto messages = allMessages(source);
  BOOST_REQUIRE_EQUAL(messages.size(), 3u);
  BOOST_TEST(messages[0].headers.at("traceparent") == traceparent);
  BOOST_TEST(messages[0].headers.at("tracestate") == "congo=t61rcWkgMzE");
  BOOST_TEST(messages[0].headers.at("x-tenant") == "acme");
  BOOST_TEST(messages[0].headers.at("Content-Type") == "application/json");
  BOOST_TEST(messages[1].headers.at("Content-Type") == "application/json");
  BOOST_TEST(messages[2].headers.count("Content-Type") == 0u);  // a delete has no body
  // Beyond the bridge's own (Nats-*, Outbox-*, Content-Type), only what the row asked for.
  auto rowHeaders = [](const nats::StoredMessage& m) {
    std::set<std::string> names;
    for (const auto& [name, value] : m.headers) {
      if (name.rfind("Nats-", 0) != 0 && name.rfind("Outbox-", 0) != 0 && name != "Content-Type") names.insert(name);
    }
    return names;
  };
  BOOST_TEST((rowHeaders(messages[0]) == std::set<std::string>{"traceparent", "tracestate", "x-tenant"}));
  BOOST_TEST(rowHeaders(messages[1]).empty());
  BOOST_TEST(rowHeaders(messages[2]).empty());
  // A reserved name: the source halts on that row and says why; the rows before it are published.
  BOOST_REQUIRE(sql.exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload, headers) VALUES "
                                     "('account', '4', 'upsert', '{{\"id\":4}}', NULL),"
                                     "('account', '5', 'upsert', '{{\"id\":5}}', '{{\"Nats-Msg-Id\":\"forged\"}}')",
                                     source.outboxTable()))
                    .isOk());
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return !database.state(source.name).haltedReason.empty(); }, 20s), bridge.log());
  const std::string reason = database.state(source.name).haltedReason;
  BOOST_TEST(reason.find("poison row id=5") == 0u, reason);
  BOOST_TEST(reason.find("'Nats-Msg-Id' is reserved") != std::string::npos, reason);
  BOOST_REQUIRE(waitUntil([&] { return database.state(source.name).publishedThrough == 4; }, 20s));
  BOOST_TEST(allMessages(source).size() == 4u);
  BOOST_TEST(bridge.stop() == 0);
}

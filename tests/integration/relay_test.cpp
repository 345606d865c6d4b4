#define BOOST_TEST_MODULE relay_integration
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "harness.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

std::string fieldOf(const std::string& json, const std::string& field) {
  auto pos = json.find("\"" + field + "\":");
  if (pos == std::string::npos) pos = json.find("\"" + field + "\": ");
  if (pos == std::string::npos) return "";
  pos = json.find(':', pos) + 1;
  while (json[pos] == ' ') ++pos;
  auto end = json.find_first_of(",}", pos);
  return json.substr(pos, end - pos);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_committed_row_reaches_the_stream_with_the_contract_headers) {
  TestDatabase database("headers");
  SourceSpec source{uniqueName("hdr", database), &database, {}};
  std::string config = writeConfig({source});
  migrate(config);
  auto& sql = database.sql();
  BOOST_REQUIRE(sql.exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES "
                                     "('account', '42', 'upsert', '{{\"id\": 42, \"displayName\": \"Acme \\\\\"Ltd\\\\\"\"}}'),"
                                     "('account', '42', 'delete', NULL)",
                                     source.outboxTable()))
                    .isOk());
  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 2; }, 20s),
                        bridge.log());
  StreamReader reader;
  auto messages = reader.readAll(source.stream(), "control." + source.name);
  BOOST_REQUIRE_EQUAL(messages.size(), 2u);
  const auto& up = messages[0];
  BOOST_TEST(up.subject == "control." + source.name + ".account");
  BOOST_TEST(up.data == R"({"id": 42, "displayName": "Acme \"Ltd\""})");
  BOOST_TEST(up.headers.at("Nats-Msg-Id") == source.name + ":1");
  BOOST_TEST(up.headers.at("Outbox-Source") == source.name);
  BOOST_TEST(up.headers.at("Outbox-Epoch") == "1");
  BOOST_TEST(up.headers.at("Outbox-Version") == "1");
  BOOST_TEST(up.headers.at("Outbox-Entity-Type") == "account");
  BOOST_TEST(up.headers.at("Outbox-Entity-Key") == "42");
  BOOST_TEST(up.headers.at("Outbox-Op") == "upsert");
  const auto& del = messages[1];
  BOOST_TEST(del.data.empty());
  BOOST_TEST(del.headers.at("Outbox-Op") == "delete");
  BOOST_TEST(del.headers.at("Outbox-Version") == "2");
  auto state = database.state(source.name);
  BOOST_TEST(state.assignedThrough == 2u);
  BOOST_TEST(state.publishedStreamSeq == del.seq);
  BOOST_TEST(database.unversioned(source.outboxTable()) == 0u);
  // Every test's outbox table refuses UPDATEs (harness migrate()): the bridge never needed one.
  Status update = database.sql().exec(fmt::format("UPDATE {} SET op = op", source.outboxTable()));
  BOOST_TEST(!update.isOk());
  BOOST_TEST(update.message().find("append-only") != std::string::npos, update.message());
  std::chrono::milliseconds took{};
  BOOST_TEST(bridge.stop(&took) == 0);
  BOOST_TEST(took.count() < 5000);
}

// Invariants 1-4 with producers racing: several threads, transactions held open so they commit
// out of id order, rollbacks, and updates of shared entities that must keep their commit order.
BOOST_AUTO_TEST_CASE(concurrent_producers_give_dense_versions_once_in_commit_order) {
  TestDatabase database("inv");
  SourceSpec source{uniqueName("inv", database), &database,
                    {{"batch_size", "50"}}};
  std::string config = writeConfig({source});
  migrate(config);
  BOOST_REQUIRE(database.sql().exec("CREATE TABLE entities (k VARCHAR(32) PRIMARY KEY, counter BIGINT NOT NULL)").isOk());
  BOOST_REQUIRE(database.sql().exec("INSERT INTO entities VALUES ('e0',0),('e1',0),('e2',0),('e3',0),('e4',0)").isOk());
  BridgeProcess bridge(config);
  bridge.start();

  const int kThreads = 4, kPerThread = 150;
  std::atomic<int> committed{0}, rolledBack{0};
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      auto conn = database.connect();
      for (int i = 0; i < kPerThread; ++i) {
        std::string entity = fmt::format("e{}", (t + i) % 5);
        bool rollback = i % 7 == 3;
        // The producer rule: business write first, then the outbox row built from it.
        Status s = conn->begin();
        if (s.isOk()) s = conn->exec(fmt::format("UPDATE entities SET counter = counter + 1 WHERE k = '{}'", entity));
        if (s.isOk()) {
          s = conn->exec(fmt::format(
              "INSERT INTO {} (entity_type, entity_key, op, payload) SELECT 'entity', k, 'upsert', "
              "JSON_OBJECT('k', k, 'counter', counter, 'rolledBack', {}) FROM entities WHERE k = '{}'",
              source.outboxTable(), rollback ? "true" : "false", entity));
        }
        if (i % 10 == 5) std::this_thread::sleep_for(std::chrono::milliseconds(15));  // commit late
        if (!s.isOk()) throw std::runtime_error(s.message());
        if (rollback) {
          conn->rollback();
          rolledBack++;
        } else {
          if (!conn->commit().isOk()) throw std::runtime_error("commit");
          committed++;
        }
      }
    });
  }
  for (auto& p : producers) p.join();
  const uint64_t total = static_cast<uint64_t>(committed.load());
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == total; }, 30s),
                        bridge.log());
  StreamReader reader;
  auto messages = reader.readAll(source.stream(), "control." + source.name);
  BOOST_REQUIRE_EQUAL(checkDenseOnce(messages, source.name, total), "");
  std::map<std::string, long> lastCounter;
  for (const auto& m : messages) {
    BOOST_REQUIRE_MESSAGE(fieldOf(m.data, "rolledBack") == "false", "a rolled-back change was published: " + m.data);
    std::string key = m.headers.at("Outbox-Entity-Key");
    long counter = std::stol(fieldOf(m.data, "counter"));
    BOOST_REQUIRE_MESSAGE(counter > lastCounter[key],
                          fmt::format("entity {}: counter {} after {} (commit order broken)", key, counter, lastCounter[key]));
    lastCounter[key] = counter;
  }
  // Every committed change is there: the final counters are the ones in the database.
  for (const auto& [key, counter] : lastCounter) {
    BOOST_TEST(counter == static_cast<long>(database.scalar("SELECT counter FROM entities WHERE k = '" + key + "'")));
  }
  BOOST_TEST(rolledBack.load() > 0);
  BOOST_TEST(bridge.stop() == 0);
}

// ADR-021 validation 1: a business row and its outbox row commit or roll back together.
BOOST_AUTO_TEST_CASE(adr021_business_row_and_outbox_row_commit_or_roll_back_together) {
  TestDatabase database("atomic");
  SourceSpec source{uniqueName("atm", database), &database, {}};
  std::string config = writeConfig({source});
  migrate(config);
  auto& sql = database.sql();
  BOOST_REQUIRE(sql.exec("CREATE TABLE accounts (id BIGINT PRIMARY KEY, display_name VARCHAR(64) NOT NULL UNIQUE)").isOk());
  auto change = [&](int id, const std::string& name, bool failAfterOutbox) {
    auto conn = database.connect();
    Status s = conn->begin();
    if (s.isOk()) s = conn->exec(fmt::format("INSERT INTO accounts VALUES ({}, '{}')", id, name));
    if (s.isOk()) {
      s = conn->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) SELECT 'account', id, 'upsert', "
                                 "JSON_OBJECT('id', id, 'displayName', display_name) FROM accounts WHERE id = {}",
                                 source.outboxTable(), id));
    }
    // The forced failure: a statement that violates a constraint after both writes.
    if (s.isOk() && failAfterOutbox) s = conn->exec("INSERT INTO accounts VALUES (1, 'duplicate id')");
    if (s.isOk()) return conn->commit().isOk();
    conn->rollback();
    return false;
  };
  BOOST_TEST(change(1, "Acme", false));
  BOOST_TEST(!change(2, "Globex", true));
  BOOST_TEST(change(3, "Initech", false));
  BOOST_TEST(database.scalar("SELECT COUNT(*) FROM accounts WHERE id = 2") == 0u);
  BOOST_TEST(database.scalar(fmt::format("SELECT COUNT(*) FROM {} WHERE entity_key = '2'", source.outboxTable())) == 0u);
  BOOST_TEST(database.scalar(fmt::format("SELECT COUNT(*) FROM {}", source.outboxTable())) == 2u);

  BridgeProcess bridge(config);
  bridge.start();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 2; }, 20s), bridge.log());
  StreamReader reader;
  auto messages = reader.readAll(source.stream(), "control." + source.name);
  BOOST_REQUIRE_EQUAL(checkDenseOnce(messages, source.name, 2), "");
  BOOST_TEST(messages[0].headers.at("Outbox-Entity-Key") == "1");
  BOOST_TEST(messages[1].headers.at("Outbox-Entity-Key") == "3");
  BOOST_TEST(bridge.stop() == 0);
}

BOOST_AUTO_TEST_CASE(a_stream_with_other_subjects_is_refused) {
  TestDatabase database("subj");
  SourceSpec source{uniqueName("sub", database), &database, {}};
  std::string config = writeConfig({source});
  migrate(config);
  // Someone else's stream under our name.
  {
    auto wrong = writeConfig({SourceSpec{source.name, &database, {{"subject_prefix", "\"elsewhere." + source.name + "\""}}}});
    BridgeProcess other(wrong);
    other.start();
    StreamReader reader;
    BOOST_REQUIRE(waitUntil([&] { return reader.exists(source.stream()); }, 10s));
    other.stop();
  }
  auto result = runBridge({"run", "--config", config});
  BOOST_TEST(result.exitCode == 1);
  BOOST_TEST(result.err.find("exists with subjects [elsewhere." + source.name + ".>]") != std::string::npos, result.err);
}

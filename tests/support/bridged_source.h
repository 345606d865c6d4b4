#pragma once

// A source on a fresh database with its bridge, and a statement run on a connection of its own:
// how the late-commit tests (late_commit_test.cpp, late_commit_restart_test.cpp,
// late_commit_spans_test.cpp, quiet_spans_test.cpp) begin.

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "db/migrate.h"
#include "harness.h"

namespace outbox::test {

// The version the row whose payload has "n": `n` got, or 0.
inline uint64_t versionOf(TestDatabase& database, const std::string& table, int n) {
  return database.scalar(fmt::format("SELECT COALESCE(MAX(v.version), 0) FROM {0} o JOIN {0}_versions v ON "
                                     "v.outbox_id = o.id WHERE JSON_VALUE(o.payload, '$.n') = {1}",
                                     table, n));
}

// A source on a fresh database, migrated, with a producer's connection and its bridge (started
// by start()).
struct BridgedSource {
  TestDatabase database;
  SourceSpec source;
  std::string config;
  std::string table;
  BridgeProcess bridge;
  std::unique_ptr<db::Connection> producer;
  int port = 0;

  BridgedSource(const std::string& purpose, const std::string& prefix, std::map<std::string, std::string> extra = {})
      : database(purpose),
        source{uniqueName(prefix, database), &database, std::move(extra)},
        config(writeConfig({source})),
        table(source.outboxTable()),
        bridge(config),
        producer(database.connect()) {
    migrate(config);
  }
  void start() {
    bridge.start();
    port = bridge.httpPort();
  }
  void requirePublished(uint64_t through) {
    BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == through; }, std::chrono::seconds(20)),
                          bridge.log());
  }
  double openHoles() { return sourceMetric(port, "outbox_open_holes", source.name); }
  // A BEFORE INSERT trigger that sleeps a second for each row whose entity_key is 'slow': a
  // multi-row INSERT holds the ids it reserved at its first row meanwhile.
  void slowTrigger() {
    BOOST_REQUIRE(database.sql()
                      .exec(fmt::format("CREATE TRIGGER {0}_slow BEFORE INSERT ON {0} FOR EACH ROW BEGIN IF "
                                        "NEW.entity_key = 'slow' THEN DO SLEEP(1); END IF; END",
                                        table))
                      .isOk());
  }
  // A transaction left open after inserting one row whose payload is {"n": n}.
  std::unique_ptr<db::Connection> holdOpen(int n) {
    auto conn = database.connect();
    BOOST_REQUIRE(conn->begin().isOk());
    BOOST_REQUIRE(conn->exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('item', "
                                         "'late', 'upsert', '{{\"n\":{}}}')", table, n)).isOk());
    return conn;
  }
  // `count` rows inserted by one INSERT ... SELECT and rolled back: ids burnt.
  void burnIds(db::Connection& conn, int count) {
    BOOST_REQUIRE(conn.begin().isOk());
    BOOST_REQUIRE(conn.exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) SELECT 'item', seq, "
                                        "'upsert', '{{\"n\":-6}}' FROM seq_1_to_{}", table, count)).isOk());
    BOOST_REQUIRE(conn.exec("ROLLBACK").isOk());
  }
};


// A statement run on its own connection while the test goes on; joined (and waited for) at the end.
struct Running {
  std::unique_ptr<db::Connection> conn;
  uint64_t id = 0;  // the connection's id on the server
  std::thread thread;
  Running(TestDatabase& database, std::vector<std::string> statements) : conn(database.connect()) {
    auto rows = conn->query("SELECT CONNECTION_ID()");
    BOOST_REQUIRE(rows.isOk() && rows->next());
    id = rows->u64(0);
    thread = std::thread([this, statements = std::move(statements)] {
      for (const auto& sql : statements) (void)conn->exec(sql);
    });
  }
  ~Running() { thread.join(); }
};

// Waits until each of `running` executes a statement (a thread that starts late would turn a
// test's sleeps into a race with the server's).
inline void requireExecuting(TestDatabase& database, const std::vector<const Running*>& running) {
  std::vector<uint64_t> ids;
  for (const Running* r : running) ids.push_back(r->id);
  const std::string sql = fmt::format(
      "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN ({}) AND COMMAND = 'Query'",
      fmt::join(ids, ", "));
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.scalar(sql) == ids.size(); }, std::chrono::seconds(10)),
                        "statements not started: " << fmt::format("{}", fmt::join(ids, ", ")));
}

// A SELECT SLEEP(600) on a connection of its own — a long statement elsewhere — killed at the end.
struct SleepingElsewhere {
  TestDatabase& database;
  Running sleeper;
  explicit SleepingElsewhere(TestDatabase& db) : database(db), sleeper(db, {"DO SLEEP(600)"}) {}
  ~SleepingElsewhere() { (void)database.connect()->exec(fmt::format("KILL QUERY {}", sleeper.id)); }
};

// One-id holes, as issues 19 and 33 tell them: `connections` producers, each on its own connection
// with auto_increment_increment = 3 (every gap between committed ids a hole), `rate` autocommit
// INSERTs a second in all (one connection does not reach 2,000 here) for `seconds`; row i has key
// i % 100 and payload {"n": i}. insert() writes one more row, counted the same.
struct PacedProducers {
  BridgedSource& s;
  std::atomic<int> committed{0};
  std::atomic<bool> failed{false};
  const std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;

  PacedProducers(BridgedSource& source, int connections, int rate, int seconds) : s(source) {
    for (int p = 0; p < connections; ++p) {
      threads.emplace_back([this, p, connections, rate, seconds] {
        auto conn = s.database.connect();
        if (!conn->exec("SET SESSION auto_increment_increment = 3").isOk()) failed = true;
        auto next = start;
        for (int i = p; i < rate * seconds && !failed; i += connections) {
          insert(*conn, std::to_string(i % 100), std::to_string(i));
          next += std::chrono::microseconds(1'000'000 * connections / rate);
          std::this_thread::sleep_until(next);
        }
      });
    }
  }
  ~PacedProducers() { join(); }
  // `n` is SQL: a number, or an expression that gives one.
  void insert(db::Connection& conn, const std::string& key, const std::string& n) {
    if (!conn.exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('item', '{}', 'upsert', "
                               "CONCAT('{{\"n\":', {}, '}}'))",
                               s.table, key, n))
             .isOk()) {
      failed = true;
    }
    ++committed;
  }
  void join() {
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
  }
};

}  // namespace outbox::test

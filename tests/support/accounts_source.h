#pragma once

// A source over an `accounts` table written as README's producer rule says, and its changes: how
// the snapshot and replica tests begin (snapshot_test.cpp, replica_stream_test.cpp).

#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/json.h"
#include "harness.h"

namespace outbox::test {

// A source over an `accounts` table, following README's "The producer rule".
struct AccountsSource {
  TestDatabase database;
  SourceSpec spec;
  std::string config;

  // `sourceKeys`: more keys of the [[source]] (TOML literals), with {name} for the source's name.
  explicit AccountsSource(const std::string& purpose, const std::string& extraToml = "",
                          const std::map<std::string, std::string>& sourceKeys = {})
      : database(purpose),
        spec{uniqueName(purpose.substr(0, 3), database), &database,
             {{"snapshot_query", "\"SELECT id, display_name AS displayName FROM accounts\""},
              {"snapshot_key", "\"id\""},
              {"batch_size", "200"}}} {
    spec.extra["snapshot_path"] = "\"/" + spec.name + "/control-snapshot\"";
    for (const auto& [key, value] : sourceKeys) spec.extra[key] = fmt::format(fmt::runtime(value), fmt::arg("name", spec.name));
    config = writeConfig({spec}, extraToml);
    migrate(config);
    Status s = database.sql().exec(
        "CREATE TABLE accounts (id BIGINT UNSIGNED PRIMARY KEY, display_name VARCHAR(191) NULL) "
        "DEFAULT CHARSET=utf8mb4");
    if (!s.isOk()) throw std::runtime_error(s.message());
  }

  // One business change and its outbox row, in one transaction.
  void change(db::Connection& conn, uint64_t id, const std::optional<std::string>& name, bool remove = false) {
    std::string value = name ? conn.quote(*name) : "NULL";
    std::vector<std::string> sql{"START TRANSACTION"};
    if (remove) {
      sql.push_back(fmt::format("DELETE FROM accounts WHERE id = {}", id));
      sql.push_back(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('account', '{}', 'delete', NULL)",
                                spec.outboxTable(), id));
    } else {
      sql.push_back(fmt::format("INSERT INTO accounts VALUES ({0}, {1}) ON DUPLICATE KEY UPDATE display_name = {1}", id, value));
      sql.push_back(fmt::format(
          "INSERT INTO {} (entity_type, entity_key, op, payload) SELECT 'account', id, 'upsert', "
          "JSON_OBJECT('id', id, 'displayName', display_name) FROM accounts WHERE id = {}",
          spec.outboxTable(), id));
    }
    sql.push_back("COMMIT");
    for (const auto& q : sql) {
      Status s = conn.exec(q);
      if (!s.isOk()) throw std::runtime_error(s.message());
    }
  }

  // The table as the replica should hold it: key -> display_name.
  std::map<std::string, std::optional<std::string>> table() {
    std::map<std::string, std::optional<std::string>> out;
    auto rows = database.sql().query("SELECT id, display_name FROM accounts");
    if (!rows.isOk()) throw std::runtime_error(rows.status().message());
    while (rows->next()) {
      auto name = rows->optText(1);
      out[std::string(rows->text(0))] = name ? std::optional<std::string>(std::string(*name)) : std::nullopt;
    }
    return out;
  }

  uint64_t published() { return database.state(spec.name).publishedThrough; }

  // The version the last change written gets: one outbox row a change, versions dense from 1 (an
  // epoch bump takes none), given by the bridge when it reads the row.
  uint64_t lastVersion() { return database.scalar("SELECT COUNT(*) FROM " + spec.outboxTable()); }

  // The records of a consumer's --dump that holds what the table holds now ("records":[...]).
  std::string dumpRecords() {
    std::string out = "\"records\":[";
    bool first = true;
    for (const auto& [id, name] : table()) {
      out += fmt::format("{}{{\"id\":{},\"displayName\":", first ? "" : ",", id);
      first = false;
      if (name) {
        out.push_back('"');
        appendJsonEscaped(out, *name);
        out.push_back('"');
      } else {
        out += "null";
      }
      out.push_back('}');
    }
    return out + "]";
  }

  // Writes accounts 1..count ("Account N"), starts `bridge`, waits until they are published and
  // returns the bridge's HTTP port.
  int seedAndStart(BridgeProcess& bridge, uint64_t count) {
    auto conn = database.connect();
    for (uint64_t i = 1; i <= count; ++i) change(*conn, i, fmt::format("Account {}", i));
    bridge.start();
    int port = bridge.httpPort();
    if (!waitUntil([&] { return published() == count; }, std::chrono::seconds(20))) {
      throw std::runtime_error("the seed was not published:\n" + bridge.log());
    }
    return port;
  }
};

}  // namespace outbox::test

#pragma once

// The settled stream's tests on the real stack (integration/settle_test.cpp,
// fault/settle_crash_test.cpp): a producer changing keys, and the two streams read back and held
// to the contract (README, "The settled stream").

#include <boost/test/unit_test.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness.h"

namespace outbox::test {

// One INSERT (one transaction) changing each of `keys` once, as item k<key>.
inline void changeKeys(db::Connection& conn, const std::string& table, const std::vector<int>& keys, int tag) {
  if (keys.empty()) return;
  std::string sql = fmt::format("INSERT INTO `{}` (entity_type, entity_key, op, payload) VALUES ", table);
  for (size_t i = 0; i < keys.size(); ++i) {
    sql += fmt::format("{}('item', 'k{}', 'upsert', '{{\"k\":{},\"t\":{}}}')", i ? "," : "", keys[i], keys[i], tag);
  }
  Status s = conn.exec(sql);
  if (!s.isOk()) throw std::runtime_error("change keys: " + s.message());
}

// A change or a settled message, as read back.
struct Change {
  std::string key;
  uint64_t version = 0;
  int64_t storedNanos = 0;
  std::string data;
};
struct SettledMsg {
  std::string key;
  uint64_t version = 0, from = 0, count = 0, through = 0, seen = 0;
  int64_t storedNanos = 0;
  std::string subject, data;
  uint64_t epoch = 0;
};

inline std::string settledStreamOf(const SourceSpec& s) { return s.stream() + "_SETTLED"; }
inline std::string settledPrefixOf(const SourceSpec& s) { return "control." + s.name + "_settled"; }

// A source that settles (its keys `settle` and `settle_max` as TOML values), its bridge, a producer
// on its outbox and a reader of its streams; the streams go with it.
struct SettlingSource {
  TestDatabase database;
  SourceSpec source;
  std::string config;
  BridgeProcess bridge;
  std::unique_ptr<db::Connection> producer;
  StreamReader reader;

  SettlingSource(const std::string& tag, const std::string& settle, const std::string& settleMax,
                 const std::string& extraToml = "")
      : database(tag),
        source{uniqueName(tag, database), &database, {{"settle", settle}, {"settle_max", settleMax}}},
        config(writeConfig({source}, extraToml)),
        bridge(config),
        producer(database.connect()) {
    migrate(config);
  }
  ~SettlingSource() {
    (void)reader.js().deleteStream(source.stream());
    (void)reader.js().deleteStream(settledStreamOf(source));
  }
  void requirePublished(uint64_t through) {
    BOOST_REQUIRE_MESSAGE(
        waitUntil([&] { return database.state(source.name).publishedThrough == through; }, std::chrono::seconds(20)),
        bridge.log());
  }
};

inline std::vector<Change> mainChanges(StreamReader& reader, const SourceSpec& s) {
  std::vector<Change> out;
  for (const auto& m : reader.readAll(s.stream(), "control." + s.name)) {
    out.push_back({m.headers.at("Outbox-Entity-Key"), headerU64(m, "Outbox-Version"), m.timestampNanos, m.data});
  }
  return out;
}

inline std::vector<SettledMsg> settledMessages(StreamReader& reader, const SourceSpec& s) {
  std::vector<SettledMsg> out;
  if (!reader.exists(settledStreamOf(s))) return out;
  for (const auto& m : reader.readAll(settledStreamOf(s), settledPrefixOf(s))) {
    out.push_back({m.headers.at("Outbox-Entity-Key"), headerU64(m, "Outbox-Version"),
                   headerU64(m, "Outbox-Settled-From"), headerU64(m, "Outbox-Settled-Count"),
                   headerU64(m, "Outbox-Settled-Through"), headerU64(m, "Outbox-Settled-Seen"), m.timestampNanos,
                   m.subject, m.data, headerU64(m, "Outbox-Epoch")});
  }
  return out;
}

// Whether the main stream stood still after `from` and before `to` (stored times, ns): two of
// `changes` stored one after the other, the first in [from, to), at least `still` apart. The
// settle tests' account of a machine that stalled (the relay, nats-server or the producer).
inline bool mainStoodStill(const std::vector<Change>& changes, int64_t from, int64_t to,
                           std::chrono::nanoseconds still) {
  for (size_t i = 0; i + 1 < changes.size(); ++i) {
    if (changes[i].storedNanos < from || changes[i].storedNanos >= to) continue;
    if (std::chrono::nanoseconds(changes[i + 1].storedNanos - changes[i].storedNanos) >= still) return true;
  }
  return false;
}

// What holds of every settled stream whatever happened (README, "The settled stream"): per key,
// versions rise, none twice, and each message stands for exactly the key's changes since its
// previous one (From the first of them, Count how many); Through and Seen never move back.
// Returns "" or the first thing wrong.
inline std::string checkSettledWhole(const std::vector<Change>& changes, const std::vector<SettledMsg>& settled) {
  std::map<std::string, std::vector<uint64_t>> versionsOf;
  for (const auto& c : changes) versionsOf[c.key].push_back(c.version);
  std::map<std::string, uint64_t> lastOf;
  std::set<uint64_t> versions;
  uint64_t through = 0, seen = 0;
  for (const auto& m : settled) {
    if (!versions.insert(m.version).second) return fmt::format("version {} settled twice", m.version);
    if (m.version <= lastOf[m.key]) {
      return fmt::format("key {}: version {} after {}", m.key, m.version, lastOf[m.key]);
    }
    uint64_t from = 0, count = 0;
    for (uint64_t v : versionsOf[m.key]) {
      if (v <= lastOf[m.key] || v > m.version) continue;
      if (from == 0) from = v;
      ++count;
    }
    if (m.from != from || m.count != count) {
      return fmt::format("key {} settled at {}: From {} Count {}, the changes since its last say {} and {}", m.key,
                         m.version, m.from, m.count, from, count);
    }
    if (m.through < through || m.seen < seen || m.through > m.seen) {
      return fmt::format("version {}: Through {} Seen {} after {} and {}", m.version, m.through, m.seen, through, seen);
    }
    through = m.through;
    seen = m.seen;
    lastOf[m.key] = m.version;
  }
  return "";
}

}  // namespace outbox::test

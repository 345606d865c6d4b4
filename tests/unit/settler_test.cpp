#define BOOST_TEST_MODULE settler
#include "settle/settler.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "settle/settled_message.h"

using namespace std::chrono_literals;
using outbox::Clock;
using outbox::MainMessage;
using outbox::Settled;
using outbox::SettleKey;
using outbox::Settler;

namespace {

const Clock::TimePoint t0{std::chrono::hours(1)};

Settler::Options options(std::chrono::milliseconds settle = 2s,
                         std::chrono::milliseconds settleMax = 10s, size_t maxKeys = 100'000) {
  return Settler::Options{settle, settleMax, maxKeys};
}

SettleKey key(const std::string& k) { return SettleKey{"account", k}; }

MainMessage message(const std::string& k, uint64_t version, const std::string& op = "upsert") {
  MainMessage m;
  m.subject = "control.s.account";
  if (op == "upsert") m.data = "{\"v\":" + std::to_string(version) + "}";
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"Nats-Msg-Id", "s:" + std::to_string(version)},
           {"Nats-Expected-Last-Sequence", std::to_string(version - 1)},
           {"Outbox-Entity-Type", "account"},
           {"Outbox-Entity-Key", k},
           {"Outbox-Version", std::to_string(version)},
           {"Outbox-Op", op}}) {
    outbox::appendHeader(m.headers, name, value);
  }
  return m;
}

// Feeds `k`'s change `version` at `at`.
void feed(Settler& s, const std::string& k, uint64_t version, Clock::TimePoint at,
          const std::string& op = "upsert") {
  s.changed(key(k), version, message(k, version, op), at);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_key_settles_once_quiet_for_settle_and_the_window_slides) {
  Settler s(options());
  feed(s, "a", 1, t0);
  feed(s, "a", 2, t0 + 1500ms);
  feed(s, "a", 3, t0 + 3000ms);  // each change moves the due time: 3 s + 2 s
  BOOST_TEST(s.due(t0 + 2000ms).empty());
  BOOST_TEST(s.due(t0 + 4999ms).empty());
  BOOST_TEST((*s.nextDue() == t0 + 5000ms));
  auto out = s.due(t0 + 5000ms);
  BOOST_TEST_REQUIRE(out.size() == 1u);
  BOOST_TEST(out[0].version == 3u);
  BOOST_TEST(out[0].from == 1u);
  BOOST_TEST(out[0].count == 3u);
  BOOST_TEST(out[0].message.data == "{\"v\":3}");
  BOOST_TEST(!out[0].early);
  BOOST_TEST(s.pendingKeys() == 0u);
  BOOST_TEST(!s.nextDue().has_value());
  BOOST_TEST(s.counters().squashed == 2u);
}

BOOST_AUTO_TEST_CASE(a_key_changed_without_pause_is_settled_at_least_every_settle_max) {
  Settler s(options(2s, 10s));
  std::vector<Settled> out;
  std::map<uint64_t, Clock::TimePoint> fedAt;
  uint64_t version = 0;
  // 3 × settle_max, a change every 500 ms; the settle loop asks every 100 ms.
  for (auto t = t0; t <= t0 + 30s; t += 100ms) {
    if ((t - t0) % 500ms == 0ms) {
      feed(s, "a", ++version, t);
      fedAt[version] = t;
    }
    for (auto& m : s.due(t)) {
      // Made settle_max after its first change, not later.
      BOOST_TEST((t - fedAt.at(m.from) <= 10s));
      out.push_back(std::move(m));
    }
  }
  BOOST_TEST_REQUIRE(out.size() >= 3u);
  uint64_t next = 1;
  for (const auto& m : out) {
    BOOST_TEST(m.from == next);  // each stands for every change since the one before
    BOOST_TEST(m.count == m.version - m.from + 1);
    next = m.version + 1;
  }
  // A change every 500 ms never leaves the key quiet: each message went at settle_max.
  for (size_t i = 1; i < out.size(); ++i) {
    BOOST_TEST(out[i].from - out[i - 1].from == 20u);  // 10 s of changes, 2 a second
  }
}

BOOST_AUTO_TEST_CASE(a_delete_is_a_change_like_any_other) {
  Settler s(options());
  feed(s, "a", 1, t0);
  feed(s, "a", 2, t0 + 100ms, "delete");
  auto out = s.due(t0 + 2100ms);
  BOOST_TEST_REQUIRE(out.size() == 1u);
  BOOST_TEST(out[0].version == 2u);
  BOOST_TEST(out[0].count == 2u);
  BOOST_TEST(out[0].message.data.empty());
  auto headers = outbox::settledHeaders(out[0]);
  BOOST_TEST(
      (std::find(headers.begin(), headers.end(),
                 std::pair<std::string, std::string>{"Outbox-Op", "delete"}) != headers.end()));
  // And a change after the delete starts the key again.
  feed(s, "a", 3, t0 + 5s);
  out = s.due(t0 + 8s);
  BOOST_TEST_REQUIRE(out.size() == 1u);
  BOOST_TEST(out[0].from == 3u);
  BOOST_TEST(out[0].count == 1u);
}

BOOST_AUTO_TEST_CASE(from_and_count_are_the_keys_own_changes_across_bursts) {
  Settler s(options());
  feed(s, "a", 1, t0);
  feed(s, "b", 2, t0 + 10ms);
  feed(s, "a", 3, t0 + 20ms);
  feed(s, "b", 4, t0 + 30ms);
  feed(s, "a", 5, t0 + 40ms);
  auto first = s.due(t0 + 3s);
  BOOST_TEST_REQUIRE(first.size() == 2u);
  BOOST_TEST(first[0].key.entityKey == "b");  // quiet first
  BOOST_TEST(first[0].from == 2u);
  BOOST_TEST(first[0].version == 4u);
  BOOST_TEST(first[0].count == 2u);
  BOOST_TEST(first[1].key.entityKey == "a");
  BOOST_TEST(first[1].from == 1u);
  BOOST_TEST(first[1].version == 5u);
  BOOST_TEST(first[1].count == 3u);
  // The second burst: From is the first change after the last message, not the key's first ever.
  feed(s, "b", 6, t0 + 10s);
  feed(s, "a", 7, t0 + 10s + 10ms);
  feed(s, "a", 8, t0 + 10s + 20ms);
  auto second = s.due(t0 + 13s);
  BOOST_TEST_REQUIRE(second.size() == 2u);
  BOOST_TEST(second[0].key.entityKey == "b");
  BOOST_TEST(second[0].from == 6u);
  BOOST_TEST(second[0].count == 1u);
  BOOST_TEST(second[1].from == 7u);
  BOOST_TEST(second[1].count == 2u);
}

BOOST_AUTO_TEST_CASE(a_change_after_the_due_time_starts_the_next_message_even_unasked) {
  // The settle loop was late (or this is a replay): the key's quiet 2 s had passed when the
  // next change came, so the first burst still settles alone, at its own last change.
  Settler s(options());
  feed(s, "a", 1, t0);
  feed(s, "a", 2, t0 + 2500ms);
  auto out = s.due(t0 + 2500ms);
  BOOST_TEST_REQUIRE(out.size() == 1u);
  BOOST_TEST(out[0].version == 1u);
  out = s.due(t0 + 5s);
  BOOST_TEST_REQUIRE(out.size() == 1u);
  BOOST_TEST(out[0].version == 2u);
  BOOST_TEST(out[0].from == 2u);
}

BOOST_AUTO_TEST_CASE(past_max_keys_the_oldest_pending_keys_settle_early) {
  Settler s(options(2s, 10s, 3));
  feed(s, "a", 1, t0);
  feed(s, "b", 2, t0 + 1ms);
  feed(s, "a", 3, t0 + 2ms);
  feed(s, "c", 4, t0 + 3ms);
  BOOST_TEST(s.through() == 0u);
  feed(s, "d", 5, t0 + 4ms);  // a fourth key: "a" (first version 1) goes
  BOOST_TEST(s.pendingKeys() == 3u);
  feed(s, "e", 6, t0 + 5ms);  // and "b"
  BOOST_TEST(s.pendingKeys() == 3u);
  BOOST_TEST(s.counters().settledEarly == 2u);
  BOOST_TEST(s.through() == 3u);           // "c" (4) is the oldest pending now
  BOOST_TEST((*s.nextDue() == t0 + 4ms));  // due since the change that settled the first of them
  auto out = s.due(t0 + 6ms);
  BOOST_TEST_REQUIRE(out.size() == 2u);
  BOOST_TEST(out[0].key.entityKey == "a");
  BOOST_TEST(out[0].early);
  BOOST_TEST(out[0].version == 3u);
  BOOST_TEST(out[0].count == 2u);
  BOOST_TEST(out[0].through == 1u);  // "b" still pending when "a" went
  BOOST_TEST(out[1].key.entityKey == "b");
  BOOST_TEST(out[1].through == 3u);
  // The rest settle on time.
  out = s.due(t0 + 3s);
  BOOST_TEST(out.size() == 3u);
  BOOST_TEST(s.through() == 6u);
}

BOOST_AUTO_TEST_CASE(a_version_already_taken_is_ignored) {
  Settler s(options());
  feed(s, "a", 5, t0);
  feed(s, "a", 5, t0 + 1ms);  // republished after the main stream lost its tail: the same change
  feed(s, "b", 3, t0 + 2ms);
  auto out = s.due(t0 + 3s);
  BOOST_TEST_REQUIRE(out.size() == 1u);
  BOOST_TEST(out[0].count == 1u);
  BOOST_TEST(s.seen() == 5u);
}

BOOST_AUTO_TEST_CASE(published_gives_the_settle_delay_once) {
  Settler s(options());
  feed(s, "a", 1, t0);
  feed(s, "a", 2, t0 + 500ms);
  auto out = s.due(t0 + 2500ms);
  BOOST_TEST_REQUIRE(out.size() == 1u);
  BOOST_TEST(s.inFlight() == 1u);
  auto delay = s.published(2, t0 + 2510ms);
  BOOST_TEST_REQUIRE(delay.has_value());
  BOOST_TEST((*delay == 2010ms));
  BOOST_TEST(!s.published(2, t0 + 2600ms).has_value());
  BOOST_TEST(s.inFlight() == 0u);
}

// Random traffic over a few keys: every message's Through is below every version not yet stood
// for by it or a message before it, and trails what was taken in settle_max ago.
BOOST_AUTO_TEST_CASE(through_never_passes_an_unsettled_version_and_trails_by_at_most_settle_max) {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    Settler s(options(2s, 8s, seed % 2 == 0 ? 4 : 100));
    std::map<uint64_t, std::string> keyOf;  // every version fed
    std::map<uint64_t, Clock::TimePoint> fedAt;
    std::set<uint64_t> covered;  // versions stood for by a message made
    uint64_t firstUncovered = 1;
    std::map<std::string, uint64_t> lastSettled;  // per key
    uint64_t version = 0, lastThrough = 0, lastSeen = 0;
    std::uniform_int_distribution<int> keyPick(0, 7), gap(0, 900);
    auto t = t0;
    for (int step = 0; step < 3000; ++step) {
      t += std::chrono::milliseconds(gap(rng));
      const std::string k(1, static_cast<char>('a' + keyPick(rng)));
      feed(s, k, ++version, t);
      keyOf[version] = k;
      fedAt[version] = t;
      for (const auto& m : s.due(t)) {
        // Per key: in version order, each from the change after the last one.
        uint64_t expectFrom = version + 1;
        for (auto it = keyOf.upper_bound(lastSettled[m.key.entityKey]); it != keyOf.end(); ++it) {
          if (it->second == m.key.entityKey) {
            expectFrom = it->first;
            break;
          }
        }
        BOOST_TEST(m.from == expectFrom);
        uint64_t count = 0;
        for (auto it = keyOf.find(m.from); it != keyOf.end() && it->first <= m.version; ++it) {
          if (it->second == m.key.entityKey) {
            covered.insert(it->first);
            ++count;
          }
        }
        BOOST_TEST(m.count == count);
        lastSettled[m.key.entityKey] = m.version;
        BOOST_TEST(m.through >= lastThrough);  // never moves back
        BOOST_TEST(m.seen >= lastSeen);
        BOOST_TEST(m.seen >= m.version);
        BOOST_TEST(m.through <= m.seen);
        lastThrough = m.through;
        lastSeen = m.seen;
        // Every version at or below Through is stood for by this message or one before it.
        while (covered.count(firstUncovered)) ++firstUncovered;
        if (m.through >= firstUncovered) {
          BOOST_FAIL("seed " << seed << ": version " << firstUncovered << " at or below Through "
                             << m.through << " is unsettled");
        }
      }
      // What was taken in settle_max (8 s) ago or earlier is at or below through() now.
      for (auto it = fedAt.begin(); it != fedAt.end() && it->second <= t - 8s; ++it) {
        if (it->first > s.through()) {
          BOOST_FAIL("seed " << seed << ": version " << it->first
                             << ", taken at least 8 s ago, is above through() " << s.through());
        }
      }
      while (!fedAt.empty() && fedAt.begin()->second <= t - 8s) fedAt.erase(fedAt.begin());
    }
  }
}

BOOST_AUTO_TEST_CASE(the_settled_message_carries_the_main_headers_without_its_fences) {
  Settler s(options());
  feed(s, "a", 7, t0);
  auto out = s.due(t0 + 2s);
  BOOST_TEST_REQUIRE(out.size() == 1u);
  auto headers = outbox::settledHeaders(out[0]);
  std::map<std::string, std::string> h(headers.begin(), headers.end());
  // The main stream's Msg-Id and fence would make the settled publish fail (or dedup it away).
  BOOST_TEST(!h.count("Nats-Msg-Id"));
  BOOST_TEST(!h.count("Nats-Expected-Last-Sequence"));
  BOOST_TEST(h.at("Outbox-Version") == "7");
  BOOST_TEST(h.at("Outbox-Settled-From") == "7");
  BOOST_TEST(h.at("Outbox-Settled-Count") == "1");
  BOOST_TEST(h.at("Outbox-Settled-Through") == "7");
  BOOST_TEST(h.at("Outbox-Settled-Seen") == "7");
  auto mark = outbox::settledMark(h);
  BOOST_TEST_REQUIRE(mark.has_value());
  BOOST_TEST(mark->key.entityKey == "a");
  BOOST_TEST(mark->version == 7u);
  h.erase("Outbox-Settled-Seen");
  BOOST_TEST(!outbox::settledMark(h).has_value());
  BOOST_TEST(outbox::settledMsgId("s", 7) == "s:settled:7");
  BOOST_TEST(outbox::settledSubject("control.s.account.42", "control.s") ==
             "control.s_settled.account.42");
}

BOOST_AUTO_TEST_CASE(a_main_stream_message_reads_as_a_change) {
  std::map<std::string, std::string> h = {{"Nats-Msg-Id", "s:9"},
                                          {"nats-expected-last-msg-id", "s:8"},
                                          {"Outbox-Entity-Type", "acc"},
                                          {"Outbox-Entity-Key", "k 1"},
                                          {"Outbox-Version", "9"},
                                          {"Outbox-Op", "upsert"},
                                          {"X-Trace", "t"}};
  auto c = outbox::mainChange("control.s.acc", "{}", h);
  BOOST_TEST_REQUIRE(c.has_value());
  BOOST_TEST(c->version == 9u);
  BOOST_TEST((c->key == SettleKey{"acc", "k 1"}));
  auto pairs = outbox::headerPairs(c->message.headers);
  BOOST_TEST(pairs.size() == 5u);  // the two Nats-* left out, whatever their case
  BOOST_TEST(
      (std::find(pairs.begin(), pairs.end(),
                 std::pair<std::string, std::string>{"Outbox-Entity-Key", "k 1"}) != pairs.end()));
  h["Outbox-Version"] = "9x";
  BOOST_TEST(!outbox::mainChange("control.s.acc", "{}", h).has_value());
}

BOOST_AUTO_TEST_CASE(a_header_block_keeps_names_values_and_order) {
  std::string block;
  outbox::appendHeader(block, "Outbox-Entity-Key", "a: b");
  outbox::appendHeader(block, "NATS-Expected-Last-Sequence", "3");
  outbox::appendHeader(block, "X-Note", "two\r\nlines");
  outbox::appendHeader(block, "X-Empty", "");
  auto pairs = outbox::headerPairs(block);
  BOOST_TEST_REQUIRE(pairs.size() == 3u);
  BOOST_TEST(pairs[0].first == "Outbox-Entity-Key");
  BOOST_TEST(pairs[0].second == "a: b");  // the first ": " ends the name
  BOOST_TEST(pairs[1].second == "two  lines");
  BOOST_TEST(pairs[2].first == "X-Empty");
  BOOST_TEST(pairs[2].second == "");
}

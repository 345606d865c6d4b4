#define BOOST_TEST_MODULE settle
#include <boost/test/unit_test.hpp>

// The settled stream wired into the bridge (issue 36; README, "The settled stream"): a producer's
// bursts of changes become one settled message per key once the key is quiet, and a key that
// never goes quiet is settled at least every settle_max. The real MariaDB and nats-server.

#include <algorithm>
#include <numeric>
#include <random>
#include <thread>

#include "settle_support.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

constexpr int kKeys = 100;

}  // namespace

// Four bursts over 100 keys, each six transactions 50 ms apart changing a random half of the
// keys ten times each (10,200 changes in all; settle 1 s leaves room for a loaded machine), then a quiet
// gap: after each gap the settled stream holds one new message per key the burst changed, with the
// burst's last version of the key and its body, From its first and Count its changes, stored at
// least settle after that change. A key settles twice in a burst only where it was quiet for
// settle by the relay's clock (its acks), which a test cannot read, so where what it can read shows
// why: the main stream stored the key's two changes settle apart (less kAckSlack), or stored
// nothing for kStill in the burst, after the first of them and before the settled message (the
// machine, the relay or nats-server stood still: CI split a burst so once, the relay a second
// behind; a stall with the second change stored and its ack not yet taken looks like this).
BOOST_AUTO_TEST_CASE(each_burst_settles_once_per_key_at_its_last_change) {
  constexpr auto kSettle = 1s;
  constexpr auto kAckSlack = 300ms;
  constexpr auto kStill = 500ms;
  SettlingSource s("settleb", "\"1s\"", "\"10s\"");
  s.bridge.start();
  const int port = s.bridge.httpPort();
  std::mt19937 rng(36);
  uint64_t published = 0;
  size_t settledBefore = 0;
  size_t splits = 0;
  for (int burst = 0; burst < 4; ++burst) {
    std::map<std::string, std::vector<Change>> burstChanges;  // the key's changes of this burst, oldest first
    const uint64_t firstVersion = published + 1;
    for (int tx = 0; tx < 6; ++tx) {
      std::vector<int> keys(kKeys);
      std::iota(keys.begin(), keys.end(), 0);
      std::shuffle(keys.begin(), keys.end(), rng);
      keys.resize(kKeys / 2 - static_cast<size_t>(burst * 5));
      std::vector<int> changes;  // each key of the transaction ten times: 10,200 changes in all
      for (int again = 0; again < 10; ++again) changes.insert(changes.end(), keys.begin(), keys.end());
      changeKeys(*s.producer, s.source.outboxTable(), changes, burst * 100 + tx);
      published += changes.size();
      std::this_thread::sleep_for(50ms);
    }
    s.requirePublished(published);
    const auto main = mainChanges(s.reader, s.source);
    for (const auto& c : main) {
      if (c.version >= firstVersion) burstChanges[c.key].push_back(c);
    }
    // The quiet gap: every key changed in the burst settles at its last change.
    auto settledAtLast = [&] {
      size_t keys = 0;
      for (const auto& m : settledMessages(s.reader, s.source)) {
        auto it = burstChanges.find(m.key);
        keys += it != burstChanges.end() && it->second.back().version == m.version;
      }
      return keys;
    };
    BOOST_REQUIRE_MESSAGE(waitUntil([&] { return settledAtLast() == burstChanges.size(); }, 10s),
                          "burst " << burst << ": " << settledAtLast() << " of " << burstChanges.size()
                                   << " keys settled at their last change\n"
                                   << s.bridge.log());
    std::this_thread::sleep_for(1200ms);  // longer than settle: a second message would be there now
    const auto settled = settledMessages(s.reader, s.source);
    std::map<std::string, std::vector<const SettledMsg*>> settledOf;
    for (size_t i = settledBefore; i < settled.size(); ++i) {
      BOOST_REQUIRE_MESSAGE(burstChanges.count(settled[i].key) == 1,
                            "burst " << burst << ": key " << settled[i].key << " settled, not changed");
      settledOf[settled[i].key].push_back(&settled[i]);
    }
    for (const auto& [key, changes] : burstChanges) {
      BOOST_TEST_CONTEXT("burst " << burst << ", key " << key) {
        const auto& messages = settledOf[key];
        BOOST_REQUIRE(!messages.empty());
        BOOST_TEST(messages.front()->from == changes.front().version);
        BOOST_TEST(messages.back()->version == changes.back().version);
        for (const SettledMsg* m : messages) {
          auto at = std::find_if(changes.begin(), changes.end(), [&](const Change& c) { return c.version == m->version; });
          BOOST_REQUIRE(at != changes.end());
          // The main message's body, under the settled subjects, stored settle after the change
          // at the earliest (its due time is settle after the relay took the change's ack).
          BOOST_TEST(m->subject == settledPrefixOf(s.source) + ".item");
          BOOST_TEST(m->data == at->data);
          const int64_t waitedMs = (m->storedNanos - at->storedNanos) / 1'000'000;
          BOOST_TEST(waitedMs >= kSettle / 1ms - 5, "settled " << waitedMs << " ms after its change");
          if (m == messages.back()) break;
          BOOST_REQUIRE(at + 1 != changes.end());
          const int64_t quietMs = ((at + 1)->storedNanos - at->storedNanos) / 1'000'000;
          // (The quiet after the burst's last message is no standing still: nothing follows it in `main`.)
          const bool stoodStill = mainStoodStill(main, at->storedNanos, m->storedNanos, kStill);
          BOOST_TEST((quietMs >= (kSettle - kAckSlack) / 1ms || stoodStill),
                     "settled at " << m->version << " though changed again at " << (at + 1)->version << " "
                                   << quietMs << " ms later, and the main stream did not stand still for "
                                   << kStill / 1ms << " ms before the settled message");
          ++splits;
        }
      }
    }
    settledBefore = settled.size();
    std::this_thread::sleep_for(100ms);
  }
  if (splits > 0) BOOST_TEST_MESSAGE(splits << " bursts of a key split in two, each where it was quiet for settle");
  const auto changes = mainChanges(s.reader, s.source);
  const auto settled = settledMessages(s.reader, s.source);
  BOOST_TEST(checkSettledWhole(changes, settled) == "");
  // The metrics say the same.
  BOOST_TEST(sourceMetric(port, "outbox_settled_messages_total", s.source.name) == static_cast<double>(settled.size()));
  BOOST_TEST(sourceMetric(port, "outbox_settle_squashed_total", s.source.name) ==
             static_cast<double>(published - settled.size()));
  BOOST_TEST(sourceMetric(port, "outbox_settle_pending_keys", s.source.name) == 0.0);
  BOOST_TEST(sourceMetric(port, "outbox_settled_early_total", s.source.name) == 0.0);
  BOOST_TEST(s.bridge.stop() == 0);
}

// One key changed every 50 ms for more than three times settle_max is never quiet for settle, yet
// it is settled at least every settle_max: each settled message came no later than settle_max
// (and a margin of 1 s for the two streams' acks on a loaded machine; without settle_max the
// first would come only once the key stops, 5.3 s in) after the first change it stands for.
BOOST_AUTO_TEST_CASE(a_key_that_never_goes_quiet_settles_at_least_every_settle_max) {
  SettlingSource s("settlem", "\"500ms\"", "\"1500ms\"");
  s.bridge.start();
  // The bridge leads and settles before the run begins: another key changed once, and settled.
  changeKeys(*s.producer, s.source.outboxTable(), {1}, 0);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return settledMessages(s.reader, s.source).size() == 1; }, 20s),
                        s.bridge.log());
  const auto until = std::chrono::steady_clock::now() + 3 * 1500ms + 800ms;
  int changed = 1;
  while (std::chrono::steady_clock::now() < until) {
    changeKeys(*s.producer, s.source.outboxTable(), {7}, changed++);
    std::this_thread::sleep_for(50ms);
  }
  s.requirePublished(static_cast<uint64_t>(changed));
  BOOST_REQUIRE(waitUntil([&] {
    auto settled = settledMessages(s.reader, s.source);
    return !settled.empty() && settled.back().version == static_cast<uint64_t>(changed);
  }, 10s));
  const auto changes = mainChanges(s.reader, s.source);
  auto settled = settledMessages(s.reader, s.source);
  BOOST_TEST(checkSettledWhole(changes, settled) == "");
  settled.erase(settled.begin());  // key 1's
  // Three while the key changed (5.3 s: 1.5, 3 and 4.5 s after its first change), and the last
  // once it stopped.
  BOOST_TEST(settled.size() >= 4u);
  std::map<uint64_t, int64_t> storedAt;
  for (const auto& c : changes) storedAt[c.version] = c.storedNanos;
  // Where the main stream stood still (the relay, nats-server or this producer stalled) a message
  // may come late, or a single change be quiet for settle: changes are 50 ms apart otherwise.
  for (size_t i = 0; i + 1 < settled.size(); ++i) {  // the last one settled when the key went quiet
    const SettledMsg& m = settled[i];
    const double waited = static_cast<double>(m.storedNanos - storedAt.at(m.from)) / 1e9;
    BOOST_TEST((waited <= 1.5 + 1.0 || mainStoodStill(changes, storedAt.at(m.from), m.storedNanos, 500ms)),
               "message " << i << " settled " << waited << " s after its first change");
    // It stands for a run of changes, not one.
    BOOST_TEST((m.count > 1u || mainStoodStill(changes, storedAt.at(m.version), m.storedNanos, 300ms)),
               "message " << i << " stands for one change");
  }
  BOOST_TEST(s.bridge.stop() == 0);
}

// As for the main stream: a settled stream that exists with other subjects is an operator's
// mistake, and the bridge refuses to start (exit 1, naming it) rather than settle beside it.
BOOST_AUTO_TEST_CASE(a_settled_stream_with_other_subjects_stops_the_start) {
  SettlingSource s("settles", "\"1s\"", "\"5s\"");
  nats::StreamSettings other;
  other.name = settledStreamOf(s.source);
  other.subject = "elsewhere." + s.source.name + ".>";
  BOOST_REQUIRE(s.reader.js().ensureStream(other).isOk());
  const CommandResult r = runCommand(fmt::format("timeout 30 {} run --config {}", stack().bridgeBinary, s.config));
  BOOST_TEST(r.exitCode == 1);
  BOOST_TEST((r.out + r.err).find("settled stream " + settledStreamOf(s.source)) != std::string::npos, r.out + r.err);
}

// An epoch bump (README, "The settled stream"): the settled stream goes on. Keys changed just
// before the bump and again after it settle once, with the new epoch's message and a From in the
// old one; keys changed only before it settle once with theirs. The bump ends the relay's session,
// so the settle thread recovers the pending keys from the streams in between.
BOOST_AUTO_TEST_CASE(a_key_pending_across_an_epoch_bump_settles_once_with_the_new_epochs_message) {
  // settle 8 s: the bump takes a few seconds to reach the leader (measured: up to 5 s), and the
  // keys changed before it must still be pending when they change again after it.
  SettlingSource s("settlee", "\"8s\"", "\"30s\"");
  s.bridge.start();
  changeKeys(*s.producer, s.source.outboxTable(), {4, 5}, 0);
  s.requirePublished(2);
  changeKeys(*s.producer, s.source.outboxTable(), {0, 1, 2, 3}, 1);
  s.requirePublished(6);
  auto bump = runBridge({"epoch", "bump", "--config", s.config, "--source", s.source.name, "--reason", "test"});
  BOOST_REQUIRE_MESSAGE(bump.exitCode == 0, bump.err << s.bridge.log());
  changeKeys(*s.producer, s.source.outboxTable(), {0, 1}, 2);
  BOOST_REQUIRE(waitUntil([&] { return mainChanges(s.reader, s.source).size() == 8; }, 20s));
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return settledMessages(s.reader, s.source).size() == 6; }, 30s),
                        s.bridge.log());
  std::this_thread::sleep_for(1s);  // nothing more comes
  const auto changes = mainChanges(s.reader, s.source);
  const auto settled = settledMessages(s.reader, s.source);
  BOOST_TEST(checkSettledWhole(changes, settled) == "");
  BOOST_REQUIRE_EQUAL(settled.size(), 6u);
  std::map<std::string, SettledMsg> after;  // each key's message
  for (const auto& m : settled) after[m.key] = m;
  BOOST_REQUIRE_EQUAL(after.size(), 6u);
  for (const char* key : {"k0", "k1"}) {
    BOOST_TEST_CONTEXT(key) {
      BOOST_TEST(after[key].epoch == 2u);
      BOOST_TEST(after[key].count == 2u);
      BOOST_TEST(after[key].from <= 6u);  // its change of epoch 1
      BOOST_TEST(after[key].version > 6u);
    }
  }
  for (const char* key : {"k2", "k3", "k4", "k5"}) {
    BOOST_TEST_CONTEXT(key) {
      BOOST_TEST(after[key].epoch == 1u);
      BOOST_TEST(after[key].count == 1u);
    }
  }
  BOOST_TEST(s.bridge.stop() == 0);
}

// A purge of the main stream (README, "The settled stream"): keys pending when the leader dies are
// lost to the settled stream if the main stream no longer holds their changes; the new leader says
// so (a warning naming the versions, and the counter), and settles what changes from then on.
BOOST_AUTO_TEST_CASE(a_purge_a_new_leader_cannot_read_back_is_said_and_counted) {
  SettlingSource s("settlep", "\"3s\"", "\"10s\"", "[lease]\nttl = \"2s\"\nheartbeat = \"500ms\"\n");
  s.bridge.start();
  changeKeys(*s.producer, s.source.outboxTable(), {9}, 0);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return settledMessages(s.reader, s.source).size() == 1; }, 20s),
                        s.bridge.log());
  changeKeys(*s.producer, s.source.outboxTable(), {0, 1, 2, 3, 4}, 1);  // versions 2 to 6, pending
  s.requirePublished(6);
  s.bridge.kill();
  BOOST_REQUIRE(s.reader.js().purgeStream(s.source.stream()).isOk());
  s.bridge.start();
  const int port = s.bridge.httpPort();
  changeKeys(*s.producer, s.source.outboxTable(), {5}, 2);  // version 7
  s.requirePublished(7);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return settledMessages(s.reader, s.source).size() == 2; }, 20s),
                        s.bridge.log());
  const auto settled = settledMessages(s.reader, s.source);
  BOOST_TEST(settled[1].key == "k5");
  BOOST_TEST(settled[1].version == 7u);
  BOOST_TEST(s.bridge.log().find("versions 2 to 6 are not in stream " + s.source.stream()) != std::string::npos,
             s.bridge.log());
  BOOST_TEST(sourceMetric(port, "outbox_settle_missing_versions_total", s.source.name) == 5.0);
  BOOST_TEST(s.bridge.stop() == 0);
}

// settle_max_keys bounds the pending keys: 20,000 distinct keys changed within one window with a
// bound of 1,000 settle, the oldest early, each key once at its change; the early ones are
// counted, and the pending keys never pass the bound.
BOOST_AUTO_TEST_CASE(past_settle_max_keys_the_oldest_keys_settle_early_and_are_counted) {
  SettlingSource s("settlek", "\"8s\"", "\"20s\"");
  s.source.extra["settle_max_keys"] = "1000";
  s.config = writeConfig({s.source});
  BridgeProcess bridge(s.config);
  bridge.start();
  const int port = bridge.httpPort();
  insertRows(s.database.sql(), s.source.outboxTable(), 20'000, 0, "item", 100);  // keys 0 to 19999
  const auto inserted = std::chrono::steady_clock::now();  // every change committed: none acked before
  double maxPending = 0;
  BOOST_REQUIRE_MESSAGE(waitUntil([&] {
    maxPending = std::max(maxPending, sourceMetric(port, "outbox_settle_pending_keys", s.source.name));
    return s.reader.state(settledStreamOf(s.source)).messages >= 19'000;
  }, 60s), bridge.log());
  // The last thousand wait for their window (8 s from their acks): they were the newest. Seen
  // sooner than that, the stream holds the early ones alone; later (a loaded machine took that long
  // over the 19,000), some of the thousand may have settled too.
  const uint64_t seen = s.reader.state(settledStreamOf(s.source)).messages;
  if (std::chrono::steady_clock::now() - inserted < 7500ms) {
    BOOST_TEST(seen == 19'000u);
  } else {
    BOOST_TEST_MESSAGE("the early settles took 7.5 s or more: " << seen << " settled when seen");
  }
  BOOST_TEST(maxPending <= 1000.0);
  // Counted as their acks are taken, which may trail the stream's count by a moment (it read
  // 17,142 once, under load).
  waitUntil([&] { return sourceMetric(port, "outbox_settled_early_total", s.source.name) >= 19'000.0; }, 10s);
  BOOST_TEST(sourceMetric(port, "outbox_settled_early_total", s.source.name) == 19'000.0);
  BOOST_REQUIRE(waitUntil([&] { return s.reader.state(settledStreamOf(s.source)).messages == 20'000; }, 20s));
  BOOST_TEST(checkSettledWhole(mainChanges(s.reader, s.source), settledMessages(s.reader, s.source)) == "");
  BOOST_TEST(sourceMetric(port, "outbox_settled_early_total", s.source.name) == 19'000.0);
  BOOST_TEST(bridge.stop() == 0);
}

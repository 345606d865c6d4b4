// Settled messages through the stack's nats-server (docs/design.md, "The settled stream (issue
// 36)"): a Settler restarted from the two streams alone settles each key once. Part of
// settle_streams (settle_streams_test.cpp); SettleFixture is in settle_streams.h.
#include <boost/test/unit_test.hpp>

#include <map>
#include <random>
#include <set>

#include <fmt/format.h>

#include "harness.h"
#include "settle/jetstream_reader.h"
#include "settle/settle_recovery.h"
#include "settle/settled_message.h"
#include "settle/settler.h"
#include "settle_streams.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

// A leader settles some keys and dies; a new one, from what the server holds, settles the rest
// and none of the first again, each key once at its last change with From and Count whole.
BOOST_AUTO_TEST_CASE(settled_messages_through_the_server_restart_a_settler_without_repeating_one) {
  SettleFixture f;
  // Ten keys for 100 changes, ten others for 200 more, the first five now and then among them.
  std::vector<std::string> keys;
  std::mt19937 rng(36);
  for (int i = 0; i < 300; ++i) {
    keys.push_back(fmt::format("k {}", i < 100       ? rng() % 10
                                       : i % 25 == 0 ? rng() % 5
                                                     : 10 + rng() % 10));
  }
  f.publishMain(keys);
  const auto main = f.readAll(f.source.stream, f.source.subjectPrefix);
  BOOST_REQUIRE(main.size() == keys.size());

  // The first leader: changes 10 ms apart on its clock, settle 300 ms; it dies after change 200,
  // the first ten keys settled (some of the first five again, above its last Through), the
  // others pending.
  const Clock::TimePoint t0{std::chrono::hours(1)};
  const Settler::Options options{300ms, 30s, 100'000};
  Settler first(options);
  uint64_t lastSeq = 0;
  std::string lastMsgId;
  for (size_t i = 0; i < 200; ++i) {
    auto c = mainChange(main[i].subject, main[i].data, main[i].headers);
    BOOST_REQUIRE(c.has_value());
    first.changed(c->key, c->version, std::move(c->message), t0 + i * 10ms);
    f.publishSettled(first.due(t0 + i * 10ms), lastSeq, lastMsgId);
  }
  BOOST_REQUIRE(lastSeq > 0);  // some settled before the crash, others still pending

  // The new leader, from the streams alone.
  JetStreamReader settledReader(f.reader.js(), f.settledStream),
      mainReader(f.reader.js(), f.source.stream);
  auto last = lastSettled(settledReader);
  BOOST_TEST_REQUIRE(last.isOk());
  BOOST_TEST_REQUIRE(last->has_value());
  const uint64_t through = (*last)->through;
  Settler second(options);
  second.restart(through);
  auto tailFrom = firstSeqAbove(settledReader, kSettledSeenHeader, through);
  BOOST_TEST_REQUIRE(tailFrom.isOk());
  auto tail = f.reader.js().readRange(f.settledStream, settledPrefix(f.source.subjectPrefix) + ".>",
                                      *tailFrom, lastSeq, 5s);
  BOOST_TEST_REQUIRE(tail.isOk(), tail.status().message());
  BOOST_TEST(!tail->empty());  // messages above the last Through: left out of the replay
  for (const auto& m : *tail) {
    auto mark = settledMark(m.headers);
    BOOST_TEST_REQUIRE(mark.has_value());
    second.alreadySettled(mark->key, mark->version);
  }
  auto replayFrom = firstSeqAbove(mainReader, "Outbox-Version", through);
  BOOST_TEST_REQUIRE(replayFrom.isOk());
  auto replay = f.reader.js().readRange(f.source.stream, f.source.subjectPrefix + ".>", *replayFrom,
                                        main.size(), 5s);
  BOOST_TEST_REQUIRE(replay.isOk(), replay.status().message());
  const auto now = std::chrono::steady_clock::now();
  const int64_t wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  for (const auto& m : *replay) {
    auto c = mainChange(m.subject, m.data, m.headers);
    BOOST_REQUIRE(c.has_value());
    second.changed(c->key, c->version, std::move(c->message),
                   steadyTimeOf(m.timestampNanos, now, wall));
  }
  f.publishSettled(second.due(now + 1h), lastSeq, lastMsgId);

  // Each key settled at its last change once, per key in order, From and Count whole.
  std::map<std::string, std::vector<uint64_t>> versionsOf;
  for (size_t i = 0; i < keys.size(); ++i) versionsOf[keys[i]].push_back(i + 1);
  std::map<std::string, uint64_t> lastOf;
  std::set<uint64_t> seen;
  for (const auto& m : f.readAll(f.settledStream, settledPrefix(f.source.subjectPrefix))) {
    BOOST_TEST(m.headers.at("Nats-Msg-Id") ==
               settledMsgId(f.source.name, headerU64(m, "Outbox-Version")));
    BOOST_TEST(m.subject.rfind(settledPrefix(f.source.subjectPrefix) + ".", 0) == 0u);
    auto mark = settledMark(m.headers);
    BOOST_TEST_REQUIRE(mark.has_value());
    const std::string& key = mark->key.entityKey;
    BOOST_TEST(seen.insert(mark->version).second, "version " << mark->version << " settled twice");
    BOOST_TEST(mark->version > lastOf[key]);
    uint64_t from = 0, count = 0;
    for (uint64_t v : versionsOf[key]) {
      if (v <= lastOf[key] || v > mark->version) continue;
      if (from == 0) from = v;
      ++count;
    }
    BOOST_TEST(headerU64(m, kSettledFromHeader) == from);
    BOOST_TEST(headerU64(m, kSettledCountHeader) == count);
    lastOf[key] = mark->version;
  }
  for (const auto& [key, versions] : versionsOf) BOOST_TEST(lastOf[key] == versions.back(), key);
}

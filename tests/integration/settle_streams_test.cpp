#define BOOST_TEST_MODULE settle_streams
#include <boost/test/unit_test.hpp>

// The settled stream's reads and messages against the stack's nats-server (docs/design.md, "The
// settled stream (issue 36)"): recovery's searches over a real stream with deleted messages and a
// purge, and settled messages that travel through the server and restart a Settler from the two
// streams alone. The relay does not feed a settler yet: the main stream is published here by
// JetStreamPublisher, as the relay does.

#include <fmt/format.h>
#include <nats/nats.h>

#include <map>
#include <random>
#include <set>

#include "harness.h"
#include "relay/jetstream_publisher.h"
#include "settle/jetstream_reader.h"
#include "settle/settle_recovery.h"
#include "settle/settled_message.h"
#include "settle/settler.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

struct SettleFixture {
  SourceConfig source;
  NatsConfig nats;
  std::unique_ptr<nats::Connection> connection;
  std::unique_ptr<JetStreamPublisher> publisher;
  StreamReader reader;
  std::string settledStream;

  SettleFixture() {
    std::random_device rd;
    source.name = fmt::format("st{}", rd() % 1000000);
    source.stream = "CONTROL_" + source.name;
    source.subjectPrefix = "control." + source.name;
    settledStream = source.stream + "_SETTLED";
    nats.url = stack().natsUrl;
    auto conn = nats::Connection::connect(NatsConfig{.url = stack().natsUrl});
    if (!conn.isOk())
      throw std::runtime_error("nats-server is not reachable: " + conn.status().message());
    connection = std::move(conn).value();
    publisher = std::make_unique<JetStreamPublisher>(source, nats, *connection);
    BOOST_REQUIRE(publisher->prepare().isOk());
    nats::StreamSettings settled;
    settled.name = settledStream;
    settled.subject = settledPrefix(source.subjectPrefix) + ".>";
    BOOST_REQUIRE(reader.js().ensureStream(settled).isOk());
  }
  ~SettleFixture() {
    (void)reader.js().deleteStream(source.stream);
    (void)reader.js().deleteStream(settledStream);
  }

  // Versions 1..keys.size() into the main stream, as the relay publishes them; key i's change
  // (of entity type types[i], or item).
  void publishMain(const std::vector<std::string>& keys, const std::vector<std::string>& types = {}) {
    for (size_t i = 0; i < keys.size(); ++i) {
      const uint64_t v = i + 1;
      OutboxRow row{v, i < types.size() ? types[i] : "item", keys[i], i % 7 == 6 ? "delete" : "upsert", std::nullopt,
                    0, v};
      if (row.op == "upsert") row.payload = fmt::format("{{\"n\":{}}}", v);
      BOOST_REQUIRE(publisher->publish(row, 1, i, /*fenceOnPreviousVersion=*/i > 0).isOk());
    }
    std::vector<VersionAck> acks;
    // By the clock: a wait may end at once (an ack of 10,000 publishes comes in pieces).
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (acks.size() < keys.size() && std::chrono::steady_clock::now() < deadline) {
      publisher->waitForAcks(20ms);
      publisher->takeAcks(acks);
    }
    BOOST_REQUIRE_EQUAL(acks.size(), keys.size());
    for (const auto& a : acks) BOOST_REQUIRE_MESSAGE(a.ok, a.error);
  }

  // Publishes `out` to the settled stream, fenced as the leader's settle thread is to publish;
  // waits for every ack. `lastSeq`/`lastMsgId`: the settled stream's last message.
  void publishSettled(const std::vector<Settled>& out, uint64_t& lastSeq, std::string& lastMsgId) {
    for (const Settled& s : out) {
      nats::OutgoingMessage m;
      m.subject = settledSubject(s.message.subject, source.subjectPrefix);
      m.data = s.message.data;
      const std::string id = settledMsgId(source.name, s.version);
      m.headers = {{"Nats-Msg-Id", id}, {"Nats-Expected-Last-Sequence", std::to_string(lastSeq)}};
      if (!lastMsgId.empty()) m.headers.emplace_back("Nats-Expected-Last-Msg-Id", lastMsgId);
      m.moreHeaders = settledHeaders(s);
      BOOST_REQUIRE(reader.js().publishAsync(m).isOk());
      ++lastSeq;
      lastMsgId = id;
    }
    std::vector<nats::AckEvent> acks;
    for (int i = 0; i < 500 && acks.size() < out.size(); ++i) {
      reader.js().waitForAcks(20ms);
      reader.js().takeAcks(acks);
    }
    BOOST_REQUIRE(acks.size() == out.size());
    for (const auto& a : acks) BOOST_REQUIRE_MESSAGE(a.ok && !a.duplicate, a.error);
  }

  std::vector<nats::StoredMessage> readAll(const std::string& stream, const std::string& prefix) {
    return reader.readAll(stream, prefix);
  }
};

// A stream an operator made by hand (nats.c directly, not the bridge's ensureStream), deleted
// at the end: `subjects`, with or without direct gets.
struct OperatorStream {
  std::string name;
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  OperatorStream(std::string streamName, const std::vector<std::string>& subjects, bool allowDirect)
      : name(std::move(streamName)) {
    BOOST_REQUIRE(natsConnection_ConnectTo(&nc, stack().natsUrl.c_str()) == NATS_OK);
    BOOST_REQUIRE(natsConnection_JetStream(&js, nc, nullptr) == NATS_OK);
    std::vector<const char*> list;
    for (const auto& subject : subjects) list.push_back(subject.c_str());
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    cfg.Name = name.c_str();
    cfg.Subjects = list.data();
    cfg.SubjectsLen = static_cast<int>(list.size());
    cfg.AllowDirect = allowDirect;
    BOOST_REQUIRE(js_AddStream(nullptr, js, &cfg, nullptr, nullptr) == NATS_OK);
  }
  ~OperatorStream() {
    if (js != nullptr) (void)js_DeleteStream(js, name.c_str(), nullptr, nullptr);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
  }
  // One message on `subject`, with an Outbox-Version header when `version` is not 0.
  void publish(const std::string& subject, uint64_t version = 0) {
    natsMsg* m = nullptr;
    BOOST_REQUIRE(natsMsg_Create(&m, subject.c_str(), nullptr, "x", 1) == NATS_OK);
    if (version != 0) natsMsgHeader_Set(m, "Outbox-Version", std::to_string(version).c_str());
    BOOST_REQUIRE(js_PublishMsg(nullptr, js, m, nullptr, nullptr) == NATS_OK);
    natsMsg_Destroy(m);
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(
    recoverys_search_finds_versions_in_a_stream_with_deleted_messages_and_a_purge) {
  SettleFixture f;
  std::vector<std::string> keys;
  for (int i = 0; i < 120; ++i) keys.push_back(std::to_string(i % 9));
  f.publishMain(keys);
  for (uint64_t seq : {1, 2, 3, 40, 41, 42, 43, 77, 119})
    BOOST_REQUIRE(f.reader.js().deleteMessage(f.source.stream, seq).isOk());
  JetStreamReader main(f.reader.js(), f.source.stream);
  const auto stored = f.readAll(f.source.stream, f.source.subjectPrefix);
  BOOST_TEST(stored.size() == 111u);
  for (uint64_t v = 0; v <= 121; ++v) {
    uint64_t expect = 121;  // none above v: read from after the last sequence
    for (const auto& m : stored) {
      if (headerU64(m, "Outbox-Version") > v) {
        expect = m.seq;
        break;
      }
    }
    auto got = firstSeqAbove(main, "Outbox-Version", v);
    BOOST_TEST_REQUIRE(got.isOk(), got.status().message());
    // From what the search says, the first message stored is the first above v.
    uint64_t first = *got;
    while (first <= 120 && !f.reader.js().getMessage(f.source.stream, first)->has_value()) ++first;
    BOOST_TEST(first == expect, "version " << v);
  }
  BOOST_REQUIRE(f.reader.js().purgeStream(f.source.stream).isOk());
  auto afterPurge = firstSeqAbove(main, "Outbox-Version", 0);
  BOOST_TEST_REQUIRE(afterPurge.isOk());
  BOOST_TEST(*afterPurge == 121u);  // the server's next sequence: nothing to replay
  JetStreamReader settled(f.reader.js(), f.settledStream);
  auto none = lastSettled(settled);
  BOOST_TEST_REQUIRE(none.isOk());
  BOOST_TEST(!none->has_value());
}

// An operator's purge of one entity type (`nats stream purge --subject`) leaves a run of deleted
// sequences longer than a walk over them may be: the search asks the server for the first message
// stored at or after a sequence instead, and finds the versions after the run.
BOOST_AUTO_TEST_CASE(recoverys_search_crosses_a_purge_of_25000_messages_of_one_subject) {
  SettleFixture f;
  std::vector<std::string> keys, types;
  for (int i = 0; i < 25'010; ++i) {
    keys.push_back(std::to_string(i));
    types.push_back(i < 5 || i >= 25'005 ? "item" : "bulk");
  }
  f.publishMain(keys, types);
  BOOST_REQUIRE(f.reader.js().purgeStream(f.source.stream, f.source.subjectPrefix + ".bulk").isOk());
  BOOST_REQUIRE_EQUAL(f.readAll(f.source.stream, f.source.subjectPrefix).size(), 10u);
  JetStreamReader main(f.reader.js(), f.source.stream);
  // Version v, and the sequences a read may start from: after v's, through the next stored one.
  struct Case {
    uint64_t v, from, to;
  };
  for (const Case c : std::vector<Case>{{0, 1, 1}, {4, 5, 5}, {5, 6, 25'006}, {25'006, 25'007, 25'007},
                                        {25'010, 25'011, 25'011}}) {
    auto got = firstSeqAbove(main, "Outbox-Version", c.v);
    BOOST_TEST_REQUIRE(got.isOk(), got.status().message());
    BOOST_TEST((*got >= c.from && *got <= c.to), "version " << c.v << ": " << *got);
  }
}

// The same purge at the stream's tail: the last stored message is found at once (the last of
// each of the stream's subjects), where a walk back would stop after 10,000 deleted sequences and
// the settled stream would be stuck (recovery and every read of the main stream start there).
BOOST_AUTO_TEST_CASE(the_last_stored_message_is_found_behind_a_purged_tail_of_12000_messages) {
  SettleFixture f;
  std::vector<std::string> keys, types;
  for (int i = 0; i < 12'005; ++i) {
    keys.push_back(std::to_string(i));
    types.push_back(i < 5 ? "item" : "bulk");
  }
  f.publishMain(keys, types);
  BOOST_REQUIRE(f.reader.js().purgeStream(f.source.stream, f.source.subjectPrefix + ".bulk").isOk());
  JetStreamReader main(f.reader.js(), f.source.stream);
  auto last = lastStored(main);
  BOOST_TEST_REQUIRE(last.isOk(), last.status().message());
  BOOST_TEST_REQUIRE(last->has_value());
  BOOST_TEST((*last)->seq == 5u);
  BOOST_TEST(headerU64(**last, "Outbox-Version") == 5u);
  // Not deleted at the tail: the message at the last sequence, as before.
  nats::OutgoingMessage m;
  m.subject = f.source.subjectPrefix + ".item.x";
  m.data = "{}";
  m.headers = {{"Outbox-Version", "12006"}};
  BOOST_REQUIRE(f.reader.js().publishAsync(m).isOk());
  std::vector<nats::AckEvent> acks;
  for (int i = 0; i < 250 && acks.empty(); ++i) {
    f.reader.js().waitForAcks(20ms);
    f.reader.js().takeAcks(acks);
  }
  BOOST_REQUIRE(acks.size() == 1u && acks[0].ok);
  last = lastStored(main);
  BOOST_TEST_REQUIRE(last.isOk(), last.status().message());
  BOOST_TEST_REQUIRE(last->has_value());
  BOOST_TEST((*last)->seq == 12'006u);
  // A settled stream that never held a message: none.
  JetStreamReader settled(f.reader.js(), f.settledStream);
  auto none = lastStored(settled);
  BOOST_TEST_REQUIRE(none.isOk());
  BOOST_TEST(!none->has_value());
}

// A stream of two subjects whose last message was deleted, its subject's older ones left: the
// server answers "none" for that subject (it keeps the deleted one as its last), and the last
// stored message is found by the walk, not taken from the other subject.
BOOST_AUTO_TEST_CASE(the_last_stored_message_of_two_subjects_whose_tail_was_deleted_is_found_by_the_walk) {
  SettleFixture f;
  const std::string a = f.source.subjectPrefix + "_a", b = f.source.subjectPrefix + "_b";
  OperatorStream stream(f.source.stream + "_TWO", {a + ".>", b + ".>"}, true);
  for (const std::string& subject : {b + ".x", a + ".x", a + ".x"}) stream.publish(subject);
  BOOST_REQUIRE(f.reader.js().deleteMessage(stream.name, 3).isOk());
  JetStreamReader reader(f.reader.js(), stream.name);
  auto last = lastStored(reader);
  BOOST_TEST_REQUIRE(last.isOk(), last.status().message());
  BOOST_TEST_REQUIRE(last->has_value());
  BOOST_TEST((*last)->seq == 2u);
}

// A stream an operator made without direct gets: the search falls back to single gets.
BOOST_AUTO_TEST_CASE(recoverys_search_works_on_a_stream_without_direct_gets) {
  SettleFixture f;
  const std::string subject = f.source.subjectPrefix + "_nd";
  OperatorStream stream(f.source.stream + "_ND", {subject}, false);
  for (uint64_t v = 1; v <= 20; ++v) stream.publish(subject, v);
  for (uint64_t seq = 5; seq <= 15; ++seq) BOOST_REQUIRE(f.reader.js().deleteMessage(stream.name, seq).isOk());
  JetStreamReader reader(f.reader.js(), stream.name);
  auto got = firstSeqAbove(reader, "Outbox-Version", 4);
  BOOST_TEST_REQUIRE(got.isOk(), got.status().message());
  BOOST_TEST((*got >= 5 && *got <= 16), *got);
  got = firstSeqAbove(reader, "Outbox-Version", 16);
  BOOST_TEST_REQUIRE(got.isOk(), got.status().message());
  BOOST_TEST(*got == 17u);
}

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

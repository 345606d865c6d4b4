#define BOOST_TEST_MODULE settle_streams
#include <boost/test/unit_test.hpp>

// The settled stream's reads and messages against the stack's nats-server (docs/design.md, "The
// settled stream (issue 36)"): recovery's searches over a real stream with deleted messages and a
// purge, and settled messages that travel through the server and restart a Settler from the two
// streams alone. The relay does not feed a settler yet: the main stream is published here by
// JetStreamPublisher, as the relay does.
// Recovery's searches are here; settled messages through the server in
// settle_streams_settler_test.cpp; SettleFixture in settle_streams.h.

#include <fmt/format.h>
#include <nats/nats.h>

#include "harness.h"
#include "settle/jetstream_reader.h"
#include "settle/settle_recovery.h"
#include "settle_streams.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

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

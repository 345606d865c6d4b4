#pragma once

// What the settle_streams cases share (settle_streams_test.cpp, settle_streams_settler_test.cpp):
// a source's main stream published as the relay publishes it, its settled stream, and both read
// back, on the stack's nats-server.

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness.h"
#include "relay/jetstream_publisher.h"
#include "settle/settled_message.h"
#include "settle/settler.h"

namespace outbox::test {

using namespace std::chrono_literals;

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

}  // namespace outbox::test

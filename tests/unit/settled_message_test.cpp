// The settled publish measured against max_payload (issue 36): the settled headers make a settled
// message larger than its main message, so a row the poison check lets through at the edge of
// max_payload can have a settled message over it; the settle thread skips that key (README, "The
// settled stream") and must be able to tell.
#include <boost/test/unit_test.hpp>

#include <string>

#include "config/subject_template.h"
#include "nats/outgoing.h"
#include "relay/jetstream_publisher.h"
#include "relay/poison.h"
#include "settle/settled_message.h"

using namespace outbox;

BOOST_AUTO_TEST_CASE(a_row_at_the_edge_of_max_payload_can_have_a_settled_message_over_it) {
  SourceConfig source;
  source.name = "account";
  source.subjectPrefix = "control.account";
  const SubjectTemplate subject = SubjectTemplate::byEntityType(source.subjectPrefix);
  constexpr size_t kMax = 4096;
  // The largest payload the poison check lets through at kMax.
  OutboxRow row{1, "account", "42", "upsert", std::string(), 0, 0};
  size_t size = 16;
  auto fits = [&](size_t n) {
    OutboxRow r = row;
    r.payload = "\"" + std::string(n - 2, 'x') + "\"";
    return !findPoison(source, subject, r, kMax).has_value();
  };
  while (fits(size + 1)) ++size;
  row.payload = "\"" + std::string(size - 2, 'x') + "\"";
  BOOST_REQUIRE(!findPoison(source, subject, row, kMax).has_value());
  row.version = 123'456'789'012;
  const nats::OutgoingMessage main = toMessage(source, subject, row, 1, 0, false);
  BOOST_TEST(payloadBytes(main) <= kMax);
  // Its settled message late in a source's life: large versions in Through, Seen, From.
  Settled settled;
  settled.key = SettleKey{row.entityType, row.entityKey};
  settled.version = row.version;
  settled.from = row.version - 5;
  settled.count = 6;
  settled.through = row.version - 1;
  settled.seen = row.version + 10;
  settled.message = MainMessage{main.subject, std::string(main.data), {}};
  for (const auto& [name, value] : main.headers) appendHeader(settled.message.headers, name, value);
  const nats::OutgoingMessage m = settledPublish(source.name, source.subjectPrefix, settled, 987'654'321,
                                                 settledMsgId(source.name, row.version - 3));
  BOOST_TEST(m.subject == "control.account_settled.account");
  BOOST_TEST(payloadBytes(m) > kMax);
  // What payloadBytes counts: the data and the header block as it travels.
  std::string block;
  nats::encodeHeaders(m, block);
  BOOST_TEST(payloadBytes(m) == block.size() + m.data.size());
  BOOST_TEST(block.find("Nats-Msg-Id: account:settled:123456789012\r\n") != std::string::npos);
  BOOST_TEST(block.find("Outbox-Settled-Through: 123456789011\r\n") != std::string::npos);
}

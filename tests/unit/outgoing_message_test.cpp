#define BOOST_TEST_MODULE outgoing_message
#include <boost/test/unit_test.hpp>

#include <nats/nats.h>

#include <string>

#include "nats/outgoing.h"

// A message built with its headers encoded at once (src/nats/outgoing.cpp) reads back, through
// nats.c's own header parser, exactly as one built header by header with natsMsgHeader_Set did.

using namespace outbox::nats;

namespace {

// nats.c's header calls keep their errors in the library's thread-local state: opened first, as a
// connection does in the bridge.
struct OpenLibrary {
  OpenLibrary() { BOOST_REQUIRE(nats_Open(-1) == NATS_OK); }
  ~OpenLibrary() { nats_Close(); }
};
BOOST_TEST_GLOBAL_FIXTURE(OpenLibrary);

struct Made {
  natsMsg* msg = nullptr;
  explicit Made(const OutgoingMessage& m) {
    std::string scratch = "left over from the last message";
    auto made = makeMessage(m, scratch);
    BOOST_REQUIRE_MESSAGE(made.isOk(), made.status().message());
    msg = *made;
  }
  ~Made() { natsMsg_Destroy(msg); }
  std::string header(const char* key) {
    const char* value = nullptr;
    natsStatus s = natsMsgHeader_Get(msg, key, &value);
    BOOST_REQUIRE_MESSAGE(s == NATS_OK, key << ": " << natsStatus_GetText(s));
    return value;
  }
};

OutgoingMessage sample() {
  OutgoingMessage m;
  m.subject = "control.accounts.account";
  m.data = R"({"id": 42})";
  m.headers = {{"Nats-Msg-Id", "accounts:7"},
               {"Nats-Expected-Last-Sequence", "6"},
               {"Outbox-Entity-Key", "a key: with a colon"},
               {"Outbox-Op", "upsert"}};
  m.moreHeaders = {{"Trace", "one"}, {"Trace", "two"}, {"X-Tenant", "acme"}};
  return m;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_header_reads_back_with_its_value) {
  auto m = sample();
  Made made(m);
  BOOST_TEST(std::string(natsMsg_GetSubject(made.msg)) == m.subject);
  BOOST_TEST(std::string(natsMsg_GetData(made.msg), natsMsg_GetDataLength(made.msg)) == std::string(m.data));
  BOOST_TEST(made.header("Nats-Msg-Id") == "accounts:7");
  BOOST_TEST(made.header("Nats-Expected-Last-Sequence") == "6");
  BOOST_TEST(made.header("Outbox-Entity-Key") == "a key: with a colon");
  BOOST_TEST(made.header("Outbox-Op") == "upsert");
  BOOST_TEST(made.header("X-Tenant") == "acme");
  const char** values = nullptr;
  int count = 0;
  BOOST_REQUIRE(natsMsgHeader_Values(made.msg, "Trace", &values, &count) == NATS_OK);
  BOOST_REQUIRE_EQUAL(count, 2);
  BOOST_TEST(std::string(values[0]) == "one");
  BOOST_TEST(std::string(values[1]) == "two");
  free(values);
  const char** keys = nullptr;
  BOOST_REQUIRE(natsMsgHeader_Keys(made.msg, &keys, &count) == NATS_OK);
  BOOST_TEST(count == 6);
  free(keys);
}

BOOST_AUTO_TEST_CASE(the_encoding_is_the_wire_format_in_order) {
  std::string out;
  encodeHeaders(sample(), out);
  BOOST_TEST(out ==
             "NATS/1.0\r\nNats-Msg-Id: accounts:7\r\nNats-Expected-Last-Sequence: 6\r\nOutbox-Entity-Key: a key: with a "
             "colon\r\nOutbox-Op: upsert\r\nTrace: one\r\nTrace: two\r\nX-Tenant: acme\r\n\r\n");
  BOOST_TEST(msgIdOf(sample()) == "accounts:7");
}

// As nats.c's encoder does: a line break inside a value becomes a space (it would end the header).
BOOST_AUTO_TEST_CASE(a_line_break_in_a_value_becomes_a_space) {
  OutgoingMessage m;
  m.headers = {{"Nats-Msg-Id", "s:1"}};
  m.moreHeaders = {{"Note", "two\r\nlines"}};
  std::string out;
  encodeHeaders(m, out);
  BOOST_TEST(out == "NATS/1.0\r\nNats-Msg-Id: s:1\r\nNote: two  lines\r\n\r\n");
}

BOOST_AUTO_TEST_CASE(a_message_without_headers_has_none) {
  OutgoingMessage m;
  m.subject = "s";
  m.data = "body";
  Made made(m);
  const char* value = nullptr;
  BOOST_TEST(natsMsgHeader_Get(made.msg, "Nats-Msg-Id", &value) != NATS_OK);
  BOOST_TEST(std::string(natsMsg_GetData(made.msg), natsMsg_GetDataLength(made.msg)) == "body");
  BOOST_TEST(msgIdOf(m).empty());
}

// The fast path is found by a meson links() check (src/meson.build): a check that stopped
// linking (a changed declaration, flag or library name) would fall back without a word and cost
// the drain a quarter of the bridge's CPU. libnats 3.4 and later export natsMsg_create: there, the
// build must have found it.
BOOST_AUTO_TEST_CASE(the_headers_are_encoded_once_with_the_libnats_of_this_build) {
  if (NATS_VERSION_MAJOR > 3 || (NATS_VERSION_MAJOR == 3 && NATS_VERSION_MINOR >= 4)) {
    BOOST_TEST(outbox::nats::encodesHeadersOnce(), "libnats " << NATS_VERSION_STRING << " exports natsMsg_create, "
                                                                "but meson's check did not find it (src/meson.build)");
  }
}

#define BOOST_TEST_MODULE jetstream_status
#include <boost/test/unit_test.hpp>

#include <nats/nats.h>

#include "nats/jetstream.h"

using namespace outbox;

// What a caller does next depends on it: the relay retries a transient failure with backoff, and
// halts (and `run` refuses to start) on a permanent one, which asking again cannot fix.
BOOST_AUTO_TEST_CASE(refusals_are_permanent_and_outages_transient) {
  for (natsStatus s : {NATS_NOT_PERMITTED, NATS_CONNECTION_AUTH_FAILED, NATS_SSL_ERROR, NATS_INVALID_ARG,
                       NATS_INVALID_SUBJECT, NATS_MAX_PAYLOAD}) {
    BOOST_TEST(nats::fromNats(s, 0, "x").isPermanent(), natsStatus_GetText(s));
  }
  for (natsStatus s : {NATS_TIMEOUT, NATS_CONNECTION_CLOSED, NATS_CONNECTION_DISCONNECTED, NATS_NO_SERVER,
                       NATS_STALE_CONNECTION, NATS_NO_RESPONDERS, NATS_IO_ERROR, NATS_NOT_YET_CONNECTED,
                       NATS_SLOW_CONSUMER, NATS_MISMATCH}) {
    BOOST_TEST(nats::fromNats(s, 0, "x").isTransient(), natsStatus_GetText(s));
  }
  // A JetStream API error (here "JetStream not enabled", as right after a restart) clears up.
  BOOST_TEST(nats::fromNats(NATS_ERR, 10076, "x").isTransient());
  BOOST_TEST(nats::fromNats(NATS_OK, 0, "x").isOk());
}

BOOST_AUTO_TEST_CASE(the_text_keeps_what_failed_and_both_codes) {
  Status s = nats::fromNats(NATS_ERR, 10059, "stream info CONTROL_A");
  BOOST_TEST(s.message().find("stream info CONTROL_A: nats status") == 0u, s.message());
  BOOST_TEST(s.message().find("jetstream error 10059") != std::string::npos, s.message());
}

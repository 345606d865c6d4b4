#define BOOST_TEST_MODULE nkey
#include <boost/test/unit_test.hpp>

#include "nats/nkey.h"

using namespace outbox;

// The example user key of the NATS documentation (nkey authentication).
BOOST_AUTO_TEST_CASE(the_public_key_of_the_documented_seed) {
  auto pub = nats::nkeyPublicKey("SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY");
  BOOST_REQUIRE_MESSAGE(pub.isOk(), pub.status().message());
  BOOST_TEST(*pub == "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4");
}

BOOST_AUTO_TEST_CASE(anything_else_is_refused_without_echoing_it) {
  for (const char* bad : {"", "SUACSS", "SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3XX",  // checksum
                          "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4",                // a public key
                          "SUACSSL3UAHUD0KF1NVUZRF5UHPMWZ6BFDTJ7M6USDXIED8PPQYYYCU3VY"}) {            // not base32
    auto pub = nats::nkeyPublicKey(bad);
    BOOST_TEST(pub.status().isPermanent(), bad);
    if (*bad != '\0') BOOST_TEST(pub.status().message().find(bad) == std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(a_new_pair_is_a_seed_and_its_public_key) {
  auto pair = nats::newUserNkey();
  BOOST_REQUIRE(pair.isOk());
  BOOST_TEST(pair->seed.size() == 58u);
  BOOST_TEST(pair->seed.rfind("SU", 0) == 0u);
  BOOST_TEST(pair->publicKey.size() == 56u);
  BOOST_TEST(pair->publicKey.front() == 'U');
  BOOST_TEST(*nats::nkeyPublicKey(pair->seed) == pair->publicKey);
  BOOST_TEST(nats::newUserNkey()->seed != pair->seed);
}

#define BOOST_TEST_MODULE checksum
#include <boost/test/unit_test.hpp>

#include <simdjson.h>

#include <fmt/format.h>

#include "snapshot/checksum.h"

using namespace outbox;

// The vectors were computed by tests/vectors/make_checksum_vectors.py with Python's hashlib,
// independently of this code.
BOOST_AUTO_TEST_CASE(checksum_matches_the_independent_vectors) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.load(OUTBOX_CHECKSUM_VECTORS);
  int sets = 0;
  for (auto [name, set] : simdjson::dom::object(doc["sets"])) {
    ++sets;
    uint64_t sum = 0;
    size_t i = 0;
    simdjson::dom::array hashes = set["hashes"];
    for (simdjson::dom::array record : simdjson::dom::array(set["records"])) {
      std::vector<std::optional<std::string>> values;
      for (simdjson::dom::element v : record) {
        if (v.is_null()) {
          values.emplace_back();
        } else {
          values.emplace_back(std::string(std::string_view(v)));
        }
      }
      uint64_t h = recordHash(values);
      BOOST_TEST(fmt::format("{:016x}", h) == std::string(std::string_view(hashes.at(i))), name << " record " << i);
      sum += h;
      ++i;
    }
    BOOST_TEST(formatChecksum(sum) == std::string(std::string_view(set["checksum"])), name);
  }
  BOOST_TEST(sets == 7);
}

BOOST_AUTO_TEST_CASE(checksum_text_round_trips) {
  BOOST_TEST(formatChecksum(0xab12cd34ef5678ULL) == "sha256-sum64:00ab12cd34ef5678");
  BOOST_TEST(parseChecksum("sha256-sum64:00ab12cd34ef5678").value() == 0xab12cd34ef5678ULL);
  BOOST_TEST(!parseChecksum("sha256-sum64:00ab12cd34ef567").has_value());
  BOOST_TEST(!parseChecksum("md5:00ab12cd34ef5678").has_value());
  BOOST_TEST(!parseChecksum("sha256-sum64:00ab12cd34ef567x").has_value());
}

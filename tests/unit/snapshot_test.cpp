#define BOOST_TEST_MODULE snapshot
#include <boost/test/unit_test.hpp>

#include <simdjson.h>

#include <fmt/format.h>

#include "replica/replica.h"
#include "snapshot/checksum.h"
#include "snapshot/snapshot.h"

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

BOOST_AUTO_TEST_CASE(json_escaping_covers_quotes_backslashes_and_control_characters) {
  std::string out;
  appendJsonEscaped(out, std::string("a\"b\\c\nd\te\x01\x1f f\xC3\xBC", 15));
  BOOST_TEST(out == "a\\\"b\\\\c\\nd\\te\\u0001\\u001f f\xC3\xBC");
}

namespace {
std::string document(const std::string& records, uint64_t count, uint64_t sum) {
  return fmt::format(
      R"({{"schemaVersion":1,"source":"account","sourceEpoch":2,"watermark":7,"stream":{{"name":"CONTROL_ACCOUNT","seq":9}},"key":"id","records":[{}],"recordCount":{},"checksum":"{}"}})",
      records, count, formatChecksum(sum));
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_snapshot_is_parsed_with_mysql_text_forms) {
  std::vector<std::optional<std::string>> a{"42", "Acme \"Ltd\""}, b{"43", std::nullopt};
  uint64_t sum = recordHash(a) + recordHash(b);
  auto parsed = parseSnapshot(
      document(R"({"id":42,"displayName":"Acme \"Ltd\""},{"id":43,"displayName":null})", 2, sum), true);
  BOOST_REQUIRE_MESSAGE(parsed.isOk(), parsed.status().message());
  BOOST_TEST(parsed->epoch == 2u);
  BOOST_TEST(parsed->watermark == 7u);
  BOOST_TEST(parsed->streamName == "CONTROL_ACCOUNT");
  BOOST_TEST(parsed->streamSeq == 9u);
  BOOST_TEST(parsed->key == "id");
  BOOST_TEST((parsed->columns == std::vector<std::string>{"id", "displayName"}));
  BOOST_TEST(parsed->numeric[0]);
  BOOST_TEST(!parsed->numeric[1]);
  BOOST_TEST(*parsed->records[0][1] == "Acme \"Ltd\"");
  BOOST_TEST(!parsed->records[1][1].has_value());
}

BOOST_AUTO_TEST_CASE(a_corrupted_snapshot_is_rejected_with_the_reason) {
  std::vector<std::optional<std::string>> a{"42", "Acme"};
  uint64_t sum = recordHash(a);
  auto reason = [](const std::string& doc) {
    auto parsed = parseSnapshot(doc, true);
    return parsed.isOk() ? std::string() : parsed.status().message();
  };
  BOOST_TEST(reason(document(R"({"id":42,"displayName":"Acme"})", 1, sum)).empty());
  BOOST_TEST(reason(document(R"({"id":42,"displayName":"Acmf"})", 1, sum)).find("checksum says") != std::string::npos);
  BOOST_TEST(reason(document(R"({"id":42,"displayName":"Acme"})", 2, sum)).find("recordCount says 2") !=
             std::string::npos);
  std::string whole = document(R"({"id":42,"displayName":"Acme"})", 1, sum);
  BOOST_TEST(!reason(whole.substr(0, whole.size() / 2)).empty());  // cut short
  BOOST_TEST(!reason("not json").empty());
  BOOST_TEST(reason(document(R"({"id":42,"displayName":"Acme"},{"name":"x","id":1})", 2, sum)).find("fields") !=
             std::string::npos);
}

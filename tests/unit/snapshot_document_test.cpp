#define BOOST_TEST_MODULE snapshot_document
#include <boost/test/unit_test.hpp>

#include <fmt/format.h>

#include "snapshot/checksum.h"
#include "snapshot/document.h"

using namespace outbox;

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

// A message's payload is read as a record: fields in order, MySQL's text forms.
BOOST_AUTO_TEST_CASE(a_payload_is_read_as_a_record_in_field_order) {
  auto fields = parseRecord(R"({"id":42,"name":"Acme \"Ltd\"","tags":["a", "b"],"gone":null,"ok":true,"n":1.50})");
  BOOST_REQUIRE(fields.isOk());
  BOOST_REQUIRE_EQUAL(fields->size(), 6u);
  BOOST_TEST((*fields)[0].name == "id");
  BOOST_TEST(*(*fields)[0].text == "42");
  BOOST_TEST((*fields)[0].numeric);
  BOOST_TEST(*(*fields)[1].text == "Acme \"Ltd\"");
  BOOST_TEST(!(*fields)[1].numeric);
  BOOST_TEST(*(*fields)[2].text == R"(["a", "b"])");
  BOOST_TEST(!(*fields)[3].text.has_value());
  BOOST_TEST(*(*fields)[4].text == "true");
  BOOST_TEST(*(*fields)[5].text == "1.50");  // the literal, not a reformatted double
  BOOST_TEST(parseRecord("[1,2]").status().isPermanent());
  BOOST_TEST(parseRecord("{\"a\":").status().isPermanent());
}

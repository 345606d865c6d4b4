#define BOOST_TEST_MODULE json
#include <boost/test/unit_test.hpp>

#include "common/json.h"

using namespace outbox;

BOOST_AUTO_TEST_CASE(json_escaping_covers_quotes_backslashes_and_control_characters) {
  std::string out;
  appendJsonEscaped(out, std::string("a\"b\\c\nd\te\x01\x1f f\xC3\xBC", 15));
  BOOST_TEST(out == "a\\\"b\\\\c\\nd\\te\\u0001\\u001f f\xC3\xBC");
}

BOOST_AUTO_TEST_CASE(a_quoted_string_is_escaped_inside_its_quotes) {
  BOOST_TEST(jsonQuoted("say \"hi\"\n") == "\"say \\\"hi\\\"\\n\"");
  BOOST_TEST(jsonQuoted("") == "\"\"");
}

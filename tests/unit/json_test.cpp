#define BOOST_TEST_MODULE json
#include <boost/test/unit_test.hpp>

#include "common/json.h"
#include "common/log.h"

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

// Issue 24 item 19: an error body that repeated a request's invalid UTF-8 was invalid JSON.
BOOST_AUTO_TEST_CASE(a_quoted_string_is_valid_json_whatever_the_bytes) {
  BOOST_TEST(jsonQuoted("/\xff\xfe x") == "\"/\\ufffd\\ufffd x\"");
  BOOST_TEST(jsonQuoted("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") == "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"");
  BOOST_TEST(jsonQuoted("cut \xE2\x82") == "\"cut \\ufffd\\ufffd\"");           // a sequence cut short
  BOOST_TEST(jsonQuoted("\xC0\xAF") == "\"\\ufffd\\ufffd\"");                   // overlong '/'
  BOOST_TEST(jsonQuoted("\xED\xA0\x80") == "\"\\ufffd\\ufffd\\ufffd\"");        // a surrogate
  BOOST_TEST(jsonQuoted("\xF4\x90\x80\x80") == "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");  // past U+10FFFF
  // The snapshot's values keep their bytes (their checksum is over them).
  std::string kept;
  appendJsonEscaped(kept, "\xff");
  BOOST_TEST(kept == "\xff");
}

// Issue 24 item 19: a quarantine reason with a newline forged a log line, NUL bytes made the log
// binary for grep.
BOOST_AUTO_TEST_CASE(a_log_field_has_no_control_bytes_and_no_invalid_utf8) {
  BOOST_TEST(logSafe(std::string("ok\nforged\0\x01\x7f", 12)) == "ok\\x0aforged\\x00\\x01\\x7f");
  BOOST_TEST(logSafe("caf\xC3\xA9 \xff") == "caf\xC3\xA9 \\xff");
}

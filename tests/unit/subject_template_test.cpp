#define BOOST_TEST_MODULE subject_template
#include <boost/test/unit_test.hpp>

#include <set>
#include <string>

#include "config/subject_template.h"

using namespace outbox;

namespace {

bool isValidToken(const std::string& token) {
  if (token.empty()) return false;
  for (unsigned char c : token) {
    if (c <= 0x20 || c == 0x7f || c == '.' || c == '*' || c == '>') return false;
  }
  return true;
}

SubjectTemplate parsed(const std::string& text, const std::string& prefix = "control.account") {
  std::string problem;
  auto t = SubjectTemplate::parse(text, prefix, problem);
  BOOST_REQUIRE_MESSAGE(t.has_value(), text + ": " + problem);
  return *t;
}

std::string problemOf(const std::string& text, const std::string& prefix = "control.account") {
  std::string problem;
  auto t = SubjectTemplate::parse(text, prefix, problem);
  BOOST_TEST(!t.has_value(), text);
  return problem;
}

}  // namespace

// Every class of key a subject token cannot hold is escaped into one that it can, and back exactly.
BOOST_AUTO_TEST_CASE(every_bad_key_class_escapes_to_a_token_and_back) {
  const std::string keys[] = {
      "",            "a.b",        "*",           ">",          "a b",       "tab\there",  "line\nbreak",
      "cr\rlf",      std::string("nul\0x", 5),   "del\x7f",    "50%",       "%",          "%41",
      "..",          "a*b>c",      "ключ.42",     "plain-key_1", "\x01\x1f",  std::string(300, '.'),
  };
  std::set<std::string> tokens;
  for (const std::string& key : keys) {
    const std::string token = escapeSubjectToken(key);
    BOOST_TEST(isValidToken(token), "key of " << key.size() << " bytes -> '" << token << "'");
    auto back = unescapeSubjectToken(token);
    BOOST_REQUIRE(back.has_value());
    BOOST_TEST(*back == key);
    tokens.insert(token);
  }
  BOOST_TEST(tokens.size() == std::size(keys));  // no two keys merge
  BOOST_TEST(escapeSubjectToken("") == "%");
  BOOST_TEST(escapeSubjectToken("a.b") == "a%2Eb");
  BOOST_TEST(escapeSubjectToken("50%") == "50%25");
  BOOST_TEST(escapeSubjectToken("a b") == "a%20b");
  BOOST_TEST(escapeSubjectToken("ключ") == "ключ");  // UTF-8 stays as it is
  BOOST_TEST(escapeSubjectToken("plain-key_1") == "plain-key_1");
}

BOOST_AUTO_TEST_CASE(a_token_no_key_escapes_to_is_refused) {
  for (const char* token : {"", "a%", "a%4", "a%zz", "a%2e", "a%41", "a.b", "a b", "%%"}) {
    BOOST_TEST(!unescapeSubjectToken(token).has_value(), token);
  }
}

// The documented hash, on fixed vectors a consumer in another language can check itself against.
BOOST_AUTO_TEST_CASE(the_partition_hash_is_fnv1a_32_of_the_key_bytes) {
  BOOST_TEST(fnv1a32("") == 0x811c9dc5u);
  BOOST_TEST(fnv1a32("a") == 0xe40c292cu);
  BOOST_TEST(fnv1a32("foobar") == 0xbf9cf968u);
  BOOST_TEST(fnv1a32("account-42") == 0x7a3b6bc5u);
  BOOST_TEST(keyPartition("account-42", 8) == 5u);
  BOOST_TEST(keyPartition("foobar", 8) == 0u);
  BOOST_TEST(keyPartition("ключ", 8) == 1u);  // the UTF-8 bytes
  BOOST_TEST(keyPartition("anything", 1) == 0u);
}

BOOST_AUTO_TEST_CASE(templates_render_under_the_prefix) {
  SubjectFields fields{"account", "account", "a.b 42", "upsert"};
  BOOST_TEST(SubjectTemplate::byEntityType("control.account").render(fields) == "control.account.account");
  BOOST_TEST(parsed("control.account.{entity_type}.{entity_key}").render(fields) == "control.account.account.a%2Eb%2042");
  BOOST_TEST(parsed("control.account.{op}.{source}.k-{entity_key}").render(fields) ==
             "control.account.upsert.account.k-a%2Eb%2042");
  fields.entityKey = "account-42";
  BOOST_TEST(parsed("control.account.{partition:8}.{entity_key}").render(fields) == "control.account.5.account-42");
  BOOST_TEST(parsed("control.account.{entity_key}").uses("entity_key"));
  BOOST_TEST(!parsed("control.account.{entity_key}").uses("op"));
  BOOST_TEST(SubjectTemplate::forSource("", "control.account").text() == "control.account.{entity_type}");
}

BOOST_AUTO_TEST_CASE(bad_templates_say_why) {
  BOOST_TEST(problemOf("other.account.{entity_key}").find("must start with the source's subject_prefix") !=
             std::string::npos);
  BOOST_TEST(problemOf("control.account").find("must start with the source's subject_prefix") != std::string::npos);
  BOOST_TEST(problemOf("control.account.").find("empty token") != std::string::npos);
  BOOST_TEST(problemOf("control.account..{entity_key}").find("empty token") != std::string::npos);
  BOOST_TEST(problemOf("control.account.{entity_id}").find("{entity_id} is no placeholder") != std::string::npos);
  BOOST_TEST(problemOf("control.account.{entity_key").find("no '}'") != std::string::npos);
  BOOST_TEST(problemOf("control.account.x}").find("closes no placeholder") != std::string::npos);
  BOOST_TEST(problemOf("control.account.*").find("wildcards") != std::string::npos);
  BOOST_TEST(problemOf("control.account.a b").find("spaces") != std::string::npos);
  BOOST_TEST(problemOf("control.account.{partition:0}").find("from 1 to 1024") != std::string::npos);
  BOOST_TEST(problemOf("control.account.{partition:x}").find("from 1 to 1024") != std::string::npos);
  BOOST_TEST(problemOf("control.account.{partition:}").find("from 1 to 1024") != std::string::npos);
  // Two values of any length in one token could be split more than one way.
  BOOST_TEST(problemOf("control.account.{entity_type}{entity_key}").find("two of") != std::string::npos);
  BOOST_TEST(problemOf("control.account.{partition:8}-{entity_key}").find("two of") != std::string::npos);
  BOOST_TEST(parsed("control.account.{op}-{entity_key}.{source}_{partition:8}").uses("partition"));
  // The prefix is taken as it is, braces included.
  BOOST_TEST(parsed("control.{x}.{entity_key}", "control.{x}").render(SubjectFields{"s", "t", "k", "upsert"}) ==
             "control.{x}.k");
}

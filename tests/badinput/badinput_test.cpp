#define BOOST_TEST_MODULE badinput
#include <boost/test/unit_test.hpp>

#include "badinput.h"
#include "harness.h"

using namespace outbox::badinput;

namespace {

const char* kDsnSecret = "Pw@4242/sekrit";
const char* kPortSecret = "Pw@x:sekrit99/y";
const char* kUrlSecret = "urlsekrit4242";
const bool kNoted = (outbox::test::registerSecret(kDsnSecret), outbox::test::registerSecret(kPortSecret),
                     outbox::test::registerSecret(kUrlSecret), true);

std::string withDsn(const std::string& dsn) {
  return "[[source]]\nname = \"a\"\ndsn = \"" + dsn + "\"\n";
}

}  // namespace

// Item 2: a password with an unescaped '@' then '/' was cut where the parser guessed: its tail
// was echoed as the port or the database, or taken for the host.
BOOST_AUTO_TEST_CASE(an_ambiguous_dsn_is_refused_without_echoing_the_userinfo) {
  const std::string ambiguous = std::string("mysql://u:") + kDsnSecret + "@localhost/db";
  const std::string port = std::string("mysql://u:") + kPortSecret + "@localhost/db";
  const std::vector<std::string> never{"sekrit", "4242", "Pw@"};
  check({
      {Via::kFile, "'@' then '/' in the password", {"check-config", "--config", "{config}"}, withDsn(ambiguous), {}, 2,
       {"config error: source.a.dsn:", "%40"}, never},
      {Via::kFile, "the password's tail as a port", {"check-config", "--config", "{config}"}, withDsn(port), {}, 2,
       {"config error: source.a.dsn:", "%40"}, never},
      {Via::kEnv, "'@' then '/' in the password", {"run", "--config", "{config}"}, baseConfig(),
       {{"OUTBOX_BRIDGE_SOURCE_A_DSN", ambiguous}}, 2, {"config error: source.a.dsn:", "%2F"}, never},
      {Via::kFile, "two '@'", {"check-config", "--config", "{config}"}, withDsn("mysql://u:Pw@sekrit@localhost/db"), {}, 2,
       {"config error: source.a.dsn:"}, {"sekrit"}},
      {Via::kFlag, "replica --url with userinfo",
       {"replica", "--url", std::string("http://u:") + kUrlSecret + "@127.0.0.1:1", "--source", "a", "--duration", "1"},
       "", {}, 2, {"--url", "credentials"}, {kUrlSecret}},
      {Via::kFlag, "healthcheck --url with userinfo",
       {"healthcheck", "--url", std::string("http://u:") + kUrlSecret + "@127.0.0.1:1"}, "", {}, 2,
       {"--url", "credentials"}, {kUrlSecret}},
  });
}

// Item 3: %00 cut the user or the password where the MySQL client reads it (a login with no
// password while check-config showed ****); a password_file that was a directory read as empty.
BOOST_AUTO_TEST_CASE(a_nul_in_the_dsn_or_a_directory_as_password_file_is_an_error) {
  check({
      {Via::kFile, "%00 in the password", {"check-config", "--config", "{config}"},
       withDsn("mysql://u:ab%00nulsekrit@localhost/db"), {}, 2, {"config error: source.a.dsn:", "%00"}, {"nulsekrit"}},
      {Via::kFile, "%00 in the user", {"check-config", "--config", "{config}"}, withDsn("mysql://u%00x@localhost/db"), {},
       2, {"config error: source.a.dsn:", "%00"}, {}},
      {Via::kFile, "password_file a directory", {"check-config", "--config", "{config}"},
       baseConfig("password_file = \"{tmp}/dir\"\n"), {}, 2, {"source.a.password_file", "is a directory"}, {}},
      {Via::kEnv, "password_file a directory", {"check-config", "--config", "{config}"}, baseConfig(),
       {{"OUTBOX_BRIDGE_SOURCE_A_PASSWORD_FILE", "{tmp}/dir"}}, 2, {"source.a.password_file", "is a directory"}, {}},
      {Via::kEnv, "%00 in the password", {"check-config", "--config", "{config}"}, baseConfig(),
       {{"OUTBOX_BRIDGE_SOURCE_A_DSN", "mysql://u:x%00nulsekrit@localhost/db"}}, 2, {"%00"}, {"nulsekrit"}},
  });
}

// Item 9: a recursive std::regex for durations overflowed the stack on ~50,000 digits (SIGSEGV in
// every command); httplib threw std::invalid_argument on an ftp:// URL (abort); /dev/zero was read
// for ever and a FIFO waited for a writer.
BOOST_AUTO_TEST_CASE(no_input_crashes_blocks_or_allocates_without_end) {
  const std::string digits(50'000, '7');
  const std::string shownNoMore(300, '7');  // an error echoes a value cut to ~100 characters
  const std::string big = "# " + std::string(1'100'000, 'x') + "\n" + baseConfig();
  const std::string bigSecret = "{tmp}/big-secret";
  check({
      {Via::kFile, "50,000 digits", {"check-config", "--config", "{config}"},
       baseConfig("poll_interval = \"" + digits + "s\"\n"), {}, 2, {"source.a.poll_interval", "out of range"},
       {shownNoMore}},
      {Via::kEnv, "50,000 digits", {"run", "--config", "{config}"}, baseConfig(),
       {{"OUTBOX_BRIDGE_SOURCE_A_POLL_INTERVAL", digits + "ms"}}, 2, {"source.a.poll_interval"}, {shownNoMore}},
      {Via::kFlag, "50,000 digits", {"prune", "--config", "{config}", "--keep", digits + "h"}, baseConfig(), {}, 2,
       {"--keep", "out of range"}, {shownNoMore}},
      {Via::kFlag, "healthcheck --url ftp://", {"healthcheck", "--url", "ftp://127.0.0.1:1"}, "", {}, 2,
       {"--url", "http://"}, {}},
      {Via::kFlag, "replica --url ftp://", {"replica", "--url", "ftp://127.0.0.1:1", "--source", "a"}, "", {}, 2,
       {"--url", "http://"}, {}},
      {Via::kEnv, "OUTBOX_BRIDGE_CONFIG=/dev/zero", {"check-config"}, "", {{"OUTBOX_BRIDGE_CONFIG", "/dev/zero"}}, 2,
       {"'/dev/zero' is a device"}, {}},
      {Via::kFile, "password_file /dev/zero", {"check-config", "--config", "{config}"},
       baseConfig("password_file = \"/dev/zero\"\n"), {}, 2, {"source.a.password_file", "is a device"}, {}},
      {Via::kFlag, "--config a FIFO", {"check-config", "--config", "{tmp}/fifo"}, "", {}, 2, {"is a FIFO"}, {}},
      {Via::kFile, "password_file a FIFO", {"check-config", "--config", "{config}"},
       baseConfig("password_file = \"{tmp}/fifo\"\n"), {}, 2, {"source.a.password_file", "is a FIFO"}, {}},
      {Via::kFile, "ssl-ca a FIFO", {"check-config", "--config", "{config}"},
       withDsn("mysql://u@h/db?ssl-ca={tmp}/fifo"), {}, 2, {"source.a.dsn", "is a FIFO"}, {}},
      {Via::kFile, "a config over 1 MiB", {"check-config", "--config", "{config}"}, big, {}, 2, {"larger than"}, {}},
      {Via::kFile, "a secret file over 64 KiB", {"check-config", "--config", "{config}"},
       baseConfig("password_file = \"" + bigSecret + "\"\n"), {}, 2, {"source.a.password_file", "larger than"}, {}},
  });
}

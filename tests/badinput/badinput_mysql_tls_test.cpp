// Issue 24 (1): a MySQL impostor that offers no TLS and asks for mysql_clear_password received the
// password in the client's first packet under ssl-mode=REQUIRED and VERIFY_CA (the TLS check ran
// after the login). Each ssl-mode against tests/badinput/fake_mysql.py, one connection each.

#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "badinput.h"
#include "harness.h"
#include "tools/support/subprocess.h"

using namespace outbox::badinput;

namespace {

const char* kSecret = "Imp0storSekrit";
const bool kNoted = (outbox::test::registerSecret(kSecret), true);

// What the impostor received from one `migrate` run with `sslMode`, and the run's own checks.
std::string receivedBy(const std::string& plugin, const std::string& sslMode, std::vector<std::string> expected) {
  const char* root = std::getenv("OUTBOX_TEST_SOURCE_ROOT");
  BOOST_REQUIRE_MESSAGE(root != nullptr, "OUTBOX_TEST_SOURCE_ROOT is not set (meson test sets it)");
  static int counter = 0;
  const std::string base = fmt::format("{}/impostor-{}", fixtures(), ++counter);
  const std::string portFile = base + ".port", recordFile = base + ".received";
  outbox::Subprocess impostor;
  BOOST_REQUIRE(impostor.start({"/usr/bin/python3", std::string(root) + "/tests/badinput/fake_mysql.py", portFile,
                                recordFile, plugin},
                               base + ".log"));
  BOOST_REQUIRE_MESSAGE(outbox::test::waitUntil([&] { return std::filesystem::exists(portFile); }, std::chrono::seconds(10)),
                        "the impostor did not start: " << outbox::test::readFile(base + ".log"));
  const std::string port = outbox::test::readFile(portFile);
  std::string dsn = fmt::format("mysql://u:{}@127.0.0.1:{}/db?ssl-mode={}", kSecret, port, sslMode);
  if (sslMode == "VERIFY_CA") dsn += "&ssl-ca=" + fixtures() + "/impostor-ca.pem";
  check({{Via::kFile, fmt::format("ssl-mode={} against an impostor asking for {}", sslMode, plugin),
          {"migrate", "--config", "{config}"},
          "[[source]]\nname = \"a\"\ndsn = \"" + dsn + "\"\n",
          {},
          1,
          std::move(expected),
          {kSecret}}});
  BOOST_REQUIRE_MESSAGE(outbox::test::waitUntil([&] { return std::filesystem::exists(recordFile); }, std::chrono::seconds(15)),
                        "the impostor did not finish: " << outbox::test::readFile(base + ".log"));
  impostor.kill();
  return outbox::test::readFile(recordFile);
}

}  // namespace

BOOST_AUTO_TEST_CASE(no_ssl_mode_sends_a_password_in_clear_text_and_tls_modes_refuse_a_server_without_tls) {
  outbox::test::makeCa(fixtures() + "/impostor");
  // The modes that require TLS refuse at the greeting: not even a login packet is sent.
  for (const char* mode : {"REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY"}) {
    const std::string received = receivedBy("mysql_clear_password", mode, {"offers no TLS", "refused before logging in"});
    BOOST_TEST(received.empty(), mode << ": the impostor received " << received.size() << " bytes (a login)");
  }
  // The others may log in without TLS, but never with a plugin that sends the password as it is.
  for (const char* mode : {"DISABLED", "PREFERRED"}) {
    const std::string received = receivedBy("mysql_clear_password", mode, {"sends the password as it is", "ssl-mode=REQUIRED"});
    BOOST_TEST(received.find(kSecret) == std::string::npos, mode << ": the impostor received the password");
    // ... and still log in as before with a plugin that keeps it (the impostor then says 1045).
    const std::string native = receivedBy("mysql_native_password", mode, {"1045", "Access denied (impostor)"});
    BOOST_TEST(!native.empty(), mode << ": no login reached the impostor");
    BOOST_TEST(native.find(kSecret) == std::string::npos, mode << ": the impostor received the password");
  }
}

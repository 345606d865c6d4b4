// Issue 33, the doorbell's own account: a server's binlog doorbell read the binary log with the
// first source's DSN, so a second source on that server asking for VERIFY_IDENTITY had its row
// images read over the first's ssl-mode=DISABLED. Two sources of one server with different TLS
// and no [[doorbell]] are refused now, naming both; a [[doorbell]] takes its DSN, password file
// and environment overrides as a source does, and check-config masks its password.
#include <fstream>

#include <boost/test/unit_test.hpp>

#include "badinput.h"

using namespace outbox::badinput;

namespace {

const std::vector<std::string> kCheck{"check-config", "--config", "{config}"};
const std::string kHttp = "[http]\nlisten = \"127.0.0.1:0\"\n";

Row refused(std::string what, std::string toml, std::vector<std::string> expected,
            std::map<std::string, std::string> env = {}, std::vector<std::string> forbidden = {}) {
  return {env.empty() ? Via::kFile : Via::kEnv, std::move(what), kCheck, std::move(toml), std::move(env), 2,
          std::move(expected), std::move(forbidden)};
}

Row accepted(std::string what, std::string toml, std::vector<std::string> expected,
             std::map<std::string, std::string> env = {}, std::vector<std::string> forbidden = {}) {
  return {env.empty() ? Via::kFile : Via::kEnv, std::move(what), kCheck, std::move(toml), std::move(env), 0,
          std::move(expected), std::move(forbidden)};
}

std::string source(const std::string& name, const std::string& dsnTail, const std::string& extra = "") {
  return "[[source]]\nname = \"" + name + "\"\ndsn = \"mysql://app@db.example:3306/shop" + dsnTail + "\"\n" + extra;
}

// Two sources on db.example:3306, one in clear text, one asking for TLS.
const std::string kMixedTls = kHttp + source("plain", "?ssl-mode=DISABLED") + source("secure", "?ssl-mode=REQUIRED");

}  // namespace

BOOST_AUTO_TEST_CASE(sources_of_one_server_with_different_tls_and_no_doorbell_account_are_refused) {
  const std::string secret = "bell-secret-7f3a9c";
  std::ofstream(fixtures() + "/doorbell-password") << secret << "\n";
  const std::string bell = "[[doorbell]]\nname = \"bell\"\ndsn = \"mysql://repl@db.example:3306/?ssl-mode=REQUIRED\"\n";
  check({
      refused("a server's sources in clear text and in TLS", kMixedTls,
              {"config error: doorbell:", "sources plain (ssl-mode=DISABLED) and secure (ssl-mode=REQUIRED)",
               "db.example:3306", "[[doorbell]]"}),
      {Via::kFile, "the same under run", {"run", "--config", "{config}"}, kMixedTls, {}, 2,
       {"config error: doorbell:", "plain", "secure"}, {}},
      refused("a CA file differs", kHttp + source("a", "?ssl-mode=VERIFY_CA&ssl-ca={tmp}/doorbell-password") +
                                       source("b", "?ssl-mode=VERIFY_CA&ssl-ca={tmp}/big-secret"),
              {"sources a (ssl-mode=VERIFY_CA, ssl-ca=", "and b (ssl-mode=VERIFY_CA, ssl-ca="}),
      // A source that polls has no doorbell to share; another server is another doorbell.
      accepted("the clear-text source polls", kHttp + source("plain", "?ssl-mode=DISABLED", "wake = \"poll\"\n") +
                                                  source("secure", "?ssl-mode=REQUIRED"),
               {"name = \"secure\""}),
      accepted("two servers", kHttp + source("plain", "?ssl-mode=DISABLED") +
                                  "[[source]]\nname = \"other\"\ndsn = \"mysql://app@db2.example:3306/shop\"\n",
               {"name = \"other\""}),
      // With the server's own doorbell account, the sources' TLS is theirs alone.
      accepted("a [[doorbell]] for the server, its password from a file",
               kMixedTls + bell + "password_file = \"{tmp}/doorbell-password\"\n",
               {"[[doorbell]]\nname = \"bell\"\ndsn = \"mysql://repl:****@db.example:3306/?ssl-mode=REQUIRED\""},
               {}, {secret}),
      accepted("its password file from the environment", kMixedTls + bell,
               {"dsn = \"mysql://repl:****@db.example:3306/?ssl-mode=REQUIRED\""},
               {{"OUTBOX_BRIDGE_DOORBELL_BELL_PASSWORD_FILE", fixtures() + "/doorbell-password"}}, {secret}),
      accepted("its DSN from the environment", kMixedTls + bell,
               {"dsn = \"mysql://watcher@db.example:3306/shop?ssl-mode=VERIFY_IDENTITY\""},
               {{"OUTBOX_BRIDGE_DOORBELL_BELL_DSN", "mysql://watcher@db.example:3306/shop?ssl-mode=VERIFY_IDENTITY"}}),
      accepted("the host named in another case", kMixedTls +
                                                     "[[doorbell]]\nname = \"bell\"\ndsn = \"mysql://repl@DB.example/\"\n",
               {"[[doorbell]]"}),
      refused("a doorbell for a server no source is on",
              kMixedTls + "[[doorbell]]\nname = \"bell\"\ndsn = \"mysql://repl@db.example:3307/\"\n",
              {"config error: doorbell.bell.dsn:", "db.example:3307"}),
      refused("two doorbells for one server", kMixedTls + bell + "[[doorbell]]\nname = \"bell2\"\n"
                                                                 "dsn = \"mysql://repl2@db.example/\"\n",
              {"doorbell.bell2.dsn", "as doorbell bell does"}),
      refused("a doorbell without a name", kMixedTls + "[[doorbell]]\ndsn = \"mysql://repl@db.example/\"\n",
              {"doorbell[0].name: is required"}),
      refused("a doorbell without a DSN", kMixedTls + "[[doorbell]]\nname = \"bell\"\n",
              {"doorbell.bell.dsn: is required"}),
      refused("an unknown key", kMixedTls + bell + "pasword_file = \"x\"\n", {"doorbell.bell.pasword_file: unknown key"}),
      refused("an inline password and a password file", kMixedTls + bell + "password = \"p\"\npassword_file = \"x\"\n",
              {"doorbell.bell.password", "not both"}),
      refused("a misspelt variable", kMixedTls + bell, {"OUTBOX_BRIDGE_DOORBELL_BELL_DSM", "unknown environment"},
              {{"OUTBOX_BRIDGE_DOORBELL_BELL_DSM", "mysql://x@h/"}}),
      refused("a password in the DSN that reads as a variable", kMixedTls +
                  "[[doorbell]]\nname = \"bell\"\ndsn = \"mysql://repl:${BELL}@db.example/\"\n",
              {"doorbell.bell.dsn", "password_file"}),
  });
}

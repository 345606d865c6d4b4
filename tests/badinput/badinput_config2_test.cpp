// Issue 32, second round of bad input to the config file and the environment: a crash, a check
// that took quadratic time, secrets that were references to secrets, values whose meaning changed
// silently, and messages that echoed what they were given. Each row failed on the code before.
#include <boost/test/unit_test.hpp>

#include "badinput.h"

using namespace outbox::badinput;

namespace {

const std::vector<std::string> kCheck{"check-config", "--config", "{config}"};

Row refused(Via via, std::string what, std::string toml, std::vector<std::string> expected,
            std::map<std::string, std::string> env = {}, std::vector<std::string> forbidden = {}) {
  return {via, std::move(what), kCheck, std::move(toml), std::move(env), 2, std::move(expected), std::move(forbidden)};
}

Row accepted(std::string what, std::string toml, std::vector<std::string> expected = {}) {
  return {Via::kFile, std::move(what), kCheck, std::move(toml), {}, 0, std::move(expected), {}};
}

std::string repeated(const std::string& part, size_t times) {
  std::string out;
  out.reserve(part.size() * times);
  for (size_t i = 0; i < times; ++i) out += part;
  return out;
}

std::string source(const std::string& name, const std::string& extra = "") {
  return "[[source]]\nname = \"" + name + "\"\ndsn = \"mysql://u@127.0.0.1:1/db\"\n" + extra;
}

}  // namespace

// toml++ recursed once per level of a dotted key or a table header: ~40,000 levels (80 KB)
// ended check-config and run with SIGSEGV. Refused before parsing, naming the line.
BOOST_AUTO_TEST_CASE(a_key_nested_too_deep_is_refused_before_it_is_parsed) {
  const std::string deepKey = "a" + repeated(".t", 40'000) + " = 1\n";
  const std::string deepHeader = "[a" + repeated(".t", 40'000) + "]\nx = 1\n";
  const std::string deepQuoted = "\"a\"" + repeated(" . \"t\"", 20'000) + " = 1\n";
  check({
      refused(Via::kFile, "a dotted key 40,000 levels deep", deepKey + baseConfig(), {"line 1", "dotted parts"}),
      {Via::kFile, "the same under run", {"run", "--config", "{config}"}, baseConfig() + deepKey, {}, 2,
       {"config error:", "line 7", "dotted parts"}, {}},
      refused(Via::kFile, "a table header 40,000 levels deep", baseConfig() + deepHeader, {"dotted parts"}),
      refused(Via::kFile, "quoted key parts 20,000 levels deep", deepQuoted + baseConfig(), {"dotted parts"}),
      refused(Via::kFile, "arrays 100,000 deep", "x = " + std::string(100'000, '[') + "\n" + baseConfig(),
              {"brackets open"}),
      // Dots inside strings and comments are no key parts.
      accepted("dots in strings and comments", baseConfig("snapshot_query = \"SELECT " + repeated("a.", 100) +
                                                          "b FROM t\"\n# " + repeated("x.", 100) + "\n")),
      accepted("dots in a multi-line string", baseConfig("snapshot_query = '''\nSELECT " + repeated("a.", 100) +
                                                         "b\nFROM t'''\n")),
  });
}

// 22,800 sources in one database took more than 10 s in the checks that keep sources apart (each
// source compared with every other); near-linear now.
BOOST_AUTO_TEST_CASE(many_sources_are_checked_in_near_linear_time) {
  std::string toml = "[http]\nlisten = \"127.0.0.1:0\"\n";
  for (int i = 0; i < 22'800; ++i) toml += "[[source]]\nname=\"s" + std::to_string(i) + "\"\ndsn=\"mysql://u@h/d\"\n";
  check({accepted("22,800 sources in one database", toml, {"name = \"s22799\""})}, std::chrono::seconds(10));
  // The same checks still catch what two of them share, however far apart.
  std::string clash = toml + "[[source]]\nname=\"late\"\ndsn=\"mysql://u@h/d\"\nsubject_prefix=\"control.s17.x\"\n";
  check({refused(Via::kFile, "the last of 22,801 sources inside the 18th's subjects", clash,
                 {"source.late.subject_prefix", "source s17"})},
        std::chrono::seconds(10));
}

// "${CREDENTIALS_DIRECTORY}/admin-token" (path keys take that prefix) was served as the admin
// token itself; the same for passwords and tokens. Refused, naming the *_file key to use.
BOOST_AUTO_TEST_CASE(a_secret_that_looks_like_a_reference_to_one_is_refused) {
  const std::string http = "[http]\nlisten = \"127.0.0.1:0\"\n";
  check({
      refused(Via::kFile, "admin_token a credentials path",
              http + "admin_token = \"${CREDENTIALS_DIRECTORY}/admin-token\"\n" + source("a"),
              {"config error: http.admin_token:", "admin_token_file"}),
      refused(Via::kEnv, "admin_token a credentials path", baseConfig(), {"http.admin_token", "admin_token_file"},
              {{"OUTBOX_BRIDGE_HTTP_ADMIN_TOKEN", "${CREDENTIALS_DIRECTORY}/admin-token"}}),
      refused(Via::kFile, "a source password ${VARIABLE}", baseConfig("password = \"${DB_PASSWORD}\"\n"),
              {"source.a.password", "password_file"}),
      refused(Via::kFile, "a nats token $VARIABLE", "[nats]\ntoken = \"$NATS_TOKEN\"\n" + baseConfig(),
              {"nats.token", "token_file"}),
      refused(Via::kFile, "a nats password naming a file", "[nats]\nuser = \"u\"\npassword = \"/etc/hostname\"\n" +
                                                              baseConfig(),
              {"nats.password", "file's path", "password_file"}),
      refused(Via::kFile, "a DSN password ${VARIABLE}", source("a").replace(source("a").find("u@"), 2, "u:${DBPW}@"),
              {"source.a.dsn", "password_file"}, {}, {"DBPW"}),
      refused(Via::kFile, "an admin token of 5 characters", http + "admin_token = \"tok3n\"\n" + source("a"),
              {"http.admin_token", "at least 16"}, {}, {"tok3n"}),
      accepted("a password with a '$' inside", baseConfig("password = \"pa$$word\"\n")),
  });
}

// Values whose meaning changed on the way in, with no word said.
BOOST_AUTO_TEST_CASE(a_value_whose_meaning_would_change_silently_is_refused) {
  const std::string longPrefix(5'000, 'p');
  const std::string longLiteral(10'000, 'q');
  const std::string tls = "tls_cert = \"/etc/hostname\"\ntls_key = \"/etc/hostname\"\n";
  check({
      // Every subject over the 3,072-byte limit: every row poison, or with quarantine set aside.
      refused(Via::kFile, "a 5 KB subject_prefix", baseConfig("subject_prefix = \"" + longPrefix + "\"\n"),
              {"source.a.subject_prefix", "3072"}, {}, {std::string(200, 'p')}),
      refused(Via::kFile, "a 5 KB subject_prefix with quarantine",
              baseConfig("on_poison = \"quarantine\"\nsubject_prefix = \"" + longPrefix + "\"\n"),
              {"source.a.subject_prefix", "poison"}),
      refused(Via::kFile, "a 10 KB literal subject", baseConfig("subject = \"control.a." + longLiteral + "\"\n"),
              {"source.a.subject", "3072"}, {}, {std::string(200, 'q')}),
      accepted("a 3,000-byte literal subject", baseConfig("subject = \"control.a." + std::string(3'000, 'q') + "\"\n")),
      // C calls cut a value at a NUL.
      refused(Via::kFile, "a NUL in password_file", baseConfig("password_file = \"/etc/hostname\\u0000.old\"\n"),
              {"source.a.password_file", "NUL"}),
      refused(Via::kFile, "a NUL in a stream name", baseConfig("stream = \"A\\u0000B\"\n"), {"source.a.stream", "NUL"}),
      refused(Via::kFile, "a NUL in nats.tls_ca", "[nats]\ntls_ca = \"/etc/hostname\\u0000x\"\n" + baseConfig(),
              {"nats.tls_ca", "NUL"}),
      // A password without a user was dropped, and the bridge connected without it.
      refused(Via::kFile, "[nats] password without user", "[nats]\npassword = \"pw-secret-1\"\n" + baseConfig(),
              {"nats.password", "nats.user"}, {}, {"pw-secret-1"}),
      refused(Via::kEnv, "[nats] password without user", baseConfig(), {"nats.password", "nats.user"},
              {{"OUTBOX_BRIDGE_NATS_PASSWORD", "pw-secret-2"}}, {"pw-secret-2"}),
      // An empty override must never weaken TLS.
      refused(Via::kEnv, "an empty HTTP_TLS_CERT", "[http]\nlisten = \"127.0.0.1:0\"\n" + tls + source("a"),
              {"http.tls_cert", "is empty"}, {{"OUTBOX_BRIDGE_HTTP_TLS_CERT", ""}}),
      refused(Via::kEnv, "an empty HTTP_TLS_KEY", "[http]\nlisten = \"127.0.0.1:0\"\n" + tls + source("a"),
              {"http.tls_key", "is empty"}, {{"OUTBOX_BRIDGE_HTTP_TLS_KEY", ""}}),
      refused(Via::kEnv, "an empty NATS_TLS_CA", "[nats]\ntls_ca = \"/etc/hostname\"\n" + baseConfig(),
              {"nats.tls_ca", "is empty"}, {{"OUTBOX_BRIDGE_NATS_TLS_CA", ""}}),
      refused(Via::kFile, "an empty tls_ca in the file", "[nats]\ntls_ca = \"\"\n" + baseConfig(), {"nats.tls_ca", "is empty"}),
      refused(Via::kEnv, "an empty password_file", baseConfig(), {"source.a.password_file", "is empty"},
              {{"OUTBOX_BRIDGE_SOURCE_A_PASSWORD_FILE", ""}}),
      // Values the server or the TLS library would take differently, or refuse later.
      refused(Via::kFile, "js_domain with a wildcard", "[nats]\njs_domain = \"hub.*\"\n" + baseConfig(), {"nats.js_domain"}),
      refused(Via::kFile, "a nats.user with a newline", "[nats]\nuser = \"a\\nb\"\n" + baseConfig(),
              {"nats.user", "\\x0a", "control character"}),
      refused(Via::kFile, "tls_server_name with a space", "[nats]\ntls_server_name = \"a b\"\n" + baseConfig(),
              {"nats.tls_server_name", "host name"}),
      // Two listeners on one socket passed "must differ" as text, and run exited 1 naming no key.
      refused(Via::kFile, "metrics_listen 08080 beside listen 8080",
              "[http]\nlisten = \"127.0.0.1:8080\"\nmetrics_listen = \"127.0.0.1:08080\"\n" + source("a"),
              {"http.metrics_listen", "http.listen"}),
      refused(Via::kFile, "metrics_listen on every interface beside listen",
              "[http]\nlisten = \"127.0.0.1:8080\"\nmetrics_listen = \"0.0.0.0:8080\"\n" + source("a"),
              {"http.metrics_listen"}),
      refused(Via::kEnv, "metrics_listen localhost beside 127.0.0.1", "[http]\nlisten = \"127.0.0.1:9000\"\n" + source("a"),
              {"http.metrics_listen"}, {{"OUTBOX_BRIDGE_HTTP_METRICS_LISTEN", "localhost:9000"}}),
      refused(Via::kFile, "a listen host the server would have to resolve",
              "[http]\nlisten = \"bridge.example:8080\"\n" + source("a"), {"http.listen", "IP address"}),
      // Found beside them: a DSN host that is no host was taken and shown as it came.
      refused(Via::kFile, "a DSN host with a space", "[[source]]\nname = \"a\"\ndsn = \"mysql://u@exa mple/db\"\n",
              {"source.a.dsn", "host"}),
      refused(Via::kEnv, "a DSN host starting with '-'", baseConfig(), {"source.a.dsn", "host"},
              {{"OUTBOX_BRIDGE_SOURCE_A_DSN", "mysql://u@-h/db"}}),
      accepted("both listeners on port 0", "[http]\nlisten = \"127.0.0.1:0\"\nmetrics_listen = \"127.0.0.1:0\"\n" +
                                               source("a")),
  });
}

// Every value an error echoes is cut and escaped (README, "Configuration"), and says what is wrong.
BOOST_AUTO_TEST_CASE(messages_escape_what_they_echo_and_say_what_is_wrong) {
  const std::string huge(900'000, 'h');
  check({
      refused(Via::kFile, "a placeholder holding an ESC sequence", baseConfig("subject = \"control.a.{\\u001b[31mred}\"\n"),
              {"source.a.subject", "\\x1b[31mred"}, {}, {"\x1b"}),
      refused(Via::kFile, "a placeholder holding a newline (a forged log line)",
              baseConfig("subject = \"control.a.{x\\nERROR forged}\"\n"), {"source.a.subject", "\\x0a"}, {},
              {"\nERROR forged"}),
      refused(Via::kFile, "a 900 KB placeholder", baseConfig("subject = \"control.a.{" + huge + "}\"\n"),
              {"source.a.subject", "bytes)"}, {}, {std::string(300, 'h')}),
      refused(Via::kFile, "a 300-character stream name", baseConfig("stream = \"" + std::string(300, 'S') + "\"\n"),
              {"source.a.stream", "at most 255"}),
      refused(Via::kFile, "a backslash in a stream name", baseConfig("stream = \"A\\\\B\"\n"),
              {"source.a.stream", "'\\'"}),
      refused(Via::kEnv, "an environment variable two keys share", source("a") + source("a_latest"),
              {"OUTBOX_BRIDGE_SOURCE_A_LATEST_STREAM", "ambiguous", "source.a.latest_stream", "source.a_latest.stream"},
              {{"OUTBOX_BRIDGE_SOURCE_A_LATEST_STREAM", "X"}}),
      refused(Via::kFile, "a DSN user holding an ESC (shown in every log line naming the DSN)",
              "[[source]]\nname = \"a\"\ndsn = \"mysql://u\\u001bx@h/db\"\n", {"source.a.dsn", "\\x1bx"}, {}, {"\x1b"}),
      refused(Via::kFile, "a bidirectional override in a stream name", baseConfig("stream = \"AB\\u202eC\"\n"),
              {"source.a.stream", "\\xe2\\x80\\xae"}, {}, {"\u202e"}),
      accepted("the same two sources without the variable", source("a") + source("a_latest")),
  });
}

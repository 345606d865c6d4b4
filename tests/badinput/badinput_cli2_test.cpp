// Issue 32, the parts at the command line's edge: what CLI11 echoed (a secret given to an unknown
// flag), what it did not name (a mistyped command or flag), numbers read other than as written,
// durations whose deadline wrapped, a snapshot_query that writes or locks, and files check-config
// passed that run could not load.
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <tuple>

#include "badinput.h"
#include "harness.h"
#include "nats/nkey.h"

using namespace outbox::badinput;

namespace {

const std::string kSecret = "Sekr1tValue";

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

const std::vector<std::string> kReplica{"replica", "--url", "http://127.0.0.1:1", "--source", "a"};

}  // namespace

// CLI11's "The following arguments were not expected: X --flag" printed the value of any flag
// it did not know, and every positional extra: a password typed as a flag went to the terminal
// and the logs. Every error of the parser now goes through one formatter that names unknown
// flags only (cut where a value could begin) and counts the other arguments.
BOOST_AUTO_TEST_CASE(the_command_line_never_echoes_a_value) {
  const std::vector<std::string> secret{kSecret};
  check({
      {Via::kFlag, "replica --nats-password X", with(kReplica, {"--nats-password", kSecret}), "", {}, 2,
       {"unknown option '--nats-password' for replica", "values are not shown"}, secret},
      {Via::kFlag, "run --admin-token X", {"run", "--config", "{config}", "--admin-token", kSecret}, baseConfig(), {}, 2,
       {"unknown option '--admin-token' for run"}, secret},
      {Via::kFlag, "check-config --password X", {"check-config", "--config", "{config}", "--password", kSecret},
       baseConfig(), {}, 2, {"unknown option '--password' for check-config"}, secret},
      {Via::kFlag, "prune --token=X", {"prune", "--config", "{config}", "--token=" + kSecret}, baseConfig(), {}, 2,
       {"unknown option '--token' for prune"}, secret},
      {Via::kFlag, "a value glued to a short flag (-pX)", {"migrate", "--config", "{config}", "-p" + kSecret},
       baseConfig(), {}, 2, {"unknown option '-p' for migrate"}, secret},
      {Via::kFlag, "a value glued to a long flag without '='", {"migrate", "--config", "{config}", "--password:" + kSecret},
       baseConfig(), {}, 2, {"unknown option '--password...' for migrate"}, secret},
      {Via::kFlag, "positional extras", {"check-config", "--config", "{config}", "extra", kSecret}, baseConfig(), {}, 2,
       {"2 arguments check-config does not take"}, secret},
      {Via::kFlag, "an unknown flag before the command", {"--password", kSecret, "check-config", "--config", "{config}"},
       baseConfig(), {}, 2, {"unknown option '--password' for outbox-bridge"}, secret},
      {Via::kFlag, "a value given to a flag that takes none", {"prune", "--config", "{config}", "--dry-run=" + kSecret},
       baseConfig(), {}, 2, {"prune: --dry-run takes no value"}, secret},
      {Via::kFlag, "a number flag given text", {"prune", "--config", "{config}", "--batch", kSecret}, baseConfig(), {}, 2,
       {"--batch: must be a whole number"}, secret},
      {Via::kFlag, "a seconds flag given text", with(kReplica, {"--duration", kSecret}), "", {}, 2,
       {"--duration: must be a number of seconds"}, secret},
      {Via::kFlag, "an escape sequence in an unknown flag", {"check-config", "--config", "{config}", "--x\x1b[2J"},
       baseConfig(), {}, 2, {"unknown option '--x...' for check-config"}, {"\x1b"}},
      {Via::kFlag, "an unknown command that is no word", {"r\x1b[2Jn"}, "", {}, 2, {"unknown command (not shown)"},
       {"\x1b"}},
      {Via::kFlag, "a long unknown flag is cut", {"check-config", "--config", "{config}", "--" + std::string(300, 'x')},
       baseConfig(), {}, 2, {"unknown option '--xxxxxxxx"}, {std::string(60, 'x')}},
  });
}

// "A subcommand is required" for `runn`, "--config is required" for `--confg`: the parser's
// message named what it missed, never what it did not understand.
BOOST_AUTO_TEST_CASE(what_was_not_understood_is_named) {
  check({
      {Via::kFlag, "runn", {"runn"}, "", {}, 2,
       {"unknown command 'runn' (did you mean run?)", "commands: run, migrate, prune, check-config"}, {"A subcommand"}},
      {Via::kFlag, "epoch bumpp", {"epoch", "bumpp", "--config", "{config}"}, baseConfig(), {}, 2,
       {"unknown command 'epoch bumpp' (did you mean bump?)"}, {"A subcommand"}},
      {Via::kFlag, "no command", {}, "", {}, 2, {"outbox-bridge needs a command (run, migrate"}, {"A subcommand"}},
      {Via::kFlag, "epoch without bump", {"epoch"}, "", {}, 2, {"epoch needs a command (bump)"}, {"A subcommand"}},
      {Via::kFlag, "check-config --confg", {"check-config", "--confg", "{config}"}, baseConfig(), {}, 2,
       {"unknown option '--confg' for check-config (did you mean --config?)"}, {"--config is required"}},
      {Via::kFlag, "check-config -c", {"check-config", "-c", "{config}"}, baseConfig(), {}, 2,
       {"unknown option '-c' for check-config (did you mean --config?)"}, {"--config is required"}},
      {Via::kFlag, "prune --dryrun", {"prune", "--config", "{config}", "--dryrun"}, baseConfig(), {}, 2,
       {"unknown option '--dryrun' for prune (did you mean --dry-run?)"}, {}},
      {Via::kFlag, "--config before the command", {"--config", "{config}", "check-config"}, baseConfig(), {}, 2,
       {"options go after the command: check-config --config"}, {}},
      {Via::kFlag, "--versionn", {"--versionn"}, "", {}, 2, {"unknown option '--versionn' for outbox-bridge (did you mean --version?)"},
       {}},
      {Via::kFlag, "a required flag missing names its variable", {"check-config"}, "", {}, 2,
       {"check-config: --config (or $OUTBOX_BRIDGE_CONFIG) is required"}, {}},
      {Via::kFlag, "a flag given twice", {"check-config", "--config", "{config}", "--config", "{config}"}, baseConfig(), {},
       2, {"check-config: --config is given more than once"}, {}},
      {Via::kFlag, "a flag without its value", {"replica", "--source", "a", "--url"}, "", {}, 2,
       {"replica: --url needs a value"}, {}},
      // healthcheck --url with --config read no config and said nothing: which one was meant?
      {Via::kFlag, "healthcheck --url and --config", {"healthcheck", "--url", "http://127.0.0.1:1", "--config", "/missing"},
       "", {}, 2, {"give --url or --config, not both", "keep --url"}, {}},
      // $OUTBOX_BRIDGE_CONFIG (an image sets it for every command) does not count as --config.
      {Via::kEnv, "healthcheck --url with $OUTBOX_BRIDGE_CONFIG", {"healthcheck", "--url", "http://127.0.0.1:1"}, "",
       {{"OUTBOX_BRIDGE_CONFIG", "/missing"}}, 1, {"healthcheck: GET http://127.0.0.1:1/readyz"}, {"not both"}},
  });
}

// CLI11 read integers with strtoll's base 0: `--batch 02000000` was octal 524,288 (and ran),
// `--batch 08` "not in range", `--batch 0x10` 16. Seconds went through std::stod (hex floats,
// exponents, leading spaces). Every number flag is now decimal, without a leading zero.
BOOST_AUTO_TEST_CASE(numbers_are_decimal_only) {
  const std::vector<std::string> prune{"prune", "--config", "{config}", "--dry-run", "--batch"};
  const std::vector<std::string> quarantine{"quarantine", "--config", "{config}", "--source", "a", "--reason", "r", "--id"};
  const std::vector<std::string> bump{"epoch", "bump", "--config", "{config}", "--source", "a", "--reason", "r", "--wait"};
  check({
      {Via::kFlag, "prune --batch 02000000 (octal)", with(prune, {"02000000"}), baseConfig(), {}, 2,
       {"--batch: must be a whole number from 1 to 1000000, in decimal without leading zeros"}, {}},
      {Via::kFlag, "prune --batch 08", with(prune, {"08"}), baseConfig(), {}, 2, {"--batch", "without leading zeros"}, {}},
      {Via::kFlag, "prune --batch 0x10", with(prune, {"0x10"}), baseConfig(), {}, 2, {"--batch", "decimal"}, {}},
      {Via::kFlag, "prune --batch +5", with(prune, {"+5"}), baseConfig(), {}, 2, {"--batch", "decimal"}, {}},
      {Via::kFlag, "prune --batch ' 5'", with(prune, {" 5"}), baseConfig(), {}, 2, {"--batch", "decimal"}, {}},
      {Via::kFlag, "prune --batch 1e3", with(prune, {"1e3"}), baseConfig(), {}, 2, {"--batch", "decimal"}, {}},
      {Via::kFlag, "prune --keep 010m", {"prune", "--config", "{config}", "--keep", "010m"}, baseConfig(), {}, 2,
       {"--keep: must be a duration", "without leading zeros"}, {}},
      {Via::kFlag, "quarantine --id 010", with(quarantine, {"010"}), baseConfig(), {}, 2,
       {"--id", "without leading zeros"}, {}},
      {Via::kFlag, "quarantine --id 0x10", with(quarantine, {"0x10"}), baseConfig(), {}, 2, {"--id"}, {}},
      {Via::kFlag, "epoch bump --wait 08s", with(bump, {"08s"}), baseConfig(), {}, 2,
       {"--wait: must be a duration", "without leading zeros"}, {}},
      {Via::kFlag, "replica --duration 0x10 (a hex float)", with(kReplica, {"--duration", "0x10"}), "", {}, 2,
       {"--duration: must be a number of seconds", "in decimal"}, {}},
      {Via::kFlag, "replica --duration 1e3", with(kReplica, {"--duration", "1e3"}), "", {}, 2, {"--duration"}, {}},
      {Via::kFlag, "replica --duration 010", with(kReplica, {"--duration", "010"}), "", {}, 2, {"--duration"}, {}},
      {Via::kFlag, "replica --verify-interval ' 1'", with(kReplica, {"--verify-interval", " 1"}), "", {}, 2,
       {"--verify-interval"}, {}},
      {Via::kFlag, "replica --verify-interval 0.0001 (0 ms by rounding: never)",
       with(kReplica, {"--verify-interval", "0.0001"}), "", {}, 2, {"--verify-interval", "at least 0.001"}, {}},
      {Via::kFlag, "healthcheck --timeout 0x1p1", {"healthcheck", "--url", "http://127.0.0.1:1", "--timeout", "0x1p1"}, "",
       {}, 2, {"--timeout"}, {}},
  });
}

// `replica --duration 9223372036` exited 0 at once: now + 292 years of nanoseconds wrapped into
// the past. A wait any flag takes is at most 100 years, said in the message; and the waits
// saturate (tests/unit/deadline_test.cpp), so the longest one allowed waits.
BOOST_AUTO_TEST_CASE(durations_are_capped_where_they_enter) {
  const std::vector<std::string> bump{"epoch", "bump", "--config", "{config}", "--source", "a", "--reason", "r", "--wait"};
  check({
      {Via::kFlag, "replica --duration 9223372036", with(kReplica, {"--duration", "9223372036"}), "", {}, 2,
       {"--duration: must be a number of seconds from 0 to 3155760000 (100 years)"}, {}},
      {Via::kFlag, "replica --duration over 100 years", with(kReplica, {"--duration", "3155760001"}), "", {}, 2,
       {"--duration", "100 years"}, {}},
      {Via::kFlag, "epoch bump --wait 106751d", with(bump, {"106751d"}), baseConfig(), {}, 2,
       {"--wait: is out of range: at most 36525d (100 years)"}, {}},
      {Via::kFlag, "prune --keep 200000d", {"prune", "--config", "{config}", "--keep", "200000d"}, baseConfig(), {}, 2,
       {"--keep", "100 years"}, {}},
  });
  // The longest allowed runs (it waits for the bridge, which is not there) until it is killed.
  check({{Via::kFlag, "replica --duration 3155760000 runs", with(kReplica, {"--duration", "3155760000"}), "", {}, -2,
          {}, {"stopped at version"}}},
        std::chrono::seconds(2));
}

// snapshot_query = "SELECT 1 --;\nDELETE FROM t" was accepted: the check took `--;` for a
// comment, the server does not, and a GET of the snapshot ran the DELETE. Read as the server
// reads it, and refused when it writes, locks, waits or runs an executable comment.
BOOST_AUTO_TEST_CASE(a_snapshot_query_that_writes_or_locks_is_refused) {
  std::vector<Row> rows;
  const std::pair<const char*, const char*> queries[] = {
      {"SELECT 1 --;\nDELETE FROM t", "second statement"},
      {"SELECT id FROM t /*! FOR UPDATE */", "executable comment"},
      {"SELECT id FROM t /*M!100000 ; DELETE FROM t */", "executable comment"},
      {"SELECT * FROM t INTO OUTFILE '/tmp/x'", "INTO OUTFILE"},
      {"SELECT id INTO @v FROM t", "INTO"},
      {"SELECT id FROM t FOR UPDATE", "FOR UPDATE"},
      {"SELECT id FROM t FOR SHARE", "FOR SHARE"},
      {"SELECT id FROM t LOCK IN SHARE MODE", "LOCK IN SHARE MODE"},
      {"SELECT id FROM t PROCEDURE ANALYSE()", "PROCEDURE"},
      {"SELECT GET_LOCK('g', 0) AS id", "GET_LOCK"},
      {"SELECT id, `SLEEP`(60) FROM t", "SLEEP"},
      {"SELECT NEXT VALUE FOR s AS id", "NEXT VALUE FOR"},
      {"SELECT 'x\\', SLEEP(5) -- '", "NO_BACKSLASH_ESCAPES"},
  };
  for (const auto& [query, why] : queries) {
    std::string toml;  // the query in a TOML basic string
    for (char c : std::string(query)) {
      toml += c == '\n' ? std::string("\\n") : c == '\\' || c == '"' ? std::string{'\\', c} : std::string(1, c);
    }
    rows.push_back({Via::kFile, query, {"check-config", "--config", "{config}"},
                    baseConfig("snapshot_query = \"" + toml + "\"\n"), {}, 2,
                    {"config error: source.a.snapshot_query:", why}, {}});
  }
  rows.push_back({Via::kEnv, "--; by environment, refused by run", {"run", "--config", "{config}"}, baseConfig(),
                  {{"OUTBOX_BRIDGE_SOURCE_A_SNAPSHOT_QUERY", "SELECT 1 --;\nDELETE FROM t"}}, 2,
                  {"source.a.snapshot_query", "second statement"}, {}});
  rows.push_back({Via::kFile, "SELECT 1 --1 is a read", {"check-config", "--config", "{config}"},
                  baseConfig("snapshot_query = \"SELECT 1 --1 AS id\"\n"), {}, 0, {}, {}});
  check(rows);
}

namespace {

// The TLS and login files of the rows below, made once: a CA and a certificate it signed (good),
// a second key (not the certificate's), an encrypted key, a file that is no PEM, nkey seeds.
struct Files {
  std::string dir, ca, cert, key, otherKey, encryptedKey, junk, seed, badSeed, creds, credsBadSeed, credsNoJwt;
  std::string seedText, badSeedText;
};

const Files& files() {
  static const Files f = [] {
    Files f;
    f.dir = fixtures() + "/tls32";
    std::system(("mkdir -p '" + f.dir + "'").c_str());
    outbox::test::makeCa(f.dir + "/test");
    outbox::test::makeCertificate(f.dir + "/test-ca.pem", f.dir + "/test-ca-key.pem", f.dir + "/server", "IP:127.0.0.1");
    outbox::test::makeCertificate(f.dir + "/test-ca.pem", f.dir + "/test-ca-key.pem", f.dir + "/other", "IP:127.0.0.1");
    f.ca = f.dir + "/test-ca.pem";
    f.cert = f.dir + "/server.pem";
    f.key = f.dir + "/server-key.pem";
    f.otherKey = f.dir + "/other-key.pem";
    f.encryptedKey = f.dir + "/encrypted-key.pem";
    auto made = outbox::test::runCommand(fmt::format("openssl pkey -in {} -aes256 -passout pass:Passw0rdOfKey -out {}",
                                                     f.key, f.encryptedKey));
    BOOST_REQUIRE_MESSAGE(made.exitCode == 0, made.err);
    f.junk = f.dir + "/junk.pem";
    std::ofstream(f.junk) << "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n";
    auto nkey = outbox::nats::newUserNkey();
    BOOST_REQUIRE(nkey.isOk());
    f.seedText = nkey->seed;
    f.badSeedText = "SU" + std::string(56, 'A');  // the shape of a seed, a wrong checksum
    f.seed = f.dir + "/good.nk";
    std::ofstream(f.seed) << f.seedText << "\n";
    f.badSeed = f.dir + "/bad.nk";
    std::ofstream(f.badSeed) << f.badSeedText << "\n";
    auto creds = [&](const std::string& jwt, const std::string& seed) {
      return "-----BEGIN NATS USER JWT-----\n" + jwt + "\n------END NATS USER JWT------\n\n"
             "-----BEGIN USER NKEY SEED-----\n" + seed + "\n------END USER NKEY SEED------\n";
    };
    f.creds = f.dir + "/good.creds";
    std::ofstream(f.creds) << creds("eyJhbGciOiJlZDI1NTE5In0.eyJzdWIiOiJVIn0.c2ln", f.seedText);
    f.credsBadSeed = f.dir + "/bad-seed.creds";
    std::ofstream(f.credsBadSeed) << creds("eyJhbGciOiJlZDI1NTE5In0.eyJzdWIiOiJVIn0.c2ln", f.badSeedText);
    f.credsNoJwt = f.dir + "/no-jwt.creds";
    std::ofstream(f.credsNoJwt) << "user = bob\npassword = x\n";
    return f;
  }();
  return f;
}

std::string withDsn(const std::string& parameters) {
  return "[http]\nlisten = \"127.0.0.1:0\"\n\n[[source]]\nname = \"a\"\ndsn = \"mysql://u@127.0.0.1:1/db?" + parameters +
         "\"\n";
}

}  // namespace

// check-config passed a tls_ca, a certificate or key that is no PEM, a garbage nkey seed or creds
// file; `run` then refused some only after it listened, and retried a garbage creds file or a
// DSN's bad ssl-ca for ever. Both now load every such file as `run` would, exit 2 naming the key.
BOOST_AUTO_TEST_CASE(check_config_loads_the_files_run_loads) {
  const Files& f = files();
  const std::vector<std::string> checkConfig{"check-config", "--config", "{config}"};
  const std::vector<std::string> run{"run", "--config", "{config}"};
  auto nats = [](const std::string& lines) { return "[nats]\n" + lines + baseConfig(); };
  auto http = [](const std::string& lines) {
    return "[http]\nlisten = \"127.0.0.1:0\"\n" + lines + "\n[[source]]\nname = \"a\"\ndsn = \"mysql://u@127.0.0.1:1/db\"\n";
  };
  const std::vector<std::string> secrets{f.seedText, f.badSeedText, "Passw0rdOfKey"};
  std::vector<Row> rows;
  const std::tuple<std::string, std::string, std::vector<std::string>> cases[] = {
      {"nats.tls_ca not PEM", nats("tls_ca = \"" + f.junk + "\"\n"), {"nats.tls_ca:", "holds no PEM CA certificate"}},
      {"nats.tls_ca a private key", nats("tls_ca = \"" + f.key + "\"\n"), {"nats.tls_ca:"}},
      {"nats.tls_cert not PEM", nats("tls_cert = \"" + f.junk + "\"\ntls_key = \"" + f.key + "\"\n"),
       {"nats.tls_cert:", "not a PEM certificate chain"}},
      {"nats.tls_key of another certificate", nats("tls_cert = \"" + f.cert + "\"\ntls_key = \"" + f.otherKey + "\"\n"),
       {"nats.tls_key:", "is not the private key of nats.tls_cert"}},
      {"nats.tls_key encrypted", nats("tls_cert = \"" + f.cert + "\"\ntls_key = \"" + f.encryptedKey + "\"\n"),
       {"nats.tls_key:", "without a passphrase"}},
      {"nats.nkey_seed_file garbage", nats("nkey_seed_file = \"" + f.badSeed + "\"\n"),
       {"nats.nkey_seed_file:", "no NATS user nkey seed"}},
      {"nats.nkey_seed_file a certificate", nats("nkey_seed_file = \"" + f.cert + "\"\n"), {"nats.nkey_seed_file:"}},
      {"nats.creds_file garbage", nats("creds_file = \"" + f.credsNoJwt + "\"\n"), {"nats.creds_file:", "no user JWT"}},
      {"nats.creds_file with a bad seed", nats("creds_file = \"" + f.credsBadSeed + "\"\n"),
       {"nats.creds_file:", "not a NATS user nkey seed"}},
      {"http.tls_cert not PEM", http("tls_cert = \"" + f.junk + "\"\ntls_key = \"" + f.key + "\""),
       {"http.tls_cert:", "not a PEM certificate chain"}},
      {"http.tls_key of another certificate", http("tls_cert = \"" + f.cert + "\"\ntls_key = \"" + f.otherKey + "\""),
       {"http.tls_key:", "is not the private key of http.tls_cert"}},
      {"http.tls_key encrypted", http("tls_cert = \"" + f.cert + "\"\ntls_key = \"" + f.encryptedKey + "\""),
       {"http.tls_key:", "without a passphrase"}},
      {"dsn ssl-ca not PEM", withDsn("ssl-ca=" + f.junk), {"source.a.dsn (ssl-ca):", "holds no PEM CA certificate"}},
      {"dsn ssl-cert not PEM", withDsn("ssl-cert=" + f.junk + "&ssl-key=" + f.key), {"source.a.dsn (ssl-cert):"}},
      {"dsn ssl-key of another certificate", withDsn("ssl-cert=" + f.cert + "&ssl-key=" + f.otherKey),
       {"source.a.dsn (ssl-key):", "is not the private key"}},
  };
  for (const auto& [what, toml, expected] : cases) {
    rows.push_back({Via::kFile, "check-config: " + what, checkConfig, toml, {}, 2, expected, secrets});
    rows.push_back({Via::kFile, "run: " + what, run, toml, {}, 2, expected, secrets});
  }
  // The commands that connect to a source's database check its DSN's files first too (exit 1
  // with the client library's TLS error before; an encrypted key could ask a terminal).
  const std::vector<std::vector<std::string>> databaseCommands{
      {"migrate", "--config", "{config}"},
      {"prune", "--config", "{config}", "--dry-run"},
      {"quarantine", "--config", "{config}", "--source", "a", "--id", "1", "--reason", "r"},
      {"epoch", "bump", "--config", "{config}", "--source", "a", "--reason", "r"}};
  for (const auto& command : databaseCommands) {
    rows.push_back({Via::kFile, command[0] + ": dsn ssl-key encrypted", command,
                    withDsn("ssl-cert=" + f.cert + "&ssl-key=" + f.encryptedKey), {}, 2,
                    {"source.a.dsn (ssl-key):", "without a passphrase"}, secrets});
  }
  rows.push_back({Via::kEnv, "OUTBOX_BRIDGE_NATS_TLS_CA not PEM", checkConfig, baseConfig(),
                  {{"OUTBOX_BRIDGE_NATS_TLS_CA", f.junk}}, 2, {"nats.tls_ca:"}, {}});
  // Files that load pass, as before (the servers decide the rest when `run` connects).
  rows.push_back({Via::kFile, "every file good", checkConfig,
                  "[nats]\ntls_ca = \"" + f.ca + "\"\ntls_cert = \"" + f.cert + "\"\ntls_key = \"" + f.key +
                      "\"\nnkey_seed_file = \"" + f.seed + "\"\n" +
                      http("tls_cert = \"" + f.cert + "\"\ntls_key = \"" + f.key + "\""),
                  {}, 0, {}, secrets});
  rows.push_back({Via::kFile, "a creds file", checkConfig, nats("creds_file = \"" + f.creds + "\"\n"), {}, 0, {}, secrets});
  rows.push_back({Via::kFile, "a DSN's files", checkConfig,
                  withDsn("ssl-ca=" + f.ca + "&ssl-cert=" + f.cert + "&ssl-key=" + f.key), {}, 0, {}, secrets});
  check(rows);
  // The replica's flags are the same settings.
  check({{Via::kFlag, "replica --nats-ca not PEM", with(kReplica, {"--nats-ca", f.junk}), "", {}, 2,
          {"replica: --nats-ca:", "holds no PEM CA certificate"}, {}},
         {Via::kFlag, "replica --nats-creds garbage", with(kReplica, {"--nats-creds", f.credsNoJwt}), "", {}, 2,
          {"replica: --nats-creds:"}, {}},
         {Via::kFlag, "replica --nats-nkey-seed garbage", with(kReplica, {"--nats-nkey-seed", f.badSeed}), "", {}, 2,
          {"replica: --nats-nkey-seed:"}, {f.badSeedText}}});
}

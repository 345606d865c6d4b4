#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "cli/cli.h"
#include "common/signal_watcher.h"
#include "common/stop_token.h"
#include "common/tls_files.h"
#include "replica/mysql_inbox.h"
#include "replica/replica.h"

namespace outbox::cli {

namespace {

void printLine(const std::string& line) {
  std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", std::gmtime(&now));
  std::printf("%sZ %s\n", stamp, line.c_str());
  std::fflush(stdout);
}

// A secret from VAR, or from the file VAR_FILE names (its first line); "" when neither is set.
std::string secretFromEnvironment(const std::string& var) {
  if (const char* v = std::getenv(var.c_str())) return v;
  const char* file = std::getenv((var + "_FILE").c_str());
  if (file == nullptr) return "";
  std::string content;
  try {
    content = readSmallFile(var + "_FILE", file, kMaxSecretBytes);
  } catch (const ConfigError& e) {
    throw Exit{kExitUsage, fmt::format("replica: {}: {}", e.key(), e.reason())};
  }
  std::string line = content.substr(0, content.find('\n'));
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.empty() || line.find('\0') != std::string::npos) {
    throw Exit{kExitUsage,
               fmt::format("replica: {}_FILE: '{}' holds no secret on its first line, or a NUL", var, file)};
  }
  return line;
}

// The store behind --inbox (its variables are OUTBOX_REPLICA_*, not OUTBOX_BRIDGE_*: the bridge
// refuses an OUTBOX_BRIDGE_ variable that is no config key, and a replica may run in its
// environment); Exit{2} for a DSN the bridge would refuse, a password in it (a flag shows in
// `ps`), or TLS files that cannot be loaded. Its tables are created at its first connection: a
// database that cannot be reached now is retried, as nats-server is.
std::shared_ptr<ReplicaStore> inboxOrExit(const std::string& text, const std::string& source) {
  Dsn dsn;
  try {
    dsn = Dsn::parse("--inbox", text);
  } catch (const ConfigError& e) {
    throw Exit{kExitUsage, fmt::format("replica: {}: {}", e.key(), e.reason())};
  }
  if (!dsn.password.empty()) {
    throw Exit{kExitUsage, "replica: --inbox: no password in the DSN (it would show in `ps`): set "
                           "OUTBOX_REPLICA_INBOX_PASSWORD or OUTBOX_REPLICA_INBOX_PASSWORD_FILE"};
  }
  dsn.password = secretFromEnvironment("OUTBOX_REPLICA_INBOX_PASSWORD");
  auto require = [](const Status& s) {
    if (!s.isOk()) throw Exit{kExitUsage, "replica: " + s.message()};
  };
  if (!dsn.sslCa.empty()) require(tls::checkCaFile("--inbox (ssl-ca)", dsn.sslCa));
  if (!dsn.sslCert.empty() || !dsn.sslKey.empty()) {
    require(tls::checkCertificateAndKey("--inbox (ssl-cert)", dsn.sslCert, "--inbox (ssl-key)", dsn.sslKey));
  }
  return std::make_shared<MysqlInbox>(db::paramsFrom(dsn), source);
}

}  // namespace

Command addReplicaOptions(CLI::App* cmd) {
  struct Args {
    std::string url, source, nats = "nats://127.0.0.1:4222", dump, inbox;
    NatsConfig connect;
    double verifyInterval = 300.0;
    double duration = 0;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--url", args->url, "the bridge's base URL, e.g. http://127.0.0.1:8080")->required();
  cmd->add_option("--source", args->source, "source name")->required();
  cmd->add_option("--nats", args->nats, "nats-server URL, or several comma-separated (default nats://127.0.0.1:4222)")
      ->envname("OUTBOX_BRIDGE_NATS_URL");
  // The bridge's [nats] settings, by flag or by the same environment variables; the password and
  // the token by environment only (a flag would show in `ps`).
  const std::pair<const char*, std::string*> natsFlags[] = {
      {"user", &args->connect.user},          {"creds", &args->connect.credsFile},
      {"nkey-seed", &args->connect.nkeySeedFile}, {"ca", &args->connect.tlsCa},
      {"cert", &args->connect.tlsCert},       {"key", &args->connect.tlsKey},
      {"server-name", &args->connect.tlsServerName}, {"js-domain", &args->connect.jsDomain}};
  const std::map<std::string, std::string> envKeys{{"user", "USER"},          {"creds", "CREDS_FILE"},
                                                   {"nkey-seed", "NKEY_SEED_FILE"}, {"ca", "TLS_CA"},
                                                   {"cert", "TLS_CERT"},      {"key", "TLS_KEY"},
                                                   {"server-name", "TLS_SERVER_NAME"}, {"js-domain", "JS_DOMAIN"}};
  for (const auto& [flag, field] : natsFlags) {
    cmd->add_option(std::string("--nats-") + flag, *field, fmt::format("as [nats] {} of the bridge's config",
                                                                       envKeys.at(flag)))
        ->envname("OUTBOX_BRIDGE_NATS_" + envKeys.at(flag));
  }
  cmd->add_option("--dump", args->dump, "write the replica as JSON to this file after each verification and at exit")
      ->check(CLI::Validator(
          [](std::string& path) -> std::string {
            std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/') + 1);
            if (path.empty() || path.back() == '/') return "must name a file";
            return CLI::ExistingDirectory(dir).empty() ? "" : fmt::format("the directory '{}' does not exist", dir);
          },
          "FILE"));
  cmd->add_option("--inbox", args->inbox,
                  "keep the replica and its inbox row in this MySQL/MariaDB database (a DSN as a source's, "
                  "mysql://USER@HOST[:PORT]/DATABASE[?ssl-mode=...&ssl-ca=...&ssl-cert=...&ssl-key=...]; the password "
                  "by OUTBOX_REPLICA_INBOX_PASSWORD or _FILE): a restart resumes from it (default: in memory)")
      ->envname("OUTBOX_REPLICA_INBOX");
  cmd->add_option("--verify-interval", args->verifyInterval,
                  "seconds between checks against ?summary=true, ±20% (default 300; 0: never)")
      ->check(secondsBetween(0, 86400))
      // Below a millisecond it would be 0 ms (never) by rounding: said, not taken (as the Go CLI).
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            const double value = std::strtod(text.c_str(), nullptr);
            return value > 0 && value < 0.001 ? "must be 0 (never) or at least 0.001 seconds" : "";
          },
          "SECONDS"));
  cmd->add_option("--duration", args->duration, "stop after this many seconds (default: run until SIGTERM)")
      ->check(secondsBetween(0, kMaxFlagSeconds));
  return [args]() {
    requireBaseUrl("--url", args->url);
    try {
      checkNatsUrls("--nats", args->nats);
    } catch (const ConfigError& e) {
      throw Exit{kExitUsage, fmt::format("{}: {}", e.key(), e.reason())};
    }
    StopSignal stop;
    SignalWatcher signals(stop);
    Replica::Options options;
    options.baseUrl = args->url;
    options.source = args->source;
    options.nats = args->connect;
    options.nats.url = args->nats;
    for (const auto& [name, field] : {std::pair<const char*, std::string*>{"PASSWORD", &options.nats.password},
                                      {"TOKEN", &options.nats.token}}) {
      *field = secretFromEnvironment(std::string("OUTBOX_BRIDGE_NATS_") + name);
    }
    const int logins = !options.nats.user.empty() + !options.nats.token.empty() + !options.nats.credsFile.empty() +
                       !options.nats.nkeySeedFile.empty();
    if (logins > 1) {
      throw Exit{kExitUsage, "replica: give one way to log in to nats-server (user, token, creds, nkey seed)"};
    }
    if (options.nats.tlsCert.empty() != options.nats.tlsKey.empty()) {
      throw Exit{kExitUsage, "replica: --nats-cert and --nats-key go together"};
    }
    if (Status s = nats::checkSettings(options.nats, {{"tls_ca", "--nats-ca"}, {"tls_cert", "--nats-cert"},
                                                      {"tls_key", "--nats-key"}, {"creds_file", "--nats-creds"},
                                                      {"nkey_seed_file", "--nats-nkey-seed"}});
        !s.isOk()) {
      throw Exit{kExitUsage, "replica: " + s.message()};
    }
    if (!args->inbox.empty()) options.store = inboxOrExit(args->inbox, args->source);
    options.verifyInterval = std::chrono::milliseconds(static_cast<int64_t>(args->verifyInterval * 1000));
    Replica* self = nullptr;
    auto dump = [&]() {
      if (args->dump.empty() || self == nullptr) return;
      std::string tmp = args->dump + ".tmp";
      std::ofstream(tmp) << self->dumpJson();
      std::rename(tmp.c_str(), args->dump.c_str());
    };
    options.report = [&](const std::string& line) {
      printLine(line);
      if (line.find("] verified at version") != std::string::npos) dump();
    };
    Replica replica(options);
    self = &replica;
    std::thread timer;
    if (args->duration > 0) {
      timer = std::thread([&] {
        stop.waitFor(std::chrono::milliseconds(static_cast<int64_t>(args->duration * 1000)));
        stop.request();
      });
    }
    replica.run(stop);
    // Always: a re-bootstrap at the version last dumped (a checksum that differed there) changed
    // the records, and a dump skipped then kept the ones the source no longer has.
    dump();
    printLine(fmt::format("[{}] stopped at version {} ({} records, checksum verified at version {})", args->source,
                          replica.appliedVersion(), replica.size(), replica.lastVerifiedVersion()));
    if (timer.joinable()) timer.join();
    return kExitOk;
  };
}

}  // namespace outbox::cli

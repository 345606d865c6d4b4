#pragma once

#include <functional>
#include <span>
#include <string>

#include <CLI/CLI.hpp>

#include "config/config.h"

namespace outbox::cli {

// Exit codes of every command.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// Thrown by commands to leave with an exit code after printing `message` to stderr.
struct Exit {
  int code;
  std::string message;
};

// --config FILE, required unless $OUTBOX_BRIDGE_CONFIG names the file.
CLI::Option* addConfigOption(CLI::App* command, std::string& path);
// Loads the config or throws Exit{2} naming the key and the reason; then sets up logging as the
// config says ([log] level and format) for `command`.
Config loadOrExit(const std::string& path, const std::string& command);
const SourceConfig& sourceOrExit(const Config& config, const std::string& name);
// Loads every TLS and login file of the config as `run` would ([nats] tls_ca, tls_cert/tls_key,
// creds_file, nkey_seed_file; [http] tls_cert/tls_key; each DSN's ssl-ca, ssl-cert/ssl-key), or
// throws Exit{2} naming the key and why: check-config's 0 means `run` can use them, and `run`
// refuses them at start rather than retrying a connect for ever. Starts nats.c's threads: after
// any SignalWatcher.
void checkFilesOrExit(const Config& config);
// The same for one source's DSN files: migrate, prune, quarantine and epoch bump, before they
// connect to its database.
void checkDsnFilesOrExit(const SourceConfig& source);

// The longest wait or run any flag takes: 100 years, so that now + it fits every clock (a
// steady_clock time point wraps after 292 years of nanoseconds).
inline constexpr int64_t kMaxFlagSeconds = 36525LL * 86400;

// Flag rules (CLI11 validators; a flag that breaks one exits 2 naming it, and its reason never
// echoes the value). Numbers are decimal only: no sign, no leading zero (CLI11 reads "010" as
// octal 8, and "0x10" as 16), no exponent, no spaces.
// A number of seconds from `min` to `max` (at most kMaxFlagSeconds), with an optional fraction.
CLI::Validator secondsBetween(double min, double max);
// A whole number from `min` to `max`.
CLI::Validator wholeNumber(int64_t min, int64_t max);
// A duration as the config writes them ("30s", "1h30m"; each number decimal without a leading
// zero), at most kMaxFlagSeconds.
CLI::Validator durationText();
// A source name as the config has them (also: never a path to paste into a URL).
CLI::Validator sourceName();
// Every command's --source and --reason (1 to 1000 characters, not blank) follow one rule.
void applyFlagRules(CLI::App& app);
// --url of a bridge: http[s]://HOST[:PORT], no credentials; else Exit{2} naming `flag`.
void requireBaseUrl(const std::string& flag, const std::string& url);

// What runs a subcommand, with the values its options were given.
using Command = std::function<int()>;

// A subcommand as main() registers it: CLI11 lists `name` and `summary` in --help, and
// `addOptions` adds the command's options to it and returns the function that runs it.
struct Subcommand {
  const char* name;
  const char* summary;
  Command (*addOptions)(CLI::App* cmd);
};
// Every subcommand (commands.cpp), in the order --help lists them.
std::span<const Subcommand> subcommands();

}  // namespace outbox::cli

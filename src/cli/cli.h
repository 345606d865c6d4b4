#pragma once

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

// Each subcommand registers its options and returns the function that runs it.
using Command = std::function<int()>;
Command addRun(CLI::App& app);
Command addMigrate(CLI::App& app);
Command addCheckConfig(CLI::App& app);
Command addEpoch(CLI::App& app);
Command addQuarantine(CLI::App& app);
Command addReplica(CLI::App& app);
Command addPrune(CLI::App& app);
Command addHealthcheck(CLI::App& app);

}  // namespace outbox::cli

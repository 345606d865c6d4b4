#include "cli/cli.h"
#include "common/log.h"

namespace outbox::cli {

CLI::Option* addConfigOption(CLI::App* command, std::string& path) {
  return command->add_option("--config", path, fmt::format("TOML config file (or ${})", kConfigEnvironmentVariable))
      ->envname(kConfigEnvironmentVariable)
      ->required();
}

Config loadOrExit(const std::string& path, const std::string& command) {
  Config config;
  try {
    config = loadConfig(path, processEnvironment());
  } catch (const ConfigError& e) {
    throw Exit{kExitUsage, fmt::format("config error: {}: {}", e.key(), e.reason())};
  }
  setupLogging(config.logLevel, config.logFormat, command);
  return config;
}

const SourceConfig& sourceOrExit(const Config& config, const std::string& name) {
  const SourceConfig* source = config.findSource(name);
  if (source == nullptr) {
    std::string known;
    for (const auto& s : config.sources) known += (known.empty() ? "" : ", ") + s.name;
    throw Exit{kExitUsage, fmt::format("unknown source '{}' (configured: {})", name, known)};
  }
  return *source;
}

}  // namespace outbox::cli

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/cli.h"

namespace outbox::cli {

Config loadOrExit(const std::string& path) {
  try {
    return loadConfig(path, processEnvironment());
  } catch (const ConfigError& e) {
    throw Exit{kExitUsage, fmt::format("config error: {}: {}", e.key(), e.reason())};
  }
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

void setupLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("outbox-bridge");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%-5l%$ %v");
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::flush_on(spdlog::level::info);
}

}  // namespace outbox::cli

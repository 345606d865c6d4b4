#include <cmath>

#include "admin/actions.h"
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

CLI::Validator secondsBetween(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        double value = 0;
        try {
          size_t used = 0;
          value = std::stod(text, &used);
          if (used != text.size()) return "not a number of seconds";
        } catch (const std::exception&) {
          return "not a number of seconds";
        }
        if (!std::isfinite(value) || value < min || value > max) {
          return fmt::format("must be a number of seconds from {} to {}", min, max);
        }
        return "";
      },
      "SECONDS");
}

CLI::Validator sourceName() {
  return CLI::Validator(
      [](std::string& name) -> std::string {
        return isSqlIdentifier(name) ? "" : "must be a source name (^[A-Za-z_][A-Za-z0-9_]{0,63}$)";
      },
      "NAME");
}

namespace {

// admin::checkReason's rule, checked where the flag enters.
CLI::Validator reasonText() {
  return CLI::Validator(
      [](std::string& reason) -> std::string {
        Status s = admin::checkReason(reason);
        return s.isOk() ? std::string() : s.message();
      },
      "TEXT");
}

}  // namespace

void applyFlagRules(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands({})) {
    if (CLI::Option* source = sub->get_option_no_throw("--source")) source->check(sourceName());
    if (CLI::Option* reason = sub->get_option_no_throw("--reason")) reason->check(reasonText());
    applyFlagRules(*sub);
  }
}

void requireBaseUrl(const std::string& flag, const std::string& url) {
  try {
    checkHttpBaseUrl(flag, url);
  } catch (const ConfigError& e) {
    throw Exit{kExitUsage, fmt::format("{}: {}", e.key(), e.reason())};
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

}  // namespace outbox::cli

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>

#include "admin/actions.h"
#include "cli/cli.h"
#include "common/log.h"
#include "common/tls_files.h"
#include "http/tls_files.h"
#include "nats/jetstream.h"

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

namespace {

// Whether `text` is a decimal number as the flags take them: digits without a leading zero (a
// lone 0 is fine), then, when `fraction`, optionally '.' and digits.
bool isDecimal(std::string_view text, bool fraction) {
  const size_t dot = fraction ? text.find('.') : std::string_view::npos;
  const std::string_view whole = text.substr(0, dot);
  auto digits = [](std::string_view d) {
    return !d.empty() && std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(whole) || (whole.size() > 1 && whole[0] == '0')) return false;
  return dot == std::string_view::npos || digits(text.substr(dot + 1));
}

}  // namespace

CLI::Validator secondsBetween(double min, double max) {
  max = std::min(max, static_cast<double>(kMaxFlagSeconds));
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        const std::string range = fmt::format("must be a number of seconds from {} to {}{}, in decimal (e.g. 2.5)", min,
                                              max, max == static_cast<double>(kMaxFlagSeconds) ? " (100 years)" : "");
        // 20 digits hold any number in range; a longer text is not one (and stod would take it).
        if (text.size() > 30 || !isDecimal(text, true)) return range;
        const double value = std::strtod(text.c_str(), nullptr);
        if (!std::isfinite(value) || value < min || value > max) return range;
        return "";
      },
      "SECONDS");
}

CLI::Validator wholeNumber(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        int64_t value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (!isDecimal(text, false) || ec != std::errc() || end != text.data() + text.size() || value < min ||
            value > max) {
          return fmt::format("must be a whole number from {} to {}, in decimal without leading zeros", min, max);
        }
        return "";
      },
      "N");
}

CLI::Validator durationText() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::string rule =
            "must be a duration such as 30s, 10m, 1h30m or 7d (decimal numbers without leading zeros)";
        const std::string range = fmt::format("is out of range: at most {}d (100 years)", kMaxFlagSeconds / 86400);
        // Each number in it: "08m" is refused, as a whole number flag refuses 08.
        for (size_t i = 0; i < text.size();) {
          size_t j = i;
          while (j < text.size() && text[j] >= '0' && text[j] <= '9') ++j;
          if (j - i > 1 && text[i] == '0') return rule;
          i = j == i ? i + 1 : j;
        }
        try {
          if (parseDuration("", text).count() / 1000 > kMaxFlagSeconds) return range;
        } catch (const ConfigError& e) {
          return e.reason().find("out of range") != std::string::npos ? range : rule;
        }
        return "";
      },
      "DURATION");
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

void checkFilesOrExit(const Config& config) {
  auto require = [](const Status& s) {
    if (!s.isOk()) throw Exit{kExitUsage, "config error: " + s.message()};
  };
  require(nats::checkSettings(config.nats));
  require(http::checkHttpTlsFiles(config.http));
  for (const auto& s : config.sources) checkDsnFilesOrExit(s);
}

void checkDsnFilesOrExit(const SourceConfig& source) {
  // The MySQL client library loads these with OpenSSL at each connect (and would ask a terminal
  // for an encrypted key's passphrase).
  auto require = [](const Status& s) {
    if (!s.isOk()) throw Exit{kExitUsage, "config error: " + s.message()};
  };
  const std::string key = fmt::format("source.{}.dsn", source.name);
  if (!source.dsn.sslCa.empty()) require(tls::checkCaFile(key + " (ssl-ca)", source.dsn.sslCa));
  if (!source.dsn.sslCert.empty() || !source.dsn.sslKey.empty()) {
    require(
        tls::checkCertificateAndKey(key + " (ssl-cert)", source.dsn.sslCert, key + " (ssl-key)", source.dsn.sslKey));
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

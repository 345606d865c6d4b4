#pragma once

// What the config cases share (config_test.cpp, config_load_test.cpp): a minimal config, and the
// key or the message of the ConfigError a text raises.

#include <string>

#include "config/config.h"

namespace outbox::test {

inline const char* kMinimal = R"(
[[source]]
name = "account"
dsn = "mysql://bridge:s3cret@db.internal:3307/app"
)";

// The ConfigError's key, or "" when parsing succeeded.
inline std::string errorKey(const std::string& toml, const Environment& env = {}) {
  try {
    parseConfig(toml, env, "test.toml");
  } catch (const ConfigError& e) {
    return e.key();
  }
  return "";
}

inline std::string errorText(const std::string& toml, const Environment& env = {}) {
  try {
    parseConfig(toml, env, "test.toml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace outbox::test

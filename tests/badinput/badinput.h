#pragma once

// Issue 24: bad input from a config file, the environment or a flag. Each row runs the bridge
// binary once (bounded by a timeout, so a FIFO or /dev/zero cannot hang the suite) and checks its
// exit code, a fragment its output must hold, and fragments it must never print (the secret).

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace outbox::badinput {

enum class Via { kFile, kEnv, kFlag };

struct Row {
  Via via;
  std::string what;               // the case, for the failure message
  std::vector<std::string> args;  // after the binary; "{config}" is the row's config file, "{tmp}" the fixtures
  std::string toml;               // the config file's text ("{tmp}" substituted); none when empty
  std::map<std::string, std::string> env;  // OUTBOX_BRIDGE_* besides these are cleared
  int exitCode = 2;
  std::vector<std::string> expected;   // each must appear in stdout or stderr
  std::vector<std::string> forbidden;  // none may appear (a secret, a raw value)
};

// A config that loads: one source, nothing reachable needed. `extra` is appended to the source.
std::string baseConfig(const std::string& extra = "");

// The directory of the fixtures (a FIFO `fifo`, a directory `dir`, secret files); made once.
const std::string& fixtures();

// Runs every row; a failure names the row and shows its output with forbidden fragments masked.
void check(const std::vector<Row>& rows, std::chrono::seconds timeout = std::chrono::seconds(10));

}  // namespace outbox::badinput

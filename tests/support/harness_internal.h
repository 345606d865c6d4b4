#pragma once

// What the pieces of the harness (harness.cpp, harness_bridge.cpp) share and tests do not use.

#include <string>

namespace outbox::test {

// A random hex name part, for databases, configs, logs and command output.
std::string randomSuffix();

}  // namespace outbox::test

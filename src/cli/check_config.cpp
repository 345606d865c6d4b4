#include <cstdio>

#include "cli/cli.h"

namespace outbox::cli {

Command addCheckConfig(CLI::App& app) {
  auto* cmd = app.add_subcommand("check-config", "Validate the config, load its TLS and login files as run does, and print the effective config, secrets masked");
  auto path = std::make_shared<std::string>();
  addConfigOption(cmd, *path);
  return [path]() {
    Config config = loadOrExit(*path, "check-config");
    checkFilesOrExit(config);
    std::fputs(renderMasked(config).c_str(), stdout);
    return kExitOk;
  };
}

}  // namespace outbox::cli

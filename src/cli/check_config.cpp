#include <cstdio>

#include "cli/cli.h"

namespace outbox::cli {

Command addCheckConfigOptions(CLI::App* cmd) {
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

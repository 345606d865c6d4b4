#include <cstdio>

#include <fmt/format.h>

#include "admin/actions.h"
#include "cli/cli.h"
#include "common/log.h"
#include "db/connection.h"

namespace outbox::cli {

Command addEpoch(CLI::App& app) {
  auto* cmd = app.add_subcommand("epoch", "Source epochs");
  cmd->require_subcommand(1);
  auto* bump = cmd->add_subcommand(
      "bump",
      "Start a new epoch: clear the halt and move past every version ever used, so consumers re-bootstrap "
      "(after a database restore or a lost stream)");
  auto path = std::make_shared<std::string>();
  auto source = std::make_shared<std::string>();
  auto reason = std::make_shared<std::string>();
  addConfigOption(bump, *path);
  bump->add_option("--source", *source, "source name")->required();
  bump->add_option("--reason", *reason, "why, for the log")->required();
  return [=]() {
    Config config = loadOrExit(*path, "epoch bump");
    const SourceConfig& src = sourceOrExit(config, *source);
    db::initLibrary();
    auto state = admin::bumpEpoch(src, config.nats, *reason);
    if (!state.isOk()) throw Exit{kExitFailure, state.status().message()};
    resultLogger(src.name)->info("epoch {}, versions continue after {}, stream sequence {} (reason: {})", state->epoch,
                                 state->assignedThrough, state->publishedStreamSeq, *reason);
    return kExitOk;
  };
}

}  // namespace outbox::cli

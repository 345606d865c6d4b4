#include <cstdio>

#include <fmt/format.h>

#include "admin/actions.h"
#include "cli/cli.h"
#include "common/log.h"
#include "db/connection.h"

namespace outbox::cli {

Command addQuarantine(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "quarantine", "Set an unpublished outbox row aside: it gets no version, and a source halted on it resumes");
  auto path = std::make_shared<std::string>();
  auto source = std::make_shared<std::string>();
  auto id = std::make_shared<uint64_t>(0);
  auto reason = std::make_shared<std::string>();
  addConfigOption(cmd, *path);
  cmd->add_option("--source", *source, "source name")->required();
  cmd->add_option("--id", *id, "outbox row id")->required();
  cmd->add_option("--reason", *reason, "why")->required();
  return [=]() {
    Config config = loadOrExit(*path, "quarantine");
    const SourceConfig& src = sourceOrExit(config, *source);
    db::initLibrary();
    auto cleared = admin::quarantine(src, *id, *reason);
    if (!cleared.isOk()) throw Exit{kExitFailure, cleared.status().message()};
    if (*cleared) {
      resultLogger(src.name)->info("row {} quarantined; the halt it caused is cleared", *id);
    } else {
      resultLogger(src.name)->info("row {} quarantined", *id);
    }
    return kExitOk;
  };
}

}  // namespace outbox::cli

#include <cstdio>

#include <fmt/format.h>

#include "admin/actions.h"
#include "cli/cli.h"
#include "common/log.h"
#include "db/connection.h"
#include "nats/jetstream.h"

namespace outbox::cli {

Command addEpochOptions(CLI::App* cmd) {
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
  bump->add_option("--reason", *reason, "why, for the log (1 to 1,000 characters)")->required();
  auto waitText = std::make_shared<std::string>("10s");
  bump->add_option("--wait", *waitText,
                   "how long to wait for the leader to finish the bump (it moves the versions on once its publishes "
                   "in flight are settled; default 10s)")
      ->check(durationText());
  return [=]() {
    Config config = loadOrExit(*path, "epoch bump");
    const SourceConfig& src = sourceOrExit(config, *source);
    checkDsnFilesOrExit(src);
    if (Status s = nats::checkSettings(config.nats); !s.isOk()) throw Exit{kExitUsage, "config error: " + s.message()};
    db::initLibrary();
    Duration wait{};
    try {
      wait = parseDuration("--wait", *waitText);
    } catch (const ConfigError& e) {
      throw Exit{kExitUsage, fmt::format("--wait: {}", e.reason())};
    }
    auto state = admin::bumpEpoch(src, config.nats, *reason, wait);
    if (!state.isOk()) throw Exit{state.status().isRejected() ? kExitUsage : kExitFailure, state.status().message()};
    if (state->bumpFromEpoch && !state->haltedReason.empty()) {
      throw Exit{kExitFailure,
                 fmt::format("epoch {} recorded (reason: {}), but the bridge leading source {} refused to "
                             "finish it and halted the source: {}",
                             state->epoch, *reason, src.name, state->haltedReason)};
    }
    if (state->bumpFromEpoch) {
      resultLogger(src.name)->info("epoch {} recorded (reason: {}); no bridge leading source {} finished it within {} "
                                   "ms: the one that leads it next moves the versions on (is one running?)",
                                   state->epoch, *reason, src.name, wait.count());
    } else {
      resultLogger(src.name)->info("epoch {}, versions continue after {}, stream sequence {} (reason: {})",
                                   state->epoch, state->assignedThrough, state->publishedStreamSeq, *reason);
    }
    return kExitOk;
  };
}

}  // namespace outbox::cli

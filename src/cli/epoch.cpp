#include <cstdio>

#include <fmt/format.h>

#include "cli/cli.h"
#include "common/log.h"
#include "db/connection.h"
#include "nats/jetstream.h"
#include "relay/jetstream_publisher.h"
#include "relay/mysql_store.h"

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
    // The highest version the stream ever held must be known, or a version could be reused.
    nats::ConnectOptions options{config.nats.url, config.nats.user, config.nats.password, config.nats.token,
                                 config.nats.connectTimeout};
    auto nc = nats::Connection::connect(options);
    if (!nc.isOk()) throw Exit{kExitFailure, "epoch bump needs nats-server: " + nc.status().message()};
    JetStreamPublisher publisher(src, config.nats, **nc);
    if (Status s = publisher.prepare(); !s.isOk()) throw Exit{kExitFailure, s.message()};
    auto tip = publisher.tip();
    if (!tip.isOk()) throw Exit{kExitFailure, tip.status().message()};
    MysqlOutboxStore store(src);
    if (Status s = store.connect(); !s.isOk()) throw Exit{kExitFailure, s.message()};
    auto state = store.epochBump(*tip, *reason);
    if (!state.isOk()) throw Exit{kExitFailure, state.status().message()};
    resultLogger(src.name)->info("epoch {}, versions continue after {}, stream sequence {} (reason: {})", state->epoch,
                                 state->assignedThrough, state->publishedStreamSeq, *reason);
    return kExitOk;
  };
}

}  // namespace outbox::cli

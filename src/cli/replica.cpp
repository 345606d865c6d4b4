#include <cstdio>
#include <ctime>
#include <fstream>

#include <fmt/format.h>

#include "cli/cli.h"
#include "common/signal_watcher.h"
#include "common/stop_token.h"
#include "replica/replica.h"

namespace outbox::cli {

namespace {

void printLine(const std::string& line) {
  std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", std::gmtime(&now));
  std::printf("%sZ %s\n", stamp, line.c_str());
  std::fflush(stdout);
}

}  // namespace

Command addReplica(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "replica",
      "The reference consumer: bootstrap from a snapshot, verify it, follow the stream, print the state changes");
  struct Args {
    std::string url, source, nats = "nats://127.0.0.1:4222", dump;
    double verifyInterval = 1.0;
    double duration = 0;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--url", args->url, "the bridge's base URL, e.g. http://127.0.0.1:8080")->required();
  cmd->add_option("--source", args->source, "source name")->required();
  cmd->add_option("--nats", args->nats, "nats-server URL (default nats://127.0.0.1:4222)");
  cmd->add_option("--dump", args->dump, "write the replica as JSON to this file after each verification and at exit");
  cmd->add_option("--verify-interval", args->verifyInterval, "seconds between checks against ?summary=true (default 1)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--duration", args->duration, "stop after this many seconds (default: run until SIGTERM)");
  return [args]() {
    StopSignal stop;
    SignalWatcher signals(stop);
    Replica::Options options;
    options.baseUrl = args->url;
    options.source = args->source;
    options.natsUrl = args->nats;
    options.verifyInterval = std::chrono::milliseconds(static_cast<int64_t>(args->verifyInterval * 1000));
    uint64_t dumpedAt = UINT64_MAX;
    Replica* self = nullptr;
    auto dump = [&]() {
      if (args->dump.empty() || self == nullptr) return;
      std::string tmp = args->dump + ".tmp";
      std::ofstream(tmp) << self->dumpJson();
      std::rename(tmp.c_str(), args->dump.c_str());
      dumpedAt = self->lastVerifiedVersion();
    };
    options.report = [&](const std::string& line) {
      printLine(line);
      if (line.find("] verified at version") != std::string::npos) dump();
    };
    Replica replica(options);
    self = &replica;
    std::thread timer;
    if (args->duration > 0) {
      timer = std::thread([&] {
        stop.waitFor(std::chrono::milliseconds(static_cast<int64_t>(args->duration * 1000)));
        stop.request();
      });
    }
    replica.run(stop);
    if (dumpedAt != replica.lastVerifiedVersion()) dump();
    printLine(fmt::format("[{}] stopped at version {} ({} records, checksum verified at version {})", args->source,
                          replica.appliedVersion(), replica.size(), replica.lastVerifiedVersion()));
    if (timer.joinable()) timer.join();
    return kExitOk;
  };
}

}  // namespace outbox::cli

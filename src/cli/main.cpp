// outbox-bridge: transactional-outbox tables to JetStream streams. See README.md.

#include <cstdio>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/cli.h"
#include "common/log.h"
#include "outbox_version.h"

int main(int argc, char** argv) {
  using namespace outbox::cli;
  CLI::App app{"outbox-bridge: publishes transactional-outbox tables in MySQL/MariaDB to NATS JetStream streams,\n"
               "with dense versions, exactly once."};
  app.set_version_flag("--version", std::string("outbox-bridge ") + OUTBOX_BRIDGE_VERSION);
  app.require_subcommand(1);
  std::map<CLI::App*, Command> commands;
  auto add = [&](Command (*registrar)(CLI::App&)) {
    size_t before = app.get_subcommands({}).size();
    Command run = registrar(app);
    commands[app.get_subcommands({})[before]] = std::move(run);
  };
  add(&addRun);
  add(&addMigrate);
  add(&addPrune);
  add(&addCheckConfig);
  add(&addEpoch);
  add(&addQuarantine);
  add(&addReplica);
  add(&addHealthcheck);
  applyFlagRules(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  try {
    for (auto& [sub, run] : commands) {
      if (!sub->parsed()) continue;
      // Until a command has loaded its config (which may ask for JSON or another level).
      outbox::setupLogging("info", outbox::LogFormat::kText, sub->get_name());
      return run();
    }
  } catch (const Exit& e) {
    if (e.message.empty()) return e.code;
    // Usage and config errors come before the config's [log] settings: plain text, to the point.
    if (e.code == kExitUsage) {
      std::fprintf(stderr, "outbox-bridge: %s\n", e.message.c_str());
    } else {
      spdlog::error("{}", e.message);
    }
    return e.code;
  } catch (const outbox::ConfigError& e) {
    std::fprintf(stderr, "outbox-bridge: config error: %s: %s\n", e.key().c_str(), e.reason().c_str());
    return kExitUsage;
  } catch (const std::exception& e) {
    // No exception leaves a command unexplained (an abort would print only its type).
    std::fprintf(stderr, "outbox-bridge: %s\n", e.what());
    return kExitFailure;
  }
  return kExitUsage;
}

#include <cstdio>

#include <fmt/format.h>

#include "cli/cli.h"
#include "db/connection.h"
#include "relay/mysql_store.h"

namespace outbox::cli {

Command addQuarantine(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "quarantine", "Set an unpublished outbox row aside: it gets no version, and a source halted on it resumes");
  auto path = std::make_shared<std::string>();
  auto source = std::make_shared<std::string>();
  auto id = std::make_shared<uint64_t>(0);
  auto reason = std::make_shared<std::string>();
  cmd->add_option("--config", *path, "TOML config file")->required();
  cmd->add_option("--source", *source, "source name")->required();
  cmd->add_option("--id", *id, "outbox row id")->required();
  cmd->add_option("--reason", *reason, "why")->required();
  return [=]() {
    Config config = loadOrExit(*path);
    const SourceConfig& src = sourceOrExit(config, *source);
    db::initLibrary();
    MysqlOutboxStore store(src);
    if (Status s = store.connect(); !s.isOk()) throw Exit{kExitFailure, s.message()};
    auto cleared = store.quarantineAndResume(*id, *reason);
    if (!cleared.isOk()) throw Exit{kExitFailure, cleared.status().message()};
    if (*cleared) {
      std::printf("source %s: row %llu quarantined; the halt it caused is cleared\n", src.name.c_str(),
                  static_cast<unsigned long long>(*id));
    } else {
      std::printf("source %s: row %llu quarantined\n", src.name.c_str(), static_cast<unsigned long long>(*id));
    }
    return kExitOk;
  };
}

}  // namespace outbox::cli

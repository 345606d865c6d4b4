#include <cstdio>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "cli/cli.h"
#include "db/connection.h"
#include "db/migrate.h"

namespace outbox::cli {

Command addMigrate(CLI::App& app) {
  auto* cmd = app.add_subcommand("migrate", "Create the outbox tables and the bridge's tables (each schema file once)");
  auto path = std::make_shared<std::string>();
  cmd->add_option("--config", *path, "TOML config file")->required();
  return [path]() {
    Config config = loadOrExit(*path);
    db::initLibrary();
    // Sources sharing a database are migrated together.
    std::map<std::tuple<std::string, unsigned, std::string, std::string>, std::vector<const SourceConfig*>> byDatabase;
    for (const auto& s : config.sources) {
      byDatabase[{s.dsn.host, s.dsn.port, s.dsn.socket, s.dsn.database}].push_back(&s);
    }
    int failures = 0;
    for (const auto& [key, sources] : byDatabase) {
      const Dsn& dsn = sources.front()->dsn;
      auto conn = db::Connection::open(db::paramsFrom(dsn));
      if (!conn.isOk()) {
        std::fprintf(stderr, "migrate %s: %s\n", dsn.masked().c_str(), conn.status().message().c_str());
        ++failures;
        continue;
      }
      std::vector<std::string> tables, names, applied;
      for (const auto* s : sources) {
        tables.push_back(s->outboxTable);
        names.push_back(s->name);
      }
      Status s = db::migrate(**conn, tables, names, applied);
      for (const auto& a : applied) std::printf("migrate %s: applied %s\n", dsn.masked().c_str(), a.c_str());
      if (!s.isOk()) {
        std::fprintf(stderr, "migrate %s: %s\n", dsn.masked().c_str(), s.message().c_str());
        ++failures;
      } else if (applied.empty()) {
        std::printf("migrate %s: up to date\n", dsn.masked().c_str());
      }
    }
    return failures == 0 ? kExitOk : kExitFailure;
  };
}

}  // namespace outbox::cli

#include <cstdio>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include <spdlog/spdlog.h>

#include "cli/cli.h"
#include "common/log.h"
#include "db/connection.h"
#include "db/migrate.h"

namespace outbox::cli {

Command addMigrateOptions(CLI::App* cmd) {
  auto path = std::make_shared<std::string>();
  addConfigOption(cmd, *path);
  return [path]() {
    Config config = loadOrExit(*path, "migrate");
    for (const auto& source : config.sources) checkDsnFilesOrExit(source);
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
        spdlog::error("migrate {}: {}", dsn.masked(), conn.status().message());
        ++failures;
        continue;
      }
      std::vector<std::string> tables, names, applied;
      for (const auto* s : sources) {
        tables.push_back(s->outboxTable);
        names.push_back(s->name);
      }
      Status s = db::migrate(**conn, tables, names, applied);
      for (const auto& a : applied) resultLogger("")->info("migrate {}: applied {}", dsn.masked(), a);
      if (!s.isOk()) {
        spdlog::error("migrate {}: {}", dsn.masked(), s.message());
        ++failures;
      } else if (applied.empty()) {
        resultLogger("")->info("migrate {}: up to date", dsn.masked());
      }
    }
    return failures == 0 ? kExitOk : kExitFailure;
  };
}

}  // namespace outbox::cli

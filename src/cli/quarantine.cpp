#include <cstdio>

#include <fmt/format.h>

#include "admin/actions.h"
#include "cli/cli.h"
#include "common/log.h"
#include "db/connection.h"

namespace outbox::cli {

Command addQuarantineOptions(CLI::App* cmd) {
  auto path = std::make_shared<std::string>();
  auto source = std::make_shared<std::string>();
  auto idText = std::make_shared<std::string>();
  auto reason = std::make_shared<std::string>();
  addConfigOption(cmd, *path);
  cmd->add_option("--source", *source, "source name")->required();
  // Taken as text: CLI11 would read -1 or 2^64 as 18446744073709551615.
  cmd->add_option("--id", *idText, "outbox row id (a committed row without a version)")->required();
  cmd->add_option("--reason", *reason, "why (1 to 1,000 characters; kept in the log)")->required();
  return [=]() {
    const std::optional<uint64_t> id = admin::parseRowId(*idText);
    if (!id) {
      throw Exit{kExitUsage,
                 fmt::format("--id: expected an outbox row id, a whole number from 1 to {} in decimal "
                             "without leading zeros, got '{}'",
                             UINT64_MAX, shownValue(idText->substr(0, 40)) + (idText->size() > 40 ? "..." : ""))};
    }
    Config config = loadOrExit(*path, "quarantine");
    const SourceConfig& src = sourceOrExit(config, *source);
    checkDsnFilesOrExit(src);
    db::initLibrary();
    auto cleared = admin::quarantine(src, *id, *reason);
    if (!cleared.isOk()) {
      throw Exit{cleared.status().isRejected() ? kExitUsage : kExitFailure, cleared.status().message()};
    }
    if (*cleared) {
      resultLogger(src.name)->info("row {} quarantined; the halt it caused is cleared", *id);
    } else {
      resultLogger(src.name)->info("row {} quarantined", *id);
    }
    return kExitOk;
  };
}

}  // namespace outbox::cli

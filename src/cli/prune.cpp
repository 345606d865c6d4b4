#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "cli/cli.h"
#include "common/log.h"
#include "db/connection.h"
#include "prune/prune.h"

namespace outbox::cli {

Command addPruneOptions(CLI::App* cmd) {
  struct Args {
    std::string config, source, keep = "1h";
    int batch = 5000;
    bool dryRun = false;
  };
  auto args = std::make_shared<Args>();
  addConfigOption(cmd, args->config);
  cmd->add_option("--source", args->source, "only this source (default: every source)");  // never "": applyFlagRules
  cmd->add_option("--keep", args->keep, "keep rows younger than this (default 1h, at least 10m)")
      ->check(durationText());
  cmd->add_option("--batch", args->batch,
                  "rows per transaction at most (default 5000; fewer when each would take over ~20 ms)")
      ->check(wholeNumber(1, 1'000'000));
  cmd->add_flag("--dry-run", args->dryRun, "delete nothing; report how many rows would go");
  return [args]() {
    Config config = loadOrExit(args->config, "prune");
    PruneOptions options;
    try {
      options.keep = parseDuration("--keep", args->keep);
    } catch (const ConfigError& e) {
      throw Exit{kExitUsage, fmt::format("--keep: {}", e.reason())};
    }
    if (options.keep < kMinimumKeep) {
      throw Exit{kExitUsage, fmt::format("--keep {} is under the {}-minute minimum: the bridge may still need recent "
                                         "rows to republish a tail the stream lost",
                                         args->keep, kMinimumKeep.count())};
    }
    options.batch = args->batch;
    options.dryRun = args->dryRun;
    std::vector<const SourceConfig*> sources;
    if (args->source.empty()) {
      for (const auto& s : config.sources) sources.push_back(&s);
    } else {
      sources.push_back(&sourceOrExit(config, args->source));
    }
    for (const SourceConfig* source : sources) checkDsnFilesOrExit(*source);
    db::initLibrary();
    const bool terminal = isatty(STDERR_FILENO) != 0;
    int failures = 0;
    for (const SourceConfig* source : sources) {
      if (terminal) {
        options.progress = [&](uint64_t deleted) {
          std::fprintf(stderr, "\rprune %s: %llu rows deleted...", source->name.c_str(),
                       static_cast<unsigned long long>(deleted));
        };
      }
      auto report = pruneSource(*source, options);
      if (terminal) std::fprintf(stderr, "\r\033[K");
      if (!report.isOk()) {
        sourceLogger(source->name)->error("prune failed: {}", report.status().message());
        ++failures;
        continue;
      }
      const PruneReport& r = *report;
      if (r.skipped) {
        resultLogger(source->name)->info("prune: skipped, another prune of this source is running");
      } else if (options.dryRun) {
        resultLogger(source->name)->info("prune: dry run, would delete {} rows (published through {}, older than {})",
                                         r.deleted, r.publishedThrough, args->keep);
      } else {
        resultLogger(source->name)->info(
            "prune: deleted {} rows in {:.2f} s ({:.0f} rows/s, longest transaction {:.1f} ms); oldest row kept: {}",
            r.deleted, r.seconds, r.seconds > 0 ? static_cast<double>(r.deleted) / r.seconds : 0.0,
            r.longestTransactionMs, r.oldestKept);
      }
    }
    return failures == 0 ? kExitOk : kExitFailure;
  };
}

}  // namespace outbox::cli

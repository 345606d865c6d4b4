// Every subcommand of outbox-bridge, in one table: main() builds the command line and its --help
// from it. A new command is its own file (src/cli/, one per subcommand), a line here, its source in
// src/meson.build, and its lines in README, "Commands", from which the man page is built
// (tools/manpage.py; the packaging test `commands` holds README and the page to `--help`).

#include "cli/cli.h"

namespace outbox::cli {

// Each adds its options (and its own subcommands) to the command the table made, and returns the
// function that runs it with their values.
Command addRunOptions(CLI::App* cmd);
Command addMigrateOptions(CLI::App* cmd);
Command addPruneOptions(CLI::App* cmd);
Command addCheckConfigOptions(CLI::App* cmd);
Command addEpochOptions(CLI::App* cmd);
Command addQuarantineOptions(CLI::App* cmd);
Command addReplicaOptions(CLI::App* cmd);
Command addHealthcheckOptions(CLI::App* cmd);

namespace {

// In the order --help lists them.
const Subcommand kSubcommands[] = {
    {"run", "Run the service: one relay per source", &addRunOptions},
    {"migrate", "Create the outbox tables and the bridge's tables (each schema file once)", &addMigrateOptions},
    {"prune", "Delete published outbox rows older than --keep, in short batches (for cron; one line per source)",
     &addPruneOptions},
    {"check-config",
     "Validate the config, load its TLS and login files as run does, and print the effective config, secrets masked",
     &addCheckConfigOptions},
    {"epoch", "Source epochs", &addEpochOptions},
    {"quarantine", "Set an unpublished outbox row aside: it gets no version, and a source halted on it resumes",
     &addQuarantineOptions},
    {"replica",
     "The reference consumer: bootstrap from a snapshot, verify it, follow the stream, print the state changes",
     &addReplicaOptions},
    {"healthcheck",
     "GET /readyz of the bridge at the config's http.listen (or --url); exit 0 on 200, 1 otherwise",
     &addHealthcheckOptions},
};

}  // namespace

std::span<const Subcommand> subcommands() { return kSubcommands; }

}  // namespace outbox::cli

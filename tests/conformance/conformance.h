#pragma once

// The conformance suite (docs/consumers.md): every consumer's command line, driven through the
// same scenarios against the stack's real bridge, MariaDB and nats-server, with its replica and
// inbox row in MySQL (--inbox), and each --dump compared with the table the source reads.
//
// A new client is one line of consumers() below: a name and its command line, which takes the
// flags, environment, --inbox and --dump of `outbox-bridge replica` (src/cli/replica.cpp).

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <chrono>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "accounts_source.h"
#include "harness.h"

namespace outbox::test {

struct Consumer {
  std::string name;
  // argv: argv[0] a path or a program on PATH; {bridge} is the outbox-bridge binary,
  // {typescript_cli} clients/typescript/bin/outbox-replica.mjs, built (typeScriptCli()); {go_cli}
  // the Go client's outbox-replica, built (goCli()).
  std::vector<std::string> command;
};

// The consumers every scenario runs: the C++ reference consumer, the TypeScript client's CLI and
// the Go client's.
inline const std::vector<Consumer>& consumers() {
  static const std::vector<Consumer> all = {
      {"cpp", {"{bridge}", "replica"}},
      {"typescript", {"node", "{typescript_cli}"}},
      {"go", {"{go_cli}"}},
  };
  return all;
}

// Their names, for BOOST_DATA_TEST_CASE (each scenario a case per consumer).
std::vector<std::string> consumerNames();
const Consumer& consumerNamed(const std::string& name);

// The TypeScript client's CLI, built once a run (npm ci when its lock file changed, then tsc) into
// a copy of its own under tempDir(): its path.
std::string typeScriptCli();

// The Go client's CLI, built once a run by clients/go/build.sh (offline, from Debian's Go
// packages) into tempDir(): its path.
std::string goCli();

// One consumer's process on one source: its flags, its inbox database (the stack's MariaDB, the
// password by OUTBOX_REPLICA_INBOX_PASSWORD), its --dump; each start logs to a file of its own.
class ConsumerRun {
 public:
  // `inboxDsn`: mysql://... without a password (the stack's by environment); `extra`: more flags;
  // `natsUrl`: the stack's nats-server when empty.
  ConsumerRun(const std::string& consumer, AccountsSource& src, int port, std::string inboxDsn,
              std::vector<std::string> extra = {}, const std::string& natsUrl = "");
  ~ConsumerRun();
  void start();
  void kill();                // SIGKILL, reaped
  std::optional<int> stop();  // SIGTERM: the exit code (nullopt when it had to be killed)
  bool running() { return process_.running(); }
  // The log of the latest start, and of every start.
  std::string text() const;
  std::string allText() const;
  bool says(const std::string& line) const { return text().find(line) != std::string::npos; }
  bool saysWithin(const std::string& line, std::chrono::milliseconds limit);
  const std::string& dumpPath() const { return dump_; }
  int starts() const { return starts_; }
  // The process's peak resident memory so far (VmHWM, what /usr/bin/time -v calls its maximum
  // resident set size), in kB; 0 when it is not running.
  uint64_t readPeakRssKb();
  // As stop() last read it, before its SIGTERM.
  uint64_t peakRssKb() const { return peakRssKb_; }

 private:
  std::string logOf(int start) const;
  std::string name_;
  AccountsSource& src_;
  std::vector<std::string> argv_;
  std::string base_, dump_;
  int starts_ = 0;
  uint64_t peakRssKb_ = 0;
  Subprocess process_;
};

// The inbox's database for one scenario (a fresh one, dropped at the end) and its DSN.
struct InboxDatabase {
  TestDatabase database{"inbox"};
  std::string dsn() const { return database.dsn(); }
};

// Waits until the bridge published every outbox row; returns that version.
uint64_t requireAllPublished(AccountsSource& src, BridgeProcess& bridge);
// Waits until `run` is at `version` (a verification there, or a bootstrap with it as watermark),
// stops it (SIGTERM: --dump written at exit) and requires its dump to equal the table.
void requireConverged(ConsumerRun& run, AccountsSource& src, uint64_t version,
                      std::chrono::milliseconds limit = std::chrono::seconds(60));

}  // namespace outbox::test

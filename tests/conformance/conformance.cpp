#include "conformance.h"

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <stdexcept>

#include <unistd.h>


namespace outbox::test {

std::vector<std::string> consumerNames() {
  std::vector<std::string> names;
  for (const auto& c : consumers()) names.push_back(c.name);
  return names;
}

const Consumer& consumerNamed(const std::string& name) {
  for (const auto& c : consumers()) {
    if (c.name == name) return c;
  }
  throw std::runtime_error("no consumer named " + name);
}

namespace {

// `program` as execv takes it: a path as it is, a bare name from PATH.
std::string onPath(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t begin = 0; begin <= dirs.size();) {
    size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    std::filesystem::path candidate = std::filesystem::path(dirs.substr(begin, end - begin)) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    begin = end + 1;
  }
  throw std::runtime_error(program + " is not on PATH (tools/test installs it)");
}

}  // namespace

std::string typeScriptCli() {
  static std::once_flag once;
  static std::string cli;
  std::call_once(once, [] {
    // A copy of its own, in the build tree: the clients suite (tools/test's lane a) runs tsc into
    // clients/typescript/dist meanwhile, and a node starting there could read a file half written.
    // Its bin beside its dist, as in the package; its packages those of the checkout.
    const std::string client = stack().sourceRoot + "/clients/typescript";
    const std::string copy = tempDir() + "/conformance-typescript";
    auto built = runCommand(fmt::format(
        "set -e; cd '{0}'; if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt "
        "node_modules/.package-lock.json ]; then npm ci --no-audit --no-fund; fi; rm -rf '{1}'; mkdir -p '{1}/bin'; "
        "cp package.json '{1}/'; cp bin/outbox-replica.mjs '{1}/bin/'; ln -s '{0}/node_modules' '{1}/node_modules'; "
        "npx tsc -p . --outDir '{1}/dist'",
        client, copy));
    if (built.exitCode != 0) throw std::runtime_error("the TypeScript client does not build:\n" + built.out + built.err);
    cli = copy + "/bin/outbox-replica.mjs";
  });
  return cli;
}

std::string goCli() {
  static std::once_flag once;
  static std::string cli;
  std::call_once(once, [] {
    const std::string out = tempDir() + "/conformance-go/outbox-replica";
    auto built = runCommand(fmt::format("'{}/clients/go/build.sh' '{}'", stack().sourceRoot, out));
    if (built.exitCode != 0) throw std::runtime_error("the Go client does not build:\n" + built.out + built.err);
    cli = out;
  });
  return cli;
}

ConsumerRun::ConsumerRun(const std::string& consumer, AccountsSource& src, int port, std::string inboxDsn,
                         std::vector<std::string> extra, const std::string& natsUrl)
    : name_(consumer), src_(src) {
  const Consumer& c = consumerNamed(consumer);
  for (const auto& a : c.command) {
    if (a.find("{typescript_cli}") != std::string::npos) {
      argv_.push_back(typeScriptCli());
    } else if (a.find("{go_cli}") != std::string::npos) {
      argv_.push_back(goCli());
    } else {
      argv_.push_back(fmt::format(fmt::runtime(a), fmt::arg("bridge", stack().bridgeBinary)));
    }
  }
  argv_[0] = onPath(argv_[0]);
  base_ = fmt::format("{}/conformance-{}-{}", tempDir(), src.spec.name, consumer);
  dump_ = base_ + ".json";
  std::filesystem::remove(dump_);
  for (const std::string& a : {std::string("--url"), fmt::format("http://127.0.0.1:{}", port), std::string("--source"),
                               src.spec.name, std::string("--nats"), natsUrl.empty() ? stack().natsUrl : natsUrl, std::string("--dump"), dump_,
                               std::string("--verify-interval"), std::string("0.1"), std::string("--inbox"), inboxDsn}) {
    argv_.push_back(a);
  }
  for (auto& a : extra) argv_.push_back(std::move(a));
  // The inbox's password as an operator gives it: by environment, never on the command line.
  ::setenv("OUTBOX_REPLICA_INBOX_PASSWORD", stack().mysqlPassword.c_str(), 1);
}

ConsumerRun::~ConsumerRun() {
  process_.signal(SIGCONT);
  (void)process_.terminate(std::chrono::seconds(10));
}

std::string ConsumerRun::logOf(int start) const { return fmt::format("{}-{}.log", base_, start); }

void ConsumerRun::start() {
  ++starts_;
  std::filesystem::remove(logOf(starts_));
  BOOST_REQUIRE(process_.start(argv_, logOf(starts_)));
}

void ConsumerRun::kill() { process_.kill(); }

uint64_t ConsumerRun::readPeakRssKb() {
  if (!process_.running()) return 0;
  std::string status = readFile(fmt::format("/proc/{}/status", process_.pid()));
  size_t at = status.find("VmHWM:");
  return at == std::string::npos ? 0 : std::stoull(status.substr(at + 6));
}

std::optional<int> ConsumerRun::stop() {
  peakRssKb_ = readPeakRssKb();
  return process_.terminate(std::chrono::seconds(20));
}

std::string ConsumerRun::text() const { return starts_ == 0 ? "" : readFile(logOf(starts_)); }

std::string ConsumerRun::allText() const {
  std::string out;
  for (int i = 1; i <= starts_; ++i) out += fmt::format("--- {} start {}:\n{}", name_, i, readFile(logOf(i)));
  return out;
}

bool ConsumerRun::saysWithin(const std::string& line, std::chrono::milliseconds limit) {
  return waitUntil([&] { return says(line); }, limit);
}

uint64_t requireAllPublished(AccountsSource& src, BridgeProcess& bridge) {
  uint64_t last = src.lastVersion();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return src.published() == last; }, std::chrono::seconds(30)),
                        fmt::format("version {} was not published:\n{}", last, bridge.log()));
  return last;
}


void requireConverged(ConsumerRun& run, AccountsSource& src, uint64_t version, std::chrono::milliseconds limit) {
  auto atVersion = [&] {
    std::string text = run.text();
    return text.find(fmt::format("] verified at version {}:", version)) != std::string::npos ||
           text.find(fmt::format("bootstrapped: epoch {}, watermark {},", src.database.state(src.spec.name).epoch,
                                 version)) != std::string::npos;
  };
  BOOST_REQUIRE_MESSAGE(waitUntil(atVersion, limit), fmt::format("not at version {}:\n{}", version, run.allText()));
  BOOST_REQUIRE_MESSAGE(run.stop() == 0, run.allText());  // --dump: written at exit
  std::string dump = readFile(run.dumpPath());
  std::string expected = src.dumpRecords();
  BOOST_TEST(dump.find(fmt::format("\"appliedVersion\":{},", version)) != std::string::npos, dump.substr(0, 300));
  BOOST_TEST(dump.find(fmt::format("\"recordCount\":{},", src.table().size())) != std::string::npos,
             dump.substr(dump.size() > 300 ? dump.size() - 300 : 0));
  // Whole: a difference shown by its first byte, not two documents of megabytes.
  if (dump.find(expected) == std::string::npos) {
    size_t begin = dump.find("\"records\":[");
    size_t at = 0;
    while (begin != std::string::npos && begin + at < dump.size() && at < expected.size() &&
           dump[begin + at] == expected[at]) {
      ++at;
    }
    BOOST_ERROR(fmt::format("the dump's records differ from the table's at byte {}: dump '{}', table '{}'", at,
                            begin == std::string::npos ? dump.substr(0, 200) : dump.substr(begin + at, 200),
                            expected.substr(at, 200)));
  }
}

}  // namespace outbox::test

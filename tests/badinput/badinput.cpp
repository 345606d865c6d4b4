#include "badinput.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include "harness.h"

extern char** environ;

namespace outbox::badinput {

namespace {

const char* kVia[] = {"file", "env", "flag"};

std::string substitute(std::string text, const std::string& config) {
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"{tmp}", fixtures()}, {"{config}", config}}) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
      text.replace(at, from.size(), to);
    }
  }
  return text;
}

struct Outcome {
  int exitCode = -1;  // -1: killed by a signal; -2: still running at the timeout (killed)
  std::string out;
  std::string err;
};

// fork/exec with its own environment and output files; SIGKILL to its process group at `timeout`.
Outcome runBounded(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                   const std::string& outputBase, std::chrono::seconds timeout) {
  std::vector<std::string> envText;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind("OUTBOX_BRIDGE_", 0) != 0) envText.emplace_back(*e);
  }
  for (const auto& [name, value] : env) envText.push_back(name + "=" + value);
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : envText) envp.push_back(const_cast<char*>(e.c_str()));
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const std::string outPath = outputBase + ".out", errPath = outputBase + ".err";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    // A bridge that reads without end (/dev/zero) fails here rather than taking the machine's memory.
    struct rlimit limit {4ul << 30, 4ul << 30};
    ::setrlimit(RLIMIT_AS, &limit);
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = ::open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  Outcome o;
  if (pid < 0) return o;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (true) {
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      o.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      o.exitCode = -2;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  o.out = test::readFile(outPath);
  o.err = test::readFile(errPath);
  return o;
}

std::string masked(std::string text, const std::vector<std::string>& forbidden) {
  for (const auto& f : forbidden) {
    if (f.empty()) continue;
    for (size_t at = text.find(f); at != std::string::npos; at = text.find(f, at)) text.replace(at, f.size(), "<forbidden>");
  }
  if (text.size() > 600) text = text.substr(0, 600) + "...";
  return text;
}

}  // namespace

std::string baseConfig(const std::string& extra) {
  return "[http]\nlisten = \"127.0.0.1:0\"\n\n[[source]]\nname = \"a\"\ndsn = \"mysql://u@127.0.0.1:1/db\"\n" + extra;
}

const std::string& fixtures() {
  static const std::string dir = [] {
    std::string d = test::tempDir() + "/badinput";
    std::system(("rm -rf '" + d + "' && mkdir -p '" + d + "/dir'").c_str());
    if (::mkfifo((d + "/fifo").c_str(), 0600) != 0) throw std::runtime_error("mkfifo " + d + "/fifo");
    std::ofstream(d + "/big-secret") << std::string(70'000, 's');
    return d;
  }();
  return dir;
}

void check(const std::vector<Row>& rows, std::chrono::seconds timeout) {
  const char* binary = std::getenv("OUTBOX_TEST_BRIDGE_BIN");
  BOOST_REQUIRE_MESSAGE(binary != nullptr, "OUTBOX_TEST_BRIDGE_BIN is not set (meson test sets it)");
  static int counter = 0;
  for (const Row& row : rows) {
    const std::string base = fmt::format("{}/row-{}-{}", fixtures(), ::getpid(), ++counter);
    const std::string config = base + ".toml";
    if (!row.toml.empty()) std::ofstream(config, std::ios::binary) << substitute(row.toml, config);
    std::vector<std::string> args{binary};
    for (const auto& a : row.args) args.push_back(substitute(a, config));
    std::map<std::string, std::string> env;
    for (const auto& [name, value] : row.env) env[name] = substitute(value, config);
    Outcome o = runBounded(args, env, base, timeout);
    const std::string label = fmt::format("[{}] {}", kVia[static_cast<int>(row.via)], row.what);
    const std::string shown = masked("stdout: " + o.out + "\nstderr: " + o.err, row.forbidden);
    BOOST_TEST(o.exitCode == row.exitCode,
               label << ": exit " << (o.exitCode == -2 ? "none (killed at the timeout)" : std::to_string(o.exitCode))
                     << ", expected " << row.exitCode << "\n" << shown);
    const std::string all = o.out + o.err;
    for (const auto& e : row.expected) {
      BOOST_TEST(all.find(e) != std::string::npos, label << ": no '" << e << "' in the output\n" << shown);
    }
    for (const auto& f : row.forbidden) {
      BOOST_TEST(all.find(f) == std::string::npos, label << ": the output holds a forbidden fragment\n" << shown);
    }
  }
}

}  // namespace outbox::badinput

#include "tools/support/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

namespace outbox {

namespace {

// The exit code of a child that exited; nullopt when a signal ended it.
std::optional<int> exitCodeOf(int status) {
  return WIFEXITED(status) ? std::optional<int>(WEXITSTATUS(status)) : std::nullopt;
}

}  // namespace

Subprocess::~Subprocess() { kill(); }

bool Subprocess::start(const std::vector<std::string>& argv, const std::string& logPath) {
  if (pid_ > 0 || argv.empty()) return false;
  exitCode_.reset();
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    int fd = open(logPath.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execv(args[0], args.data());
    _exit(127);
  }
  pid_ = pid;
  return true;
}

std::optional<int> Subprocess::terminate(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return exitCode_;
  ::kill(pid_, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + grace;
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) != pid_) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill();
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pid_ = -1;
  exitCode_ = exitCodeOf(status);
  return exitCode_;
}

void Subprocess::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

void Subprocess::signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

bool Subprocess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    exitCode_ = exitCodeOf(status);
    return false;
  }
  return true;
}

}  // namespace outbox

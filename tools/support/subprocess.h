#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace outbox {

// A child process with stdout and stderr appended to a file. Used by the benchmark and the
// tests to run `outbox-bridge run` as operators do. Not thread-safe. The destructor kills and
// reaps a child that is still running.
class Subprocess {
 public:
  Subprocess() = default;
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  // Starts argv[0] with arguments; false if fork or exec could not even begin.
  bool start(const std::vector<std::string>& argv, const std::string& logPath);
  // SIGTERM, then waits up to `grace` (SIGKILL after). Returns the exit code, or nullopt when the
  // child had to be killed or died from a signal. A child already reaped by running() returns
  // the code it exited with.
  std::optional<int> terminate(std::chrono::milliseconds grace);
  void kill();  // SIGKILL and reap
  void signal(int sig);  // e.g. SIGSTOP / SIGCONT
  bool running();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  std::optional<int> exitCode_;  // of the last child reaped
};

}  // namespace outbox

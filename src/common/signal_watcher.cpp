#include "common/signal_watcher.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <string_view>

namespace outbox {

namespace {

// A fixed line by write(2), then _Exit: a logger's lock, held by a thread stuck on a full pipe,
// must not keep the process alive.
[[noreturn]] void exitWithLine(std::string_view line, int code) {
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
  std::_Exit(code);
}

}  // namespace

SignalWatcher::SignalWatcher(StopSignal& stop, std::function<void(int)> onSignal)
    : stop_(stop), onSignal_(std::move(onSignal)) {
  sigemptyset(&set_);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  thread_ = std::thread([this] {
    std::chrono::steady_clock::time_point first;
    while (true) {
      int sig = 0;
      if (received_ == 0) {
        sigwait(&set_, &sig);
      } else {
        auto left = first + kStopBound - std::chrono::steady_clock::now();
        auto ns = std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(left).count());
        timespec timeout{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
        sig = sigtimedwait(&set_, nullptr, &timeout);
        if (sig < 0 && errno == EINTR) continue;
        if (sig < 0 && !closing_) {
          exitWithLine("outbox-bridge: the stop did not finish within 5 s (a database or nats-server call is still "
                       "waiting): exiting; publishes in flight are reconciled on the next start\n",
                       1);
        }
      }
      if (closing_) return;
      if (received_ == 0) {
        received_ = sig;
        first = std::chrono::steady_clock::now();
        if (onSignal_ && !stop_.stopped()) onSignal_(sig);
        stop_.request();
        continue;
      }
      // The same stop request, doubled by a script or a supervisor (the terminal signals the whole
      // process group, then a wrapper's cleanup signals the bridge again): not a second request.
      if (std::chrono::steady_clock::now() - first < kSameRequest) continue;
      // A second signal: the operator wants out now.
      exitWithLine("outbox-bridge: a second SIGTERM/SIGINT: exiting now; publishes in flight are reconciled on the "
                   "next start\n",
                   128 + sig);
    }
  });
}

SignalWatcher::~SignalWatcher() {
  // Wake the waiting thread with a signal of our own; it sees closing_ and returns.
  closing_ = true;
  stop_.request();
  pthread_kill(thread_.native_handle(), SIGTERM);
  thread_.join();
}

}  // namespace outbox

#include "common/signal_watcher.h"

#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

namespace outbox {

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
      sigwait(&set_, &sig);
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
      // A second signal: the operator wants out now. Nothing is lost: versions in flight are
      // reconciled with the stream on the next start. A fixed line by write(2): a logger's lock,
      // held by a thread stuck on a full pipe, must not keep the process alive.
      static constexpr char kLine[] =
          "outbox-bridge: a second SIGTERM/SIGINT: exiting now; publishes in flight are reconciled on the next "
          "start\n";
      ssize_t ignored = ::write(STDERR_FILENO, kLine, sizeof kLine - 1);
      (void)ignored;
      std::_Exit(128 + sig);
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

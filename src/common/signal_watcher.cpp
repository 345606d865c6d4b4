#include "common/signal_watcher.h"

#include <pthread.h>

#include <cstdlib>

namespace outbox {

SignalWatcher::SignalWatcher(StopSignal& stop, std::function<void(int)> onSignal, std::function<void(int)> onSecond)
    : stop_(stop), onSignal_(std::move(onSignal)), onSecond_(std::move(onSecond)) {
  sigemptyset(&set_);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  thread_ = std::thread([this] {
    while (true) {
      int sig = 0;
      sigwait(&set_, &sig);
      if (closing_) return;
      if (received_ == 0) {
        received_ = sig;
        if (onSignal_ && !stop_.stopped()) onSignal_(sig);
        stop_.request();
        continue;
      }
      // A second signal: the operator wants out now. Nothing is lost: versions in flight are
      // reconciled with the stream on the next start.
      if (onSecond_) onSecond_(sig);
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

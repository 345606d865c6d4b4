#include "common/signal_watcher.h"

#include <pthread.h>

namespace outbox {

SignalWatcher::SignalWatcher(StopSignal& stop, std::function<void(int)> onSignal)
    : stop_(stop), onSignal_(std::move(onSignal)) {
  sigemptyset(&set_);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  thread_ = std::thread([this] {
    int sig = 0;
    sigwait(&set_, &sig);
    received_ = sig;
    if (onSignal_ && !stop_.stopped()) onSignal_(sig);
    stop_.request();
  });
}

SignalWatcher::~SignalWatcher() {
  // Wake the waiting thread with a signal of our own; it then requests a stop that is moot.
  if (received_ == 0) {
    stop_.request();
    pthread_kill(thread_.native_handle(), SIGTERM);
  }
  thread_.join();
}

}  // namespace outbox

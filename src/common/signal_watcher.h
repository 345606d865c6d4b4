#pragma once

#include <atomic>
#include <chrono>
#include <csignal>
#include <functional>
#include <thread>

#include "common/stop_token.h"

namespace outbox {

// Blocks SIGTERM and SIGINT in every thread started after it and turns the first into a stop
// request on a thread of its own; a second one, kSameRequest or more after the first, ends the
// process at once with 128 + the signal (the impatient operator's Ctrl-C Ctrl-C). A stop that has
// not ended the process kStopBound after the first signal (a database or nats-server call that
// does not return) ends it with exit code 1. Either way nothing is lost: what was in flight is
// reconciled with the stream on the next start. Create it in main's thread before any other
// thread; one per process.
class SignalWatcher {
 public:
  static constexpr std::chrono::milliseconds kSameRequest{500};
  static constexpr std::chrono::milliseconds kStopBound{5000};

  // `onSignal`, if given, runs on the watcher's thread when the first signal arrives, before the
  // stop. The second writes one fixed line to stderr and exits.
  explicit SignalWatcher(StopSignal& stop, std::function<void(int)> onSignal = nullptr);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;
  // The signal that asked to stop, or 0.
  int received() const { return received_; }

 private:
  StopSignal& stop_;
  std::function<void(int)> onSignal_;
  sigset_t set_;
  std::atomic<int> received_{0};
  std::atomic<bool> closing_{false};
  std::thread thread_;
};

}  // namespace outbox

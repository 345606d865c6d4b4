#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <vector>

#include "common/deadline.h"

namespace outbox {

// A stop request shared by the threads of one process. Thread-safe.
class StopSignal {
 public:
  void request() {
    std::vector<std::function<void()>> listeners;
    {
      std::lock_guard lock(mu_);
      if (!stopped_) listeners.swap(listeners_);
      stopped_ = true;
    }
    cv_.notify_all();
    for (auto& f : listeners) f();
  }
  // Calls `f` when stop is first requested (at once if it was): to wake a thread that waits on
  // something else (a Wakeup). What `f` touches must outlive the request, or the StopSignal.
  void onRequest(std::function<void()> f) {
    {
      std::lock_guard lock(mu_);
      if (!stopped_) {
        listeners_.push_back(std::move(f));
        return;
      }
    }
    f();
  }
  bool stopped() const { return stopped_.load(); }
  // Sleeps up to `d` (any length: the deadline saturates); returns true when stop was requested.
  bool waitFor(std::chrono::milliseconds d) {
    const auto deadline = deadlineAfter(d);
    std::unique_lock lock(mu_);
    return cv_.wait_until(lock, deadline, [&] { return stopped_.load(); });
  }

 private:
  std::atomic<bool> stopped_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::function<void()>> listeners_;
};

}  // namespace outbox

#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace outbox {

// A stop request shared by the threads of one process. Thread-safe.
class StopSignal {
 public:
  void request() {
    {
      std::lock_guard lock(mu_);
      stopped_ = true;
    }
    cv_.notify_all();
  }
  bool stopped() const { return stopped_.load(); }
  // Sleeps up to `d`; returns true when stop was requested.
  bool waitFor(std::chrono::milliseconds d) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, d, [&] { return stopped_.load(); });
  }

 private:
  std::atomic<bool> stopped_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace outbox

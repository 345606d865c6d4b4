#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

namespace outbox {

// Runs one piece of work at a time on a thread of its own, so the caller can prepare the next
// result while it uses the last: start(), do other things, take(). Everything the work touches
// is the worker's from start() until take() or drain() returns it (the mutex orders the two).
// The caller's methods are for one thread.
template <typename T>
class Prefetcher {
 public:
  Prefetcher() : thread_([this] { loop(); }) {}
  ~Prefetcher() {
    {
      std::lock_guard lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Only when !busy().
  void start(std::function<T()> work) {
    {
      std::lock_guard lock(mu_);
      work_ = std::move(work);
      result_.reset();
    }
    busy_ = true;
    cv_.notify_all();
  }
  bool busy() const { return busy_; }
  // Waits up to `timeout` for the work started last; its result once done.
  std::optional<T> take(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return result_.has_value(); })) return std::nullopt;
    busy_ = false;
    return std::exchange(result_, std::nullopt);
  }
  // Only when busy(): waits for the work started last, and returns its result.
  T wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return result_.has_value(); });
    busy_ = false;
    return *std::exchange(result_, std::nullopt);
  }
  // Waits for the work started last, if any, and drops its result.
  void drain() {
    if (!busy_) return;
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return result_.has_value(); });
    result_.reset();
    busy_ = false;
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return quit_ || work_; });
      if (quit_) return;
      auto work = std::exchange(work_, nullptr);
      lock.unlock();
      T result = work();
      lock.lock();
      result_ = std::move(result);
      cv_.notify_all();
    }
  }

  bool busy_ = false;  // the caller's thread only
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<T()> work_;      // GUARDED_BY(mu_)
  std::optional<T> result_;      // GUARDED_BY(mu_)
  bool quit_ = false;            // GUARDED_BY(mu_)
  std::thread thread_;           // last: it starts in the constructor, after the members it uses
};

}  // namespace outbox

#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace outbox {

// Exponential backoff with full jitter: delay n is uniform in [initial*2^n / 2, initial*2^n],
// capped at `max`. Not thread-safe; one per retry loop.
class Backoff {
 public:
  using Millis = std::chrono::milliseconds;
  Backoff(Millis initial, Millis max, uint64_t seed = std::random_device{}());

  // The delay before the next attempt; each call doubles the ceiling up to `max`.
  Millis next();
  // Call after a success: the next failure starts from `initial` again.
  void reset() { attempt_ = 0; }
  int attempts() const { return attempt_; }

 private:
  Millis initial_;
  Millis max_;
  int attempt_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace outbox

#pragma once

#include <chrono>

namespace outbox {

// Time as the relay and the lease see it. Tests use a fake to move time by hand.
class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
};

class SteadyClock final : public Clock {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
};

}  // namespace outbox

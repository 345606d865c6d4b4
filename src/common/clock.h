#pragma once

#include <chrono>

#include "common/stop_token.h"
#include "common/wakeup.h"

namespace outbox {

// Time as the relay, the scan and the lease see it, and their waits. Tests use a manual clock
// (tests/support/manual_clock.h) to move time by hand.
class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
  // Waits `d` of this clock's time, or until stop is requested; true when stop was requested.
  virtual bool waitFor(StopSignal& stop, std::chrono::milliseconds d) const = 0;
  // The same, also ending at a ring of `wake` after those counted in `seen`. `stop` must stop()
  // `wake` when stop is requested (StopSignal::onRequest).
  virtual bool waitFor(StopSignal& stop, std::chrono::milliseconds d, Wakeup& wake,
                       const Wakeup::Rings& seen) const = 0;
};

class SteadyClock final : public Clock {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
  bool waitFor(StopSignal& stop, std::chrono::milliseconds d) const override { return stop.waitFor(d); }
  bool waitFor(StopSignal& stop, std::chrono::milliseconds d, Wakeup& wake,
               const Wakeup::Rings& seen) const override {
    wake.waitPast(seen, d);  // stop() was called by then if stop was requested (onRequest)
    return stop.stopped();
  }
};

}  // namespace outbox

#pragma once

#include <chrono>

namespace outbox {

// `from` + `d` on the steady clock, or the clock's last instant when the sum would not fit: a
// deadline never wraps into the past (std::condition_variable::wait_for adds without a check, and
// a wait of 292 years in nanoseconds did wrap: it returned at once). A negative `d` is `from`.
inline std::chrono::steady_clock::time_point deadlineAfter(std::chrono::steady_clock::time_point from,
                                                           std::chrono::milliseconds d) {
  using TimePoint = std::chrono::steady_clock::time_point;
  if (d <= std::chrono::milliseconds::zero()) return from;
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(TimePoint::max() - from);
  if (d >= room) return TimePoint::max();
  return from + std::chrono::duration_cast<TimePoint::duration>(d);
}

// The same from now.
inline std::chrono::steady_clock::time_point deadlineAfter(std::chrono::milliseconds d) {
  return deadlineAfter(std::chrono::steady_clock::now(), d);
}

}  // namespace outbox

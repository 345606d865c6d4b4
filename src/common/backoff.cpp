#include "common/backoff.h"

#include <algorithm>

namespace outbox {

Backoff::Backoff(Millis initial, Millis max, uint64_t seed)
    : initial_(initial), max_(std::max(initial, max)), rng_(seed) {}

Backoff::Millis Backoff::next() {
  int64_t ceiling = initial_.count();
  for (int i = 0; i < attempt_ && ceiling < max_.count(); ++i) ceiling *= 2;
  ceiling = std::min<int64_t>(ceiling, max_.count());
  if (attempt_ < 62) ++attempt_;
  std::uniform_int_distribution<int64_t> jitter(ceiling / 2, ceiling);
  return Millis(jitter(rng_));
}

}  // namespace outbox

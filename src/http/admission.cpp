#include "http/admission.h"

namespace outbox {

Admission admit(const std::vector<OpenConnection>& open, size_t maxConnections, size_t reservedConnections) {
  Admission a;
  size_t normal = 0, reserved = 0, closing = 0;
  auto older = [&](size_t i, const std::optional<size_t>& than) { return !than || open[i].since < open[*than].since; };
  std::optional<size_t> oldestWaiting, oldestClosing;
  for (size_t i = 0; i < open.size(); ++i) {
    const OpenConnection& c = open[i];
    if (c.phase == ConnectionPhase::kClosing) {
      ++closing;
      if (older(i, oldestClosing)) oldestClosing = i;
      continue;
    }
    ++(c.reserved ? reserved : normal);
    if (c.phase == ConnectionPhase::kWaiting && older(i, oldestWaiting)) oldestWaiting = i;
  }
  if (closing >= maxConnections) a.closeClosing = oldestClosing;
  if (normal < maxConnections) {
    a.admitted = true;
  } else if (oldestWaiting) {
    // Its place, normal or reserved, goes to the new connection.
    a.admitted = true;
    a.evict = oldestWaiting;
    a.reserved = open[*oldestWaiting].reserved;
  } else if (reserved < reservedConnections) {
    a.admitted = true;
    a.reserved = true;
  }
  return a;
}

}  // namespace outbox

#include "relay/ack_tracker.h"

namespace outbox {

void AckTracker::reset(uint64_t version, uint64_t seq) {
  version_ = version;
  seq_ = seq;
  ahead_.clear();
}

void AckTracker::ack(uint64_t version, uint64_t seq) {
  if (version <= version_) return;
  if (version != version_ + 1) {
    ahead_[version] = seq;
    return;
  }
  version_ = version;
  seq_ = seq;
  for (auto it = ahead_.begin(); it != ahead_.end() && it->first == version_ + 1; it = ahead_.erase(it)) {
    version_ = it->first;
    seq_ = it->second;
  }
}

}  // namespace outbox

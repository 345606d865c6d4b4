#include "relay/ack_window.h"

#include <cassert>

namespace outbox {

void AckWindow::open(uint64_t version, uint64_t seq) {
  tracker_.reset(version, seq);
  inFlight_.clear();
  failed_.clear();
  next_ = version + 1;
  open_ = true;
}

void AckWindow::close() {
  open_ = false;
  inFlight_.clear();
  failed_.clear();
}

void AckWindow::sent(const OutboxRow& row, Clock::TimePoint sentAt) {
  assert(row.version == next_);
  inFlight_.push_back({row.version, row.createdAtMicros, sentAt});
  ++next_;
}

AckWindow::Taken AckWindow::take(Publisher& publisher) {
  Taken taken;
  acks_.clear();
  publisher.takeAcks(acks_);
  for (auto& ack : acks_) {
    if (ack.version <= tracker_.contiguousVersion() || ack.version >= next_) continue;
    if (ack.ok) {
      tracker_.ack(ack.version, ack.seq);
      continue;
    }
    failed_.insert(ack.version);
    if (!taken.failure) taken.failure = std::move(ack);
  }
  published_.clear();
  while (!inFlight_.empty() && inFlight_.front().version <= tracker_.contiguousVersion()) {
    published_.push_back(inFlight_.front());
    inFlight_.pop_front();
  }
  taken.published = published_;
  return taken;
}

std::optional<AckWindow::Sent> AckWindow::overdue(Clock::TimePoint now, std::chrono::milliseconds timeout) const {
  if (inFlight_.empty() || now - inFlight_.front().sentAt <= timeout) return std::nullopt;
  return inFlight_.front();
}

bool AckWindow::allAnswered() const { return inFlight_.size() <= tracker_.waiting() + failed_.size(); }

}  // namespace outbox

#include "lease/lease.h"

#include <unistd.h>

#include <utility>

#include <fmt/format.h>

namespace outbox {

std::string makeHolderId() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  auto started = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  static const std::string id = fmt::format("{}:{}:{}", host, getpid(), started);
  return id;
}

std::optional<Candidate> lighterCandidate(const std::vector<Candidate>& candidates, const std::string& me) {
  int64_t mine = 0;
  const Candidate* lightest = nullptr;
  for (const auto& c : candidates) {
    if (c.holder == me) {
      mine = c.leads;
    } else if (lightest == nullptr || c.leads < lightest->leads ||
               (c.leads == lightest->leads && c.holder < lightest->holder)) {
      lightest = &c;
    }
  }
  if (lightest == nullptr || lightest->leads >= mine) return std::nullopt;
  return *lightest;
}

bool HandOverGate::tryEnter(Clock::TimePoint now, std::chrono::milliseconds ttl) {
  std::lock_guard lock(mu_);
  if (busy_ && now < busyUntil_) return false;
  busy_ = true;
  busyUntil_ = now + ttl;
  return true;
}

void HandOverGate::leave() {
  std::lock_guard lock(mu_);
  busy_ = false;
}

LeaderLease::LeaderLease(LeaseStore& store, std::string holder, std::chrono::milliseconds ttl,
                         std::chrono::milliseconds heartbeat, const Clock& clock, std::function<bool()> canPublish,
                         HandOverGate* gate)
    : store_(store),
      holder_(std::move(holder)),
      ttl_(ttl),
      heartbeat_(heartbeat),
      clock_(clock),
      canPublish_(std::move(canPublish)),
      gate_(gate) {}

Status LeaderLease::refreshIfDue() {
  if (clock_.now() < nextRefresh_) return Status::ok();
  return refreshNow();
}

Status LeaderLease::refreshNow() {
  auto sent = clock_.now();
  nextRefresh_ = sent + heartbeat_;
  if (aligned_) {
    const auto since = nextRefresh_.time_since_epoch();
    nextRefresh_ -= since % std::chrono::duration_cast<Clock::TimePoint::duration>(heartbeat_);
  }
  const bool standing = !canPublish_ || canPublish_();
  auto grant = store_.tryAcquire(holder_, ttl_, standing);
  lastFailed_ = !grant.isOk();
  if (!grant.isOk()) {
    // Try again soon; leadership, if we had it, runs out by our clock meanwhile.
    nextRefresh_ = sent + std::min(heartbeat_, std::chrono::milliseconds(1000));
    return grant.status();
  }
  currentHolder_ = grant->holder;
  lighter_ = grant->lighter;
  expiresIn_ = grant->expiresIn;
  handOverExpected_ = grant->handOverExpected;
  if (gate_ != nullptr) {
    // Hand over only while no other source of this process is being handed over (one that cannot
    // publish gives everything up at once).
    const bool handing = grant->leader && !lighter_.empty() && standing;
    if (!handing && std::exchange(holdsGate_, false)) gate_->leave();
    if (handing && !holdsGate_) {
      holdsGate_ = gate_->tryEnter(sent, ttl_);
      if (!holdsGate_) lighter_.clear();
    }
  }
  if (grant->leader) {
    // The database set expiry to its NOW() + ttl, after `sent`: trusting the lease until
    // sent + ttl - margin keeps us inside it even with some clock-rate difference.
    auto margin = std::min(ttl_ / 10, std::chrono::milliseconds(2000));
    validUntil_ = sent + ttl_ - margin;
    leader_ = true;
    leaseEpoch_ = grant->leaseEpoch;
  } else {
    leader_ = false;
  }
  return Status::ok();
}

bool LeaderLease::isLeader() const { return leader_ && clock_.now() < validUntil_; }

std::chrono::milliseconds LeaderLease::standbyWait() const {
  if (lastFailed_ || handOverExpected_) return std::min(heartbeat_, std::chrono::milliseconds(1000));
  if (currentHolder_.empty() || expiresIn_ <= std::chrono::milliseconds(0)) return heartbeat_;
  // Just after the holder's lease runs out, if it does not renew it first.
  return std::min(heartbeat_, expiresIn_ + std::chrono::milliseconds(50));
}

void LeaderLease::handOver() {
  if (leader_) (void)store_.release(holder_);
  leader_ = false;
  lighter_.clear();
  currentHolder_.clear();
  // Released: the store sees this hand-over now (a lease given up and not yet taken).
  if (std::exchange(holdsGate_, false)) gate_->leave();
}

void LeaderLease::release() {
  handOver();
  (void)store_.withdraw(holder_);
}

}  // namespace outbox

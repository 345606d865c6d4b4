#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/clock.h"
#include "common/status.h"

namespace outbox {

// The answer of one lease round trip.
struct LeaseGrant {
  bool leader = false;
  std::string holder;       // who holds it now
  uint64_t leaseEpoch = 0;  // rises on every change of holder
};

// The lease row of a source (ARCHITECTURE.md section 8). Single-threaded.
class LeaseStore {
 public:
  virtual ~LeaseStore() = default;
  // One INSERT ... ON DUPLICATE KEY UPDATE on the database clock: takes the lease if it is free,
  // expired or already ours, and in those cases sets it to expire `ttl` from now.
  virtual Result<LeaseGrant> tryAcquire(const std::string& holder, std::chrono::milliseconds ttl) = 0;
  // Gives the lease up (expires it now) if we hold it, so a standby need not wait out the TTL.
  virtual Status release(const std::string& holder) = 0;
};

// "hostname:pid:start-time", unique per process.
std::string makeHolderId();

// Leadership as this process may act on it. The lease row says who holds the lease until when
// by the database clock; this object additionally stops believing in it by its own monotonic
// clock `ttl - margin` after the request that last renewed it was sent — so a paused process
// that wakes up after its lease expired does not act as leader even before it asks again.
// Single-threaded: the relay thread owns it.
class LeaderLease {
 public:
  LeaderLease(LeaseStore& store, std::string holder, std::chrono::milliseconds ttl,
              std::chrono::milliseconds heartbeat, const Clock& clock);

  // Renews (or tries to take) the lease when a heartbeat is due; a failed round trip leaves
  // leadership to run out by the clock.
  Status refreshIfDue();
  Status refreshNow();
  bool isLeader() const;
  uint64_t leaseEpoch() const { return leaseEpoch_; }
  const std::string& holder() const { return holder_; }
  const std::string& currentHolder() const { return currentHolder_; }
  void release();
  std::chrono::milliseconds heartbeat() const { return heartbeat_; }

 private:
  LeaseStore& store_;
  std::string holder_;
  std::chrono::milliseconds ttl_;
  std::chrono::milliseconds heartbeat_;
  const Clock& clock_;
  bool leader_ = false;
  uint64_t leaseEpoch_ = 0;
  std::string currentHolder_;
  Clock::TimePoint validUntil_{};
  Clock::TimePoint nextRefresh_{};
};

}  // namespace outbox

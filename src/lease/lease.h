#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace outbox {

// An instance standing for a source, and how many other sources of the database it leads now.
struct Candidate {
  std::string holder;
  int64_t leads = 0;
  bool settled = true;  // it has stood a TTL: it may be handed a source (not only left a free one)
};

// One hand-over at a time in a process. Its relay threads decide on their own and at the same
// moments (they started together): between one deciding to hand a source over and its lease
// being released, the others would see the same imbalance and hand theirs over too. The first
// to decide holds this until it has released its lease, or for a TTL.
class HandOverGate {
 public:
  bool tryEnter(Clock::TimePoint now, std::chrono::milliseconds ttl);
  void leave();

 private:
  std::mutex mu_;
  bool busy_ = false;             // GUARDED_BY(mu_)
  Clock::TimePoint busyUntil_{};  // GUARDED_BY(mu_)
};

// Sources spread over instances: the candidate this instance should leave a source to — the one
// leading the fewest other sources, when that is fewer than this instance (`me`) leads. nullopt:
// the source is this instance's to take or keep. Moving a source only from a candidate leading at
// least two more than another makes every move even the load out, so it settles, at about M/N
// sources each for M sources and N instances.
std::optional<Candidate> lighterCandidate(const std::vector<Candidate>& candidates, const std::string& me);

// The answer of one lease round trip.
struct LeaseGrant {
  bool leader = false;
  std::string holder;       // who holds it now ("" none, or it expired)
  uint64_t leaseEpoch = 0;  // rises on every change of holder
  std::chrono::milliseconds expiresIn{0};  // when the holder's lease runs out (database clock)
  // A candidate leading fewer sources (lighterCandidate): a leader should hand the source over to
  // it; a standby leaves a free lease to it.
  std::string lighter;
  // A standby the holder should hand the source to (we lead fewer): it asks again soon.
  bool handOverExpected = false;
};

// The lease row of a source (docs/design.md, "Several instances: the lease"). Single-threaded.
class LeaseStore {
 public:
  virtual ~LeaseStore() = default;
  // One INSERT ... ON DUPLICATE KEY UPDATE on the database clock: takes the lease if it is free,
  // expired or already ours, and in those cases sets it to expire `ttl` from now. Also renews
  // this instance's candidacy for the source; when another candidate leads fewer sources (see
  // lighterCandidate) it takes no free lease and names that candidate in `lighter`. An instance
  // that cannot publish (`stand` false: its NATS connection is down) stands down: it is no
  // candidate, names any live candidate in `lighter`, and takes a free lease only when there is
  // none.
  virtual Result<LeaseGrant> tryAcquire(const std::string& holder, std::chrono::milliseconds ttl, bool stand) = 0;
  // Gives the lease up (expires it now) if we hold it, so a standby need not wait out the TTL.
  virtual Status release(const std::string& holder) = 0;
  // Stops standing for the source (the process is stopping).
  virtual Status withdraw(const std::string& holder) = 0;
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
  // `canPublish` says whether this instance could publish now (its NATS connection is up): only
  // then does it stand for the source. Empty: always.
  // `gate`, shared by the process's leases, lets one hand a source over at a time (null: no limit).
  LeaderLease(LeaseStore& store, std::string holder, std::chrono::milliseconds ttl,
              std::chrono::milliseconds heartbeat, const Clock& clock, std::function<bool()> canPublish = {},
              HandOverGate* gate = nullptr);

  // Heartbeats at whole multiples of the heartbeat on the clock (each at most a heartbeat after
  // the last), so the process's leases fall due together and a JointRenewal renews them in one
  // round.
  void alignHeartbeats() { aligned_ = true; }
  // Renews (or tries to take) the lease when a heartbeat is due; a failed round trip leaves
  // leadership to run out by the clock.
  Status refreshIfDue();
  Status refreshNow();
  bool isLeader() const;
  uint64_t leaseEpoch() const { return leaseEpoch_; }
  const std::string& holder() const { return holder_; }
  const std::string& currentHolder() const { return currentHolder_; }
  // The candidate leading fewer sources that the last round trip named ("" none): a leader hands
  // the source over to it, a standby leaves the lease to it.
  const std::string& lighter() const { return lighter_; }
  // How long a standby waits before asking again: a heartbeat, less when the holder's lease runs
  // out sooner (a dead leader's sources move within the TTL); a second after a failed round trip
  // or while the holder should hand the source to us.
  std::chrono::milliseconds standbyWait() const;
  // Gives the lease up but stays a candidate (handing the source to a lighter instance).
  void handOver();
  // Gives the lease up and stops standing for the source (shutdown).
  void release();
  std::chrono::milliseconds heartbeat() const { return heartbeat_; }
  // When refreshIfDue() next asks the database: a leader that waits for work wakes by then.
  Clock::TimePoint nextRefresh() const { return nextRefresh_; }

 private:
  LeaseStore& store_;
  std::string holder_;
  std::chrono::milliseconds ttl_;
  std::chrono::milliseconds heartbeat_;
  const Clock& clock_;
  std::function<bool()> canPublish_;
  HandOverGate* gate_;
  bool holdsGate_ = false;
  bool aligned_ = false;
  bool leader_ = false;
  uint64_t leaseEpoch_ = 0;
  std::string currentHolder_;
  std::string lighter_;
  std::chrono::milliseconds expiresIn_{0};
  bool handOverExpected_ = false;
  bool lastFailed_ = false;
  Clock::TimePoint validUntil_{};
  Clock::TimePoint nextRefresh_{};
};

}  // namespace outbox

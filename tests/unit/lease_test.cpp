#define BOOST_TEST_MODULE lease
#include <boost/test/unit_test.hpp>

#include "lease/lease.h"
#include "manual_clock.h"

using namespace outbox;
using outbox::test::ManualClock;
using namespace std::chrono_literals;

namespace {

// A lease row with the database's rules, on the manual clock.
class FakeLeaseStore final : public LeaseStore {
 public:
  explicit FakeLeaseStore(ManualClock& clock) : clock_(clock) {}
  bool failing = false;
  int calls = 0;
  std::string holder;
  uint64_t epoch = 0;
  Clock::TimePoint expires{};

  Result<LeaseGrant> tryAcquire(const std::string& me, std::chrono::milliseconds ttl) override {
    ++calls;
    if (failing) return Status::transient("database away");
    if (holder.empty() || holder == me || expires < clock_.now()) {
      if (holder != me) ++epoch;
      holder = me;
      expires = clock_.now() + ttl;
    }
    return LeaseGrant{holder == me, holder, epoch};
  }
  Status release(const std::string& me) override {
    if (holder == me) expires = clock_.now();
    return Status::ok();
  }

 private:
  ManualClock& clock_;
};

}  // namespace

BOOST_AUTO_TEST_CASE(one_leader_at_a_time_and_the_epoch_rises_on_a_change_of_holder) {
  ManualClock clock;
  FakeLeaseStore store(clock);
  LeaderLease a(store, "a", 30s, 10s, clock), b(store, "b", 30s, 10s, clock);
  BOOST_TEST(a.refreshNow().isOk());
  BOOST_TEST(b.refreshNow().isOk());
  BOOST_TEST(a.isLeader());
  BOOST_TEST(!b.isLeader());
  BOOST_TEST(b.currentHolder() == "a");
  uint64_t first = a.leaseEpoch();
  a.release();
  BOOST_TEST(!a.isLeader());
  clock.advance(1ms);
  BOOST_TEST(b.refreshNow().isOk());
  BOOST_TEST(b.isLeader());
  BOOST_TEST(b.leaseEpoch() == first + 1);
}

BOOST_AUTO_TEST_CASE(renewals_follow_the_heartbeat) {
  ManualClock clock;
  FakeLeaseStore store(clock);
  LeaderLease a(store, "a", 30s, 10s, clock);
  BOOST_TEST(a.refreshIfDue().isOk());
  BOOST_TEST(store.calls == 1);
  clock.advance(9s);
  BOOST_TEST(a.refreshIfDue().isOk());
  BOOST_TEST(store.calls == 1);
  clock.advance(1s);
  BOOST_TEST(a.refreshIfDue().isOk());
  BOOST_TEST(store.calls == 2);
  for (int i = 0; i < 10; ++i) {
    clock.advance(10s);
    BOOST_TEST(a.refreshIfDue().isOk());
    BOOST_TEST(a.isLeader());
  }
}

// A leader that cannot renew (database away, or the process was paused) stops believing in its
// lease by its own clock before the database would let another holder take it.
BOOST_AUTO_TEST_CASE(leadership_runs_out_by_the_local_clock_before_the_lease_expires) {
  ManualClock clock;
  FakeLeaseStore store(clock);
  LeaderLease a(store, "a", 30s, 10s, clock);
  BOOST_TEST(a.refreshNow().isOk());
  store.failing = true;
  clock.advance(26s);
  BOOST_TEST(!a.refreshIfDue().isOk());
  BOOST_TEST(a.isLeader());
  clock.advance(2s);  // 28 s: past ttl - margin (27 s), still before the row expires (30 s)
  BOOST_TEST(!a.isLeader());
  BOOST_TEST((clock.now() < store.expires));
}

BOOST_AUTO_TEST_CASE(a_paused_leader_wakes_up_without_leadership) {
  ManualClock clock;
  FakeLeaseStore store(clock);
  LeaderLease a(store, "a", 30s, 10s, clock), b(store, "b", 30s, 10s, clock);
  BOOST_TEST(a.refreshNow().isOk());
  clock.advance(45s);  // a is frozen; its lease expired
  BOOST_TEST(b.refreshNow().isOk());
  BOOST_TEST(b.isLeader());
  BOOST_TEST(!a.isLeader());  // before it even asks
  BOOST_TEST(a.refreshNow().isOk());
  BOOST_TEST(!a.isLeader());
  BOOST_TEST(a.currentHolder() == "b");
}

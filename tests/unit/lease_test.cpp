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

  std::string lighter;  // a candidate leading fewer sources: a free lease is left to it
  bool handOverExpected = false;  // the holder should hand the source to the asking standby
  int withdrawn = 0;

  Result<LeaseGrant> tryAcquire(const std::string& me, std::chrono::milliseconds ttl, bool) override {
    ++calls;
    if (failing) return Status::transient("database away");
    bool free = holder.empty() || expires < clock_.now();
    bool leading = holder == me && expires > clock_.now();
    if (lighter.empty() ? free || holder == me : leading) {
      if (holder != me) ++epoch;
      holder = me;
      expires = clock_.now() + ttl;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(expires - clock_.now());
    std::string live = left.count() > 0 ? holder : "";
    return LeaseGrant{live == me, live, epoch, left, lighter, live != me && handOverExpected};
  }
  Status release(const std::string& me) override {
    if (holder == me) expires = clock_.now();
    return Status::ok();
  }
  Status withdraw(const std::string&) override {
    ++withdrawn;
    return Status::ok();
  }

 private:
  ManualClock& clock_;
};

// The lease row and two would-be holders of it, "a" and "b" (TTL 30 s, heartbeat 10 s).
struct TwoHolders {
  ManualClock clock;
  FakeLeaseStore store{clock};
  LeaderLease a{store, "a", 30s, 10s, clock};
  LeaderLease b{store, "b", 30s, 10s, clock};
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(one_leader_at_a_time_and_the_epoch_rises_on_a_change_of_holder, TwoHolders) {
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

BOOST_FIXTURE_TEST_CASE(renewals_follow_the_heartbeat, TwoHolders) {
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
BOOST_FIXTURE_TEST_CASE(leadership_runs_out_by_the_local_clock_before_the_lease_expires, TwoHolders) {
  BOOST_TEST(a.refreshNow().isOk());
  store.failing = true;
  clock.advance(26s);
  BOOST_TEST(!a.refreshIfDue().isOk());
  BOOST_TEST(a.isLeader());
  clock.advance(2s);  // 28 s: past ttl - margin (27 s), still before the row expires (30 s)
  BOOST_TEST(!a.isLeader());
  BOOST_TEST((clock.now() < store.expires));
}

BOOST_FIXTURE_TEST_CASE(a_paused_leader_wakes_up_without_leadership, TwoHolders) {
  BOOST_TEST(a.refreshNow().isOk());
  clock.advance(45s);  // a is frozen; its lease expired
  BOOST_TEST(b.refreshNow().isOk());
  BOOST_TEST(b.isLeader());
  BOOST_TEST(!a.isLeader());  // before it even asks
  BOOST_TEST(a.refreshNow().isOk());
  BOOST_TEST(!a.isLeader());
  BOOST_TEST(a.currentHolder() == "b");
}

BOOST_AUTO_TEST_CASE(a_source_goes_to_the_candidate_leading_the_fewest_other_sources) {
  using Cs = std::vector<Candidate>;
  BOOST_TEST(!lighterCandidate(Cs{{"me", 3}}, "me"));  // alone: ours, however many we lead
  BOOST_TEST(!lighterCandidate(Cs{{"me", 2}, {"b", 2}}, "me"));  // a tie keeps it where it is
  BOOST_TEST(!lighterCandidate(Cs{{"me", 1}, {"b", 2}, {"c", 3}}, "me"));
  auto to = lighterCandidate(Cs{{"me", 2}, {"c", 1}, {"b", 1}, {"d", 0}}, "me");
  BOOST_REQUIRE(to);
  BOOST_TEST(to->holder == "d");
  to = lighterCandidate(Cs{{"me", 2}, {"c", 1}, {"b", 1}}, "me");  // the same pick on every instance
  BOOST_REQUIRE(to);
  BOOST_TEST(to->holder == "b");
  BOOST_TEST(!lighterCandidate(Cs{{"b", 0}}, "me"));  // not a candidate (yet): leads nothing here
}

// Six sources over three instances that came up one after another: the loads even out by moves
// from an instance leading two more than another, and then stay.
BOOST_AUTO_TEST_CASE(moving_sources_to_lighter_candidates_settles_at_an_even_spread) {
  std::vector<int64_t> leads{6, 0, 0};  // the first instance took every source before the others came
  for (int round = 0; round < 20; ++round) {
    for (size_t me = 0; me < leads.size(); ++me) {
      for (int source = 0; source < leads[me]; ++source) {
        std::vector<Candidate> cs;
        for (size_t i = 0; i < leads.size(); ++i) {
          cs.push_back(Candidate{std::string(1, char('a' + i)), leads[i] - (i == me ? 1 : 0)});
        }
        if (auto to = lighterCandidate(cs, std::string(1, char('a' + me)))) {
          --leads[me];
          ++leads[static_cast<size_t>(to->holder[0] - 'a')];
        }
      }
    }
  }
  BOOST_TEST(leads == (std::vector<int64_t>{2, 2, 2}), boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(a_leader_told_of_a_lighter_candidate_hands_over_and_stays_a_candidate, TwoHolders) {
  BOOST_TEST(a.refreshNow().isOk());
  BOOST_TEST(a.lighter().empty());
  store.lighter = "b";
  BOOST_TEST(a.refreshNow().isOk());
  BOOST_TEST(a.isLeader());  // renewed: the relay settles what is in flight first
  BOOST_TEST(a.lighter() == "b");
  a.handOver();
  BOOST_TEST(!a.isLeader());
  BOOST_TEST(store.withdrawn == 0);
  BOOST_TEST(a.refreshNow().isOk());
  BOOST_TEST(!a.isLeader());  // the free lease is left to b
  store.lighter.clear();
  clock.advance(1ms);
  BOOST_TEST(b.refreshNow().isOk());
  BOOST_TEST(b.isLeader());
  b.release();
  BOOST_TEST(store.withdrawn == 1);
}

BOOST_FIXTURE_TEST_CASE(a_standby_asks_again_when_the_lease_runs_out_or_soon_after_a_failure, TwoHolders) {
  BOOST_TEST(a.refreshNow().isOk());
  clock.advance(27s);
  BOOST_TEST(b.refreshNow().isOk());
  BOOST_TEST(b.standbyWait() == 3050ms);  // just after a's lease ends, not a heartbeat later
  clock.advance(3050ms);
  BOOST_TEST(b.refreshNow().isOk());
  BOOST_TEST(b.isLeader());
  BOOST_TEST(a.refreshNow().isOk());
  BOOST_TEST(a.standbyWait() == 10s);  // b just renewed: a heartbeat
  store.failing = true;
  BOOST_TEST(!a.refreshNow().isOk());
  BOOST_TEST(a.standbyWait() == 1s);
}

// The relay threads of one process decide on their own: only one at a time may be handing a
// source over (from the decision until its lease is released); the others keep theirs meanwhile.
BOOST_AUTO_TEST_CASE(one_source_of_a_process_is_handed_over_at_a_time) {
  ManualClock clock;
  FakeLeaseStore first(clock), second(clock);
  HandOverGate gate;
  LeaderLease a1(first, "a", 30s, 10s, clock, {}, &gate), a2(second, "a", 30s, 10s, clock, {}, &gate);
  BOOST_TEST(a1.refreshNow().isOk());
  BOOST_TEST(a2.refreshNow().isOk());
  first.lighter = second.lighter = "b";
  BOOST_TEST(a1.refreshNow().isOk());
  BOOST_TEST(a2.refreshNow().isOk());
  BOOST_TEST(a1.lighter() == "b");  // a1 decided first
  BOOST_TEST(a2.lighter().empty());  // a2 keeps its source for now
  BOOST_TEST(a2.isLeader());
  a1.handOver();                     // released: the gate is free again
  BOOST_TEST(a2.refreshNow().isOk());
  BOOST_TEST(a2.lighter() == "b");
  // A gate held by a thread that never releases (a2 here) frees after its TTL (30 s).
  FakeLeaseStore third(clock);
  LeaderLease a3(third, "a", 60s, 10s, clock, {}, &gate);
  BOOST_TEST(a3.refreshNow().isOk());
  third.lighter = "b";
  clock.advance(1s);
  BOOST_TEST(a3.refreshNow().isOk());
  BOOST_TEST(a3.isLeader());
  BOOST_TEST(a3.lighter().empty());
  clock.advance(30s);
  BOOST_TEST(a3.refreshNow().isOk());
  BOOST_TEST(a3.isLeader());
  BOOST_TEST(a3.lighter() == "b");
}

BOOST_FIXTURE_TEST_CASE(the_standby_a_source_should_go_to_asks_every_second, TwoHolders) {
  BOOST_TEST(a.refreshNow().isOk());
  BOOST_TEST(b.refreshNow().isOk());
  BOOST_TEST(b.standbyWait() == 10s);
  store.handOverExpected = true;
  BOOST_TEST(b.refreshNow().isOk());
  BOOST_TEST(b.standbyWait() == 1s);
}

// Issue 33 (docs/design.md, "The heartbeats of a database in one round"): aligned, a lease's next
// heartbeat is the next whole multiple of the heartbeat after its last renewal, never later than
// a heartbeat after it, so the leases of a process fall due together.
BOOST_FIXTURE_TEST_CASE(aligned_heartbeats_fall_on_whole_multiples_of_the_heartbeat, TwoHolders) {
  using D = Clock::TimePoint::duration;
  // The whole multiple of 10 s at or below `t` (the manual clock starts anywhere).
  auto floorTo10s = [](Clock::TimePoint t) { return t - t.time_since_epoch() % std::chrono::duration_cast<D>(10s); };
  a.alignHeartbeats();
  const Clock::TimePoint grid = floorTo10s(clock.now()) + 10s;  // the first mark after now
  clock.advance(std::chrono::duration_cast<std::chrono::milliseconds>(grid - clock.now()) + 3s);  // 3 s past it
  BOOST_TEST(a.refreshNow().isOk());
  BOOST_TEST(a.isLeader());
  BOOST_TEST((a.nextRefresh() == grid + 10s));  // 7 s on, not 10
  clock.advance(6999ms);
  BOOST_TEST(a.refreshIfDue().isOk());
  BOOST_TEST((a.nextRefresh() == grid + 10s));  // not due yet
  clock.advance(1ms);  // due: the next a heartbeat on
  BOOST_TEST(a.refreshIfDue().isOk());
  BOOST_TEST((a.nextRefresh() == grid + 20s));
  BOOST_TEST(a.isLeader());
}

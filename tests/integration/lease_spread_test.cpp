#define BOOST_TEST_MODULE lease_spread
#include <boost/test/unit_test.hpp>

#include <map>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "harness.h"
#include "lease/lease.h"
#include "lease/mysql_lease_store.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

// A bridge instance as the lease sees it: one LeaderLease per source over the real lease and
// candidate tables, stepped by the test (what each relay thread does once per heartbeat).
class Instance {
 public:
  // TTL 3 s and heartbeat 1 s unless `ttl` says otherwise.
  Instance(const Config& config, std::string holder, const Clock& clock, std::chrono::milliseconds ttl = 3s)
      : holder_(std::move(holder)) {
    for (const auto& source : config.sources) {
      stores_.push_back(std::make_unique<MysqlLeaseStore>(source, 1s, LeaseConfig{ttl, 1s}));
      leases_.push_back(std::make_unique<LeaderLease>(*stores_.back(), holder_, ttl, 1s, clock,
                                                      [this] { return canPublish; }, &gate_));
    }
  }
  bool canPublish = true;  // false: as with its NATS connection down
  // One round: each source renews or asks; a leader told of a lighter candidate hands over.
  void step() {
    for (auto& lease : leases_) {
      BOOST_REQUIRE(lease->refreshNow().isOk());
      if (lease->isLeader() && !lease->lighter().empty()) lease->handOver();
    }
  }
  int leads() const {
    int n = 0;
    for (const auto& lease : leases_) n += lease->isLeader() ? 1 : 0;
    return n;
  }
  bool leads(size_t source) const { return leases_[source]->isLeader(); }
  uint64_t jointRenewals(size_t source) const { return stores_[source]->jointRenewals(); }
  uint64_t leaseEpoch(size_t source) const { return leases_[source]->leaseEpoch(); }
  void stop() {
    for (auto& lease : leases_) lease->release();
  }

 private:
  std::string holder_;
  HandOverGate gate_;
  std::vector<std::unique_ptr<MysqlLeaseStore>> stores_;
  std::vector<std::unique_ptr<LeaderLease>> leases_;
};

struct Spread {
  TestDatabase database{"spread"};
  std::vector<SourceSpec> specs;
  Config config;
  SteadyClock clock;
  Spread() {
    for (int i = 0; i < 6; ++i) specs.push_back(SourceSpec{uniqueName(fmt::format("s{}_", i), database), &database, {}});
    std::string path = writeConfig(specs);
    migrate(path);
    config = loadConfig(path, processEnvironment());
  }
  // Every source led by exactly one instance.
  void requireOneLeaderEach(const std::vector<Instance*>& instances) {
    for (size_t s = 0; s < config.sources.size(); ++s) {
      int leaders = 0;
      for (auto* i : instances) leaders += i->leads(s) ? 1 : 0;
      BOOST_TEST(leaders == 1, "source " << s);
    }
  }
};

std::vector<int> loads(const std::vector<Instance*>& instances) {
  std::vector<int> out;
  for (auto* i : instances) out.push_back(i->leads());
  return out;
}

}  // namespace

// Issue 11: with N instances and M sources each leads about M/N, however they came up; when one
// dies, the others take its sources once its lease and candidacy run out.
BOOST_AUTO_TEST_CASE(six_sources_spread_two_each_over_three_instances_and_move_when_one_dies) {
  Spread spread;
  Instance a(spread.config, "instance-a", spread.clock);
  a.step();  // alone: a takes every source
  BOOST_TEST(a.leads() == 6);
  Instance b(spread.config, "instance-b", spread.clock), c(spread.config, "instance-c", spread.clock);
  std::vector<Instance*> all{&a, &b, &c};
  // b and c are handed nothing until they have stood a TTL (3 s); then one source a round.
  const auto joined = std::chrono::steady_clock::now();
  for (int round = 0; round < 24 && loads(all) != std::vector<int>{2, 2, 2}; ++round) {
    for (auto* i : all) i->step();
    if (std::chrono::steady_clock::now() - joined < 2500ms) BOOST_TEST(a.leads() == 6);
    std::this_thread::sleep_for(250ms);
  }
  BOOST_TEST(loads(all) == (std::vector<int>{2, 2, 2}), boost::test_tools::per_element());
  spread.requireOneLeaderEach(all);
  // Four moves and no more (each raises a lease epoch): one hand-over at a time, each towards the
  // lightest, none sent back.
  const std::string epochs = "SELECT SUM(lease_epoch) FROM outbox_bridge_lease";
  BOOST_TEST(spread.database.scalar(epochs) == 6u + 4u);
  for (int round = 0; round < 3; ++round) {  // settled: no further moves
    for (auto* i : all) i->step();
  }
  BOOST_TEST(loads(all) == (std::vector<int>{2, 2, 2}), boost::test_tools::per_element());
  BOOST_TEST(spread.database.scalar(epochs) == 6u + 4u);
  BOOST_TEST(spread.database.scalar("SELECT COUNT(*) FROM outbox_bridge_candidate") == 18u);

  // c dies (no release): its leases and candidacy run out after the TTL (3 s) while a and b go on
  // renewing theirs, which do not move.
  std::vector<Instance*> alive{&a, &b};
  std::map<size_t, uint64_t> kept;
  for (size_t s = 0; s < spread.config.sources.size(); ++s) {
    if (!c.leads(s)) kept[s] = a.leads(s) ? a.leaseEpoch(s) : b.leaseEpoch(s);
  }
  for (int step = 0; step < 8; ++step) {
    std::this_thread::sleep_for(500ms);
    for (auto* i : alive) i->step();
  }
  BOOST_TEST(loads(alive) == (std::vector<int>{3, 3}), boost::test_tools::per_element());
  spread.requireOneLeaderEach(alive);
  for (const auto& [s, epoch] : kept) {
    BOOST_TEST((a.leads(s) ? a.leaseEpoch(s) : b.leaseEpoch(s)) == epoch, "source " << s << " moved");
  }
  BOOST_TEST(spread.database.scalar(epochs) == 6u + 4u + 2u);  // c's two, once each

  // b stops cleanly: it gives its leases up and stands for nothing any more.
  b.stop();
  a.step();
  BOOST_TEST(a.leads() == 6);
  BOOST_TEST(spread.database.scalar("SELECT COUNT(*) FROM outbox_bridge_candidate WHERE holder_id = 'instance-b'") == 0u);
}

// Instances that see different sources: the lightest candidate of each source leads it, and an
// instance that alone stands for a source leads it however many others it leads.
BOOST_AUTO_TEST_CASE(a_source_only_one_instance_stands_for_stays_with_it) {
  Spread spread;
  Config firstThree = spread.config;
  firstThree.sources.resize(3);
  Instance a(spread.config, "instance-a", spread.clock), b(firstThree, "instance-b", spread.clock);
  for (int round = 0; round < 40 && b.leads() < 3; ++round) {  // b settles after 3 s
    a.step();
    b.step();
    std::this_thread::sleep_for(200ms);
  }
  BOOST_TEST(b.leads() == 3);  // a leads 4, 5, 6 which b cannot: b is lighter for 1, 2, 3
  BOOST_TEST(a.leads() == 3);
  for (size_t s = 3; s < 6; ++s) BOOST_TEST(a.leads(s));
}

// An upgrade that has not run migrate yet (no candidate table), or an account without the grant
// on it: the lease works as before, unbalanced, with a warning — no source goes unled.
BOOST_AUTO_TEST_CASE(without_the_candidate_table_or_its_grant_the_lease_works_unbalanced) {
  Spread spread;
  const std::string user = "nocand_" + spread.database.name().substr(spread.database.name().size() - 8);
  const std::string password = "nocand-" + spread.database.name();
  registerSecret(password);
  auto& sql = spread.database.sql();
  BOOST_REQUIRE(sql.exec(fmt::format("CREATE USER '{}'@'127.0.0.1' IDENTIFIED BY '{}'", user, password)).isOk());
  BOOST_REQUIRE(sql.exec(fmt::format("GRANT SELECT, INSERT, UPDATE, DELETE ON `{}`.`outbox_bridge_lease` TO '{}'@'127.0.0.1'",
                                     spread.database.name(), user))
                    .isOk());
  std::vector<SourceSpec> limited = spread.specs;
  for (auto& s : limited) {
    s.extra["dsn"] = fmt::format("\"mysql://{}@127.0.0.1:{}/{}\"", user, stack().mysqlPort, spread.database.name());
    s.extra["password"] = "\"" + password + "\"";
  }
  Config noGrant = loadConfig(writeConfig(limited), processEnvironment());
  {
    Instance a(noGrant, "instance-nogrant", spread.clock);
    a.step();
    BOOST_TEST(a.leads() == 6);
    a.step();  // a steady leader's renewal, which also renews the candidacy it cannot write
    BOOST_TEST(a.leads() == 6);
    a.stop();
  }
  BOOST_REQUIRE(sql.exec(fmt::format("DROP USER '{}'@'127.0.0.1'", user)).isOk());

  BOOST_REQUIRE(sql.exec("DROP TABLE outbox_bridge_candidate").isOk());
  Instance b(spread.config, "instance-notable", spread.clock);
  b.step();
  BOOST_TEST(b.leads() == 6);
  b.step();
  BOOST_TEST(b.leads() == 6);
}

// Issue 20: a steady leader (nobody lighter) renews its lease and its candidacy in one UPDATE of
// both rows. It renews exactly the lease it holds: one whose candidacy lapsed meanwhile stands
// afresh (stood_since restarts), and one taken meanwhile (a frozen leader) is not renewed.
BOOST_AUTO_TEST_CASE(a_steady_leader_renews_its_lease_and_candidacy_together_and_only_its_own_lease) {
  Spread spread;
  Instance a(spread.config, "instance-a", spread.clock);
  a.step();
  BOOST_REQUIRE(a.leads() == 6);
  auto& sql = spread.database.sql();
  const std::string source = spread.config.sources[0].name;
  auto micros = [&](const std::string& table, const std::string& column) {
    return spread.database.scalar(fmt::format("SELECT CAST(UNIX_TIMESTAMP({}) * 1000000 AS UNSIGNED) FROM {} WHERE "
                                              "source = '{}'",
                                              column, table, source));
  };
  const uint64_t stood = micros("outbox_bridge_candidate", "stood_since");
  const uint64_t lease0 = micros("outbox_bridge_lease", "expires_at"), cand0 = micros("outbox_bridge_candidate", "renewed_at");
  std::this_thread::sleep_for(50ms);
  BOOST_TEST(a.jointRenewals(0) == 0u);  // the first round trip took the lease
  a.step();
  BOOST_TEST(a.leads() == 6);
  BOOST_TEST(a.jointRenewals(0) == 1u);  // one statement renewed both rows
  BOOST_TEST(micros("outbox_bridge_lease", "expires_at") > lease0);
  BOOST_TEST(micros("outbox_bridge_candidate", "renewed_at") > cand0);
  BOOST_TEST(micros("outbox_bridge_candidate", "stood_since") == stood);
  BOOST_TEST(spread.database.scalar("SELECT SUM(lease_epoch) FROM outbox_bridge_lease") == 6u);

  // The candidacy lapsed (as after a long pause): the renewal stands afresh.
  BOOST_REQUIRE(sql.exec(fmt::format("UPDATE outbox_bridge_candidate SET expires_at = NOW(6) - INTERVAL 1 SECOND, "
                                     "renewed_at = NOW(6) - INTERVAL 4 SECOND WHERE source = '{}'",
                                     source))
                    .isOk());
  std::this_thread::sleep_for(50ms);
  a.step();
  BOOST_TEST(a.leads(0));
  BOOST_TEST(a.jointRenewals(0) == 1u);  // the lease alone, then the candidacy afresh
  BOOST_TEST(micros("outbox_bridge_candidate", "stood_since") > stood);
  BOOST_TEST(spread.database.scalar(fmt::format("SELECT COUNT(*) FROM outbox_bridge_candidate WHERE source = '{}' AND "
                                                "expires_at > NOW(6)",
                                                source)) == 1u);

  // Taken by another instance meanwhile: not renewed, not led.
  BOOST_REQUIRE(sql.exec(fmt::format("UPDATE outbox_bridge_lease SET holder_id = 'instance-z', lease_epoch = "
                                     "lease_epoch + 1, expires_at = NOW(6) + INTERVAL 3 SECOND WHERE source = '{}'",
                                     source))
                    .isOk());
  a.step();
  BOOST_TEST(!a.leads(0));
  BOOST_TEST(spread.database.scalar(fmt::format("SELECT COUNT(*) FROM outbox_bridge_lease WHERE source = '{}' AND "
                                                "holder_id = 'instance-z' AND lease_epoch = 2",
                                                source)) == 1u);
  for (size_t s = 1; s < 6; ++s) BOOST_TEST(a.leads(s));
}

// A candidate that stopped renewing (its process died a moment ago; its row not yet expired) is
// handed nothing: a hand-over to it would leave the source unled until the row expired.
BOOST_AUTO_TEST_CASE(a_candidate_silent_for_two_heartbeats_is_handed_nothing) {
  // TTL 6 s: a candidate is settled after standing 6 s and taken for dead 3 s after its last renewal.
  Spread spread;
  Instance a(spread.config, "instance-a", spread.clock, 6s);
  a.step();
  Instance b(spread.config, "instance-b", spread.clock, 6s);
  const auto stood = std::chrono::steady_clock::now();
  // b stands until just after it is settled, then goes silent (SIGKILL); a renews only while b is
  // not settled yet (until 5 s: a second's room for a stall between the check and a's statements),
  // and next when b has been silent for 3.2 s (its candidacy runs to 6 s, a's leases to 11 s).
  while (std::chrono::steady_clock::now() - stood < 6200ms) {
    b.step();
    if (std::chrono::steady_clock::now() - stood < 5000ms) a.step();
    std::this_thread::sleep_for(200ms);
  }
  BOOST_REQUIRE(a.leads() == 6);
  const uint64_t epochs = spread.database.scalar("SELECT SUM(lease_epoch) FROM outbox_bridge_lease");
  std::this_thread::sleep_for(3200ms);
  a.step();
  // b, leading none, would be the one to hand a source to — were it alive.
  BOOST_TEST(a.leads() == 6);
  BOOST_TEST(spread.database.scalar("SELECT SUM(lease_epoch) FROM outbox_bridge_lease") == epochs);
}

// An instance that cannot publish stands down: leading, it hands every source over at once (to a
// candidate that can); standing again it is handed sources only after a TTL.
BOOST_AUTO_TEST_CASE(an_instance_that_cannot_publish_hands_everything_over_and_stands_again_later) {
  Spread spread;
  Instance a(spread.config, "instance-a", spread.clock), b(spread.config, "instance-b", spread.clock);
  b.step();  // b first: it takes all six
  a.step();
  BOOST_TEST(b.leads() == 6);
  b.canPublish = false;
  b.step();
  BOOST_TEST(b.leads() == 0);
  a.step();
  BOOST_TEST(a.leads() == 6);
  BOOST_TEST(spread.database.scalar("SELECT COUNT(*) FROM outbox_bridge_candidate WHERE holder_id = 'instance-b'") == 0u);
  b.canPublish = true;
  b.step();
  a.step();
  BOOST_TEST(a.leads() == 6);  // b stands again, but not for a TTL yet
  for (int i = 0; i < 24 && b.leads() < 3; ++i) {
    std::this_thread::sleep_for(250ms);
    b.step();
    a.step();
  }
  BOOST_TEST(b.leads() == 3);
  BOOST_TEST(a.leads() == 3);
}

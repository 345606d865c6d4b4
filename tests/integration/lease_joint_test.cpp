#define BOOST_TEST_MODULE lease_joint
#include <boost/test/unit_test.hpp>

#include <memory>
#include <thread>

#include <fmt/format.h>

#include "harness.h"
#include "lease/joint_renewal.h"
#include "lease/lease.h"
#include "lease/mysql_lease_store.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

// Six sources of one database, migrated.
struct Spread {
  TestDatabase database{"joint"};
  std::vector<SourceSpec> specs;
  Config config;
  SteadyClock clock;
  Spread() {
    for (int i = 0; i < 6; ++i) specs.push_back(SourceSpec{uniqueName(fmt::format("j{}_", i), database), &database, {}});
    std::string path = writeConfig(specs);
    migrate(path);
    config = loadConfig(path, processEnvironment());
  }
};

}  // namespace

// Issue 33: the steady leaders' heartbeats of a database in one round (lease/joint_renewal.h) —
// two statements for all the sources, not two each — and only for what the round can vouch for:
// a source with a lighter candidate, or whose lease another took, gets the full round trip and
// its answer.
BOOST_AUTO_TEST_CASE(the_steady_leaders_of_a_database_renew_in_one_round_and_only_what_it_vouches_for) {
  Spread spread;
  const LeaseConfig leaseConfig{3s, 1s};
  db::ConnectionPool pool(MysqlLeaseStore::connectParams(spread.config.sources[0]), 3,
                          MysqlLeaseStore::connectionSetup(1s));
  JointRenewal joint(pool, spread.config.sources[0].dsn.database, MysqlLeaseStore::freshFor(leaseConfig), 200ms);
  std::vector<std::unique_ptr<MysqlLeaseStore>> stores;
  std::vector<std::unique_ptr<LeaderLease>> leases;
  for (const auto& source : spread.config.sources) {
    stores.push_back(std::make_unique<MysqlLeaseStore>(source, pool, leaseConfig, &joint));
    leases.push_back(std::make_unique<LeaderLease>(*stores.back(), "instance-j", 3s, 1s, spread.clock));
  }
  // Every lease at once, as the relay threads do at an aligned heartbeat.
  auto beatTogether = [&] {
    std::vector<std::thread> threads;
    for (auto& lease : leases) threads.emplace_back([&lease] { (void)lease->refreshNow(); });
    for (auto& t : threads) t.join();
  };
  beatTogether();  // the first takes the leases (full round trips: nothing held yet)
  for (auto& lease : leases) BOOST_REQUIRE(lease->isLeader());
  BOOST_TEST(joint.rounds() == 0u);
  auto expiries = [&] { return spread.database.scalar("SELECT SUM(UNIX_TIMESTAMP(expires_at) * 1000) FROM outbox_bridge_lease"); };
  const uint64_t before = expiries();
  std::this_thread::sleep_for(50ms);
  beatTogether();
  for (size_t i = 0; i < leases.size(); ++i) {
    BOOST_TEST(leases[i]->isLeader(), i);
    BOOST_TEST(stores[i]->jointRenewals() == 1u, i);
  }
  BOOST_TEST(joint.rounds() == 1u, "six heartbeats gathered in one round");
  BOOST_TEST(joint.renewed() == leases.size());
  BOOST_TEST(expiries() > before);

  // Source 0 gets a settled, lighter candidate; source 1's lease is taken by another instance. The
  // round vouches for neither: source 0's own round trip names the lighter one, source 1's says
  // it is no longer ours; the rest are still renewed.
  auto& sql = spread.database.sql();
  const std::string s0 = spread.config.sources[0].name, s1 = spread.config.sources[1].name;
  BOOST_REQUIRE(sql.exec(fmt::format("INSERT INTO outbox_bridge_candidate (source, holder_id, stood_since, renewed_at, "
                                     "expires_at) VALUES ('{}', 'instance-light', NOW(6) - INTERVAL 1 HOUR, NOW(6), "
                                     "NOW(6) + INTERVAL 1 HOUR)",
                                     s0))
                    .isOk());
  BOOST_REQUIRE(sql.exec(fmt::format("UPDATE outbox_bridge_lease SET holder_id = 'instance-z', lease_epoch = "
                                     "lease_epoch + 1, expires_at = NOW(6) + INTERVAL 3 SECOND WHERE source = '{}'",
                                     s1))
                    .isOk());
  beatTogether();
  BOOST_TEST(joint.rounds() == 2u);
  BOOST_TEST(joint.renewed() == leases.size() + 4, "the round still vouched for the four it could");
  BOOST_TEST(!leases[0]->lighter().empty(), "source 0's own round trip named the lighter candidate");
  BOOST_TEST(!leases[1]->isLeader(), "source 1 was taken: not renewed, not led");
  BOOST_TEST(leases[1]->currentHolder() == "instance-z");
  for (size_t i = 2; i < leases.size(); ++i) BOOST_TEST(leases[i]->isLeader(), i);
  BOOST_TEST(spread.database.scalar(fmt::format("SELECT COUNT(*) FROM outbox_bridge_lease WHERE source = '{}' AND "
                                                "holder_id = 'instance-z'",
                                                s1)) == 1u);
  for (auto& lease : leases) lease->release();
}

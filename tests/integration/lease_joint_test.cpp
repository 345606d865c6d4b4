#define BOOST_TEST_MODULE lease_joint
#include <boost/test/unit_test.hpp>

#include <memory>
#include <thread>

#include <fmt/format.h>

#include "harness.h"
#include "lease/joint_renewal.h"
#include "lease/lease.h"
#include "lease/mysql_lease_store.h"
#include "relay/joint_marks.h"
#include "relay/mysql_store.h"

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
  // A gather of a second: six threads started together all come within it on a loaded machine too.
  JointRenewal joint(pool, spread.config.sources[0].dsn.database, MysqlLeaseStore::freshFor(leaseConfig), 1s);
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

// Issue 33 (cost per row): the published marks of a database's sources in one statement
// (relay/joint_marks.h), each under its own source's write guard (the lease at its epoch, the
// source's epoch), each moved forward only; a source whose mark another source's write took, or
// that a batch carried, writes nothing.
BOOST_AUTO_TEST_CASE(the_marks_of_a_database_are_written_in_one_statement_each_under_its_guard) {
  Spread spread;
  const LeaseConfig leaseConfig{30s, 10s};
  const std::string database = spread.config.sources[0].dsn.database;
  db::ConnectionPool leasePool(MysqlLeaseStore::connectParams(spread.config.sources[0]), 2,
                               MysqlLeaseStore::connectionSetup(10s));
  db::ConnectionPool pool(db::paramsFrom(spread.config.sources[0].dsn), 3, MysqlOutboxStore::connectionSetup(10s));
  JointMarks marks(pool, database);
  std::vector<std::unique_ptr<MysqlLeaseStore>> leaseStores;
  std::vector<std::unique_ptr<LeaderLease>> leases;
  std::vector<std::unique_ptr<MysqlOutboxStore>> stores;
  for (const auto& source : spread.config.sources) {
    leaseStores.push_back(std::make_unique<MysqlLeaseStore>(source, leasePool, leaseConfig));
    leases.push_back(std::make_unique<LeaderLease>(*leaseStores.back(), "instance-m", 30s, 10s, spread.clock));
    BOOST_REQUIRE(leases.back()->refreshNow().isOk());
    BOOST_REQUIRE(leases.back()->isLeader());
    stores.push_back(std::make_unique<MysqlOutboxStore>(source, pool, MysqlOutboxStore::ServerCheck::kNone, &marks));
    BOOST_REQUIRE(stores.back()->connect().isOk());
    stores.back()->setWriteGuard(WriteGuard{LeaseGuard{"instance-m", leases.back()->leaseEpoch()}, 1});
  }
  auto published = [&](size_t i) {
    const auto state = stores[i]->loadState();
    BOOST_REQUIRE(state.isOk());
    return std::pair{state->publishedThrough, state->publishedStreamSeq};
  };
  using Marked = std::pair<uint64_t, uint64_t>;
  // Five sources' acks wait. Offers younger than kRipe are their own sources' (a busy source's
  // ride carries them): source 0's mark goes alone.
  const auto offered = std::chrono::steady_clock::now();
  for (size_t i = 1; i < 5; ++i) stores[i]->offerMark(PublishedMark{(i + 1) * 10, (i + 1) * 10 + 100});
  BOOST_REQUIRE(stores[0]->markPublished(10, 110).isOk());
  BOOST_TEST(marks.statements() == 1u);
  BOOST_TEST((published(0) == Marked{10, 110}));
  if (std::chrono::steady_clock::now() - offered < JointMarks::kRipe) {
    BOOST_TEST(marks.marks() == 1u);
    BOOST_TEST((published(1) == Marked{0, 0}));
  } else {  // this process stalled past kRipe: the offers were ripe, and rightly written with it
    BOOST_TEST_MESSAGE("the offers waited past kRipe before source 0's mark: not checked alone");
  }
  // Once they have waited, the next source due writes them all.
  std::this_thread::sleep_for(JointMarks::kRipe + 20ms);
  BOOST_REQUIRE(stores[0]->markPublished(11, 111).isOk());
  BOOST_TEST(marks.statements() == 2u);
  BOOST_TEST(marks.marks() == 6u);
  BOOST_TEST((published(0) == Marked{11, 111}));
  for (size_t i = 1; i < 5; ++i) BOOST_TEST((published(i) == Marked{(i + 1) * 10, (i + 1) * 10 + 100}), i);
  BOOST_TEST((published(5) == Marked{0, 0}));
  BOOST_REQUIRE(stores[1]->markPublished(20, 120).isOk());  // written with source 0's
  BOOST_TEST(marks.statements() == 2u);

  // Source 5's lease is taken by another instance, source 4 has moved to a new epoch (a bump)
  // since its guard was set, source 3 offers less than a write racing with it (a batch's ride)
  // put there: none of them moves; source 2 does.
  auto& sql = spread.database.sql();
  BOOST_REQUIRE(sql.exec(fmt::format("UPDATE outbox_bridge_lease SET holder_id = 'instance-z', lease_epoch = lease_epoch "
                                     "+ 1 WHERE source = '{}'",
                                     spread.config.sources[5].name))
                    .isOk());
  BOOST_REQUIRE(sql.exec(fmt::format("UPDATE outbox_source_state SET epoch = 2 WHERE source = '{}'",
                                     spread.config.sources[4].name))
                    .isOk());
  stores[5]->offerMark(PublishedMark{60, 160});
  stores[4]->offerMark(PublishedMark{70, 170});
  BOOST_REQUIRE(sql.exec(fmt::format("UPDATE outbox_source_state SET published_through = 45, published_stream_seq = 145 "
                                     "WHERE source = '{}'",
                                     spread.config.sources[3].name))
                    .isOk());
  stores[3]->offerMark(PublishedMark{42, 142});
  std::this_thread::sleep_for(JointMarks::kRipe + 20ms);
  BOOST_REQUIRE(stores[2]->markPublished(35, 135).isOk());
  BOOST_TEST(marks.statements() == 3u);
  BOOST_TEST((published(2) == Marked{35, 135}));
  BOOST_TEST((published(3) == Marked{45, 145}), "moved back");
  BOOST_TEST((published(4) == Marked{50, 150}), "written under an epoch the source has left");
  BOOST_TEST((published(5) == Marked{0, 0}), "written under a lease another instance holds");

  // A batch that carries source 0's acks (the scan's record here, an assign alike) withdraws its offer.
  stores[0]->offerMark(PublishedMark{12, 112});
  ScanMark scan;
  scan.published = PublishedMark{12, 112};
  BOOST_REQUIRE(stores[0]->saveScan(scan).isOk());
  BOOST_TEST((published(0) == Marked{12, 112}));
  BOOST_REQUIRE(stores[0]->markPublished(12, 112).isOk());
  BOOST_TEST(marks.statements() == 3u, "nothing left to write");
  for (auto& lease : leases) lease->release();
}

// The lease's clock is NOW(6) compared with TIMESTAMP columns: in a session zone with daylight
// saving time, NOW(6) repeats an hour when it ends, and `NOW(6) + INTERVAL ...` taken just before
// the change lands an hour late (a lease that stands an hour after its holder died). The
// connections that take, renew and check leases (the lease pool's, and the relay's, whose writes
// are guarded by the lease) keep their session in UTC, whatever the server's zone.
BOOST_AUTO_TEST_CASE(the_connections_that_hold_and_check_leases_keep_time_in_utc) {
  Spread spread;
  const auto& source = spread.config.sources[0];
  db::ConnectionPool leasePool(MysqlLeaseStore::connectParams(source), 1, MysqlLeaseStore::connectionSetup(1s));
  db::ConnectionPool relayPool(db::paramsFrom(source.dsn), 1, MysqlOutboxStore::connectionSetup(10s));
  for (db::ConnectionPool* pool : {&leasePool, &relayPool}) {
    auto conn = pool->borrow(source.dsn.database);
    BOOST_REQUIRE_MESSAGE(conn.isOk(), conn.status().toString());
    auto rows = (**conn).query("SELECT @@session.time_zone");
    BOOST_REQUIRE(rows.isOk());
    BOOST_REQUIRE(rows->next());
    BOOST_TEST(std::string(rows->text(0)) == "+00:00");
  }
}

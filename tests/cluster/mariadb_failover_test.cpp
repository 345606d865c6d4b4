#define BOOST_TEST_MODULE cluster_mariadb_failover
#include <boost/test/unit_test.hpp>

#include <set>
#include <thread>

#include <fmt/format.h>

#include "harness.h"
#include "workload.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

unsigned replicaPort() {
  if (stack().mysqlReplicaPort == 0) throw std::runtime_error("OUTBOX_TEST_MYSQL_REPLICA_PORT is not set (tools/stack env)");
  return stack().mysqlReplicaPort;
}

// Runs `sql` on the replica as its administrator (the OS user's socket account tools/stack made):
// the stack's outbox account there lacks READ_ONLY ADMIN.
void asReplicaAdmin(const std::string& sql) {
  auto r = runCommand(fmt::format("mariadb --no-defaults --protocol=socket --socket='{}/mariadb-replica/mysqld.sock' "
                                  "-u\"$(id -un)\" -e \"{}\"",
                                  stack().stackDir, sql));
  if (r.exitCode != 0) throw std::runtime_error(fmt::format("replica admin '{}': {}", sql, r.err));
}

// The named column of a one-row result (SHOW MASTER STATUS, SHOW SLAVE STATUS); "" when absent.
std::string field(db::Connection& conn, const std::string& query, const std::string& column) {
  auto rows = conn.query(query);
  if (!rows.isOk() || !rows->next()) return "";
  for (size_t i = 0; i < rows->columnCount(); ++i) {
    if (rows->columns()[i].name == column) return std::string(rows->optText(i).value_or(""));
  }
  return "";
}

// A primary with a fresh replica; the bridge and the producers reach MariaDB through a proxy that
// stands for the primary's address (a virtual IP, a DNS name), so a failover moves them by
// pointing the proxy at the promoted replica.
class Failover {
 public:
  explicit Failover(const std::string& tag)
      : replica_((stackCommand("reset", "mariadb-replica"), true)),  // before the database: it replicates
        database(tag),
        proxy(static_cast<int>(stack().mysqlPort)) {
    source = SourceSpec{uniqueName(tag, database), &database,
                        {{"dsn", fmt::format("\"mysql://{}@127.0.0.1:{}/{}\"", stack().mysqlUser, proxy.port(),
                                             database.name())},
                         {"batch_size", "200"}}};
    config = writeConfig({source});
    migrate(config);
    bridge = std::make_unique<BridgeProcess>(config);
    bridge->start();
    startProducers();
    BOOST_REQUIRE_MESSAGE(advances(500, 30s), bridge->log());
  }
  ~Failover() {
    producers.reset();
    if (bridge->running()) bridge->kill();
    try {
      stackCommand("start", "mariadb");
      (void)connectAt(stack().mysqlPort)->exec(fmt::format("DROP DATABASE IF EXISTS `{}`", database.name()));
      stackCommand("stop", "mariadb-replica");
    } catch (const std::exception& e) {
      BOOST_TEST_MESSAGE("cleanup: " << e.what());
    }
  }

  void startProducers() {
    producers = std::make_unique<Producers>(
        [this] { return connectAt(static_cast<unsigned>(proxy.port()), database.name()); },
        std::vector<std::string>{source.outboxTable()});
  }
  bool advances(uint64_t more, std::chrono::milliseconds timeout) {
    return publishingAdvances(database, source.name, more, timeout);
  }
  // The primary goes away (SIGTERM or SIGKILL), the replica is promoted, the proxy points at it.
  void failOver(bool kill) {
    stackCommand(kill ? "kill" : "stop", "mariadb");
    stackCommand("promote", "mariadb-replica");
    proxy.retarget(static_cast<int>(replicaPort()));
    database.moveTo(replicaPort());
  }

 private:
  bool replica_;

 public:
  TestDatabase database;
  TcpProxy proxy;
  SourceSpec source;
  std::string config;
  std::unique_ptr<BridgeProcess> bridge;
  std::unique_ptr<Producers> producers;
};

}  // namespace

// Issue 11: the replica had every transaction when it was promoted; the bridge, reconnecting
// through the same address, goes on in the same epoch: one stream, dense, once, nothing lost.
BOOST_AUTO_TEST_CASE(a_failover_to_a_replica_that_has_everything_goes_on_in_the_same_epoch) {
  Failover f("focont");
  // A planned failover: writes stop, the bridge has published them all, the replica catches up,
  // then it is promoted.
  f.producers.reset();
  BOOST_REQUIRE(waitUntil([&] { return f.database.allPublished(f.source.name, f.source.outboxTable()); }, 30s));
  auto position = connectAt(stack().mysqlPort)->query("SELECT @@gtid_binlog_pos");
  BOOST_REQUIRE(position.isOk() && position->next());
  auto caughtUp = connectAt(replicaPort())->queryU64(
      fmt::format("SELECT MASTER_GTID_WAIT('{}', 30)", std::string(position->text(0))));
  BOOST_REQUIRE(caughtUp.isOk() && caughtUp->value_or(1) == 0);
  f.failOver(false);
  f.startProducers();
  BOOST_TEST(f.advances(1000, 60s), f.bridge->log());
  f.producers.reset();
  StreamReader reader;
  auto messages = requireStreamMatchesTable(f.database, f.source, reader, 90s, [&] { return f.bridge->log(); });
  BOOST_TEST(headerU64(messages.front(), "Outbox-Version") == 1u);
  BOOST_TEST(f.database.state(f.source.name).epoch == 1u);
  BOOST_TEST(f.bridge->stop() == 0);
}

// The replica lagged (its applier stopped) when the primary died: the stream holds versions the
// promoted replica never saw. The bridge halts with the reason and publishes nothing; `epoch
// bump` recovers; no version is ever used twice.
BOOST_AUTO_TEST_CASE(a_failover_to_a_lagging_replica_halts_until_an_epoch_bump_and_reuses_no_version) {
  Failover f("folag");
  BOOST_REQUIRE(connectAt(replicaPort())->exec("STOP SLAVE SQL_THREAD").isOk());
  BOOST_REQUIRE_MESSAGE(f.advances(2000, 60s), f.bridge->log());
  f.failOver(true);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] {
    try {
      return !f.database.state(f.source.name).haltedReason.empty();
    } catch (const std::exception&) {
      return false;
    }
  }, 60s), f.bridge->log());
  const std::string reason = f.database.state(f.source.name).haltedReason;
  BOOST_TEST(reason.find("ahead of the database") != std::string::npos, reason);
  BOOST_TEST(reason.find("epoch bump") != std::string::npos, reason);

  auto bump = runBridge({"epoch", "bump", "--config", f.config, "--source", f.source.name, "--reason", "failover"});
  BOOST_REQUIRE_MESSAGE(bump.exitCode == 0, bump.err);
  BOOST_TEST(bump.out.find("epoch 2") != std::string::npos, bump.out);
  BOOST_TEST(f.advances(500, 60s), f.bridge->log());  // the producers wrote on through the failover
  f.producers.reset();
  StreamReader reader;
  auto epoch2 = requireStreamMatchesTable(f.database, f.source, reader, 90s, [&] { return f.bridge->log(); });
  BOOST_TEST(headerU64(epoch2.front(), "Outbox-Epoch") == 2u);
  // Across both epochs: every version once, rising with the sequence; the new epoch starts above
  // everything the old one published.
  auto all = reader.readAll(f.source.stream(), "control." + f.source.name);
  uint64_t last = 0, lastEpoch = 0, epoch1Top = 0;
  for (const auto& m : all) {
    const uint64_t v = headerU64(m, "Outbox-Version"), e = headerU64(m, "Outbox-Epoch");
    BOOST_REQUIRE_MESSAGE(v > last, fmt::format("version {} at seq {} after {}", v, m.seq, last));
    BOOST_REQUIRE(e >= lastEpoch);
    if (e == 1) epoch1Top = v;
    last = v;
    lastEpoch = e;
  }
  BOOST_TEST(headerU64(epoch2.front(), "Outbox-Version") > epoch1Top);
  BOOST_TEST(f.bridge->stop() == 0);
}

// Issue 19: the replica was promoted (made writable) while its applier still had a transaction
// in its relay log — one that was open on the primary when the bridge read past its id, and
// committed just before the primary died. The bridge on the promoted replica must keep that id
// open until the applier has applied it: then publish it, once, with the next version.
BOOST_AUTO_TEST_CASE(a_row_the_promoted_replica_applies_after_the_bridge_started_there_is_published) {
  Failover f("foapply");
  f.producers.reset();
  const std::string table = f.source.outboxTable();
  auto insert = [&](const std::string& key) {
    return fmt::format("INSERT INTO `{}` (entity_type, entity_key, op, payload) VALUES ('item', '{}', 'upsert', "
                       "'{{\"n\":1}}')",
                       table, key);
  };
  // On the primary: T1 takes an id and stays open; T2 takes the next one and commits.
  auto t1 = connectAt(stack().mysqlPort, f.database.name());
  BOOST_REQUIRE(t1->begin().isOk());
  BOOST_REQUIRE(t1->exec(insert("t1")).isOk());
  BOOST_REQUIRE(connectAt(stack().mysqlPort, f.database.name())->exec(insert("t2")).isOk());
  BOOST_REQUIRE_MESSAGE(waitUntil([&] {
    return f.database.allPublished(f.source.name, table) &&
           f.database.scalar(fmt::format("SELECT COUNT(*) FROM `{}` WHERE entity_key = 't2'", table)) == 1;
  }, 30s), f.bridge->log());
  BOOST_REQUIRE(f.bridge->stop() == 0);
  // The replica applies everything so far (T2, the bridge's own writes), then its applier stops.
  auto primary = connectAt(stack().mysqlPort);
  auto replica = connectAt(replicaPort());
  const std::string position = field(*primary, "SELECT @@gtid_binlog_pos AS p", "p");
  auto caughtUp = replica->queryU64(fmt::format("SELECT MASTER_GTID_WAIT('{}', 30)", position));
  BOOST_REQUIRE(caughtUp.isOk() && caughtUp->value_or(1) == 0);
  BOOST_REQUIRE(replica->exec("STOP SLAVE SQL_THREAD").isOk());
  // T1 commits on the primary; the replica receives it into its relay log, and does not apply it.
  BOOST_REQUIRE(t1->commit().isOk());
  const std::string file = field(*primary, "SHOW MASTER STATUS", "File");
  const std::string pos = field(*primary, "SHOW MASTER STATUS", "Position");
  BOOST_REQUIRE_MESSAGE(waitUntil([&] {
    return field(*replica, "SHOW SLAVE STATUS", "Master_Log_File") == file &&
           field(*replica, "SHOW SLAVE STATUS", "Read_Master_Log_Pos") == pos;
  }, 30s), "the replica's IO thread did not receive T1");
  t1.reset();
  primary.reset();
  // The failover: the primary goes away, the replica is made writable as it is (its relay log,
  // and its replication settings, kept), the address follows it, the bridge starts there.
  stackCommand("stop", "mariadb");
  asReplicaAdmin("SET GLOBAL read_only = 0");
  f.proxy.retarget(static_cast<int>(replicaPort()));
  f.database.moveTo(replicaPort());
  BOOST_REQUIRE(f.database.unversioned(table) == 0);  // T1 is not there yet
  f.bridge->start();
  // A row written on the promoted replica is published: the bridge polls there, and has probed
  // T1's id. Then a few more seconds of polls, in which a hole the applier holds could die.
  BOOST_REQUIRE(connectAt(replicaPort(), f.database.name())->exec(insert("r1")).isOk());
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return f.database.allPublished(f.source.name, table); }, 30s),
                        f.bridge->log());
  std::this_thread::sleep_for(3s);  // nothing to wait for: the bridge must do nothing wrong meanwhile
  // The applier resumes and commits T1: its row must reach the stream, once.
  BOOST_REQUIRE(replica->exec("START SLAVE SQL_THREAD").isOk());
  BOOST_REQUIRE(waitUntil([&] {
    return f.database.scalar(fmt::format("SELECT COUNT(*) FROM `{}` WHERE entity_key = 't1'", table)) == 1;
  }, 30s));
  StreamReader reader;
  auto messages = requireStreamMatchesTable(f.database, f.source, reader, 30s, [&] { return f.bridge->log(); });
  BOOST_TEST(headerU64(messages.front(), "Outbox-Version") == 1u);
  BOOST_TEST(messages.back().headers.at("Outbox-Entity-Key") == "t1");  // the last version: T1, late
  BOOST_TEST(f.database.state(f.source.name).epoch == 1u);
  BOOST_TEST(f.bridge->stop() == 0);
}

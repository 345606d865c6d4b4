#define BOOST_TEST_MODULE session
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "db/session.h"
#include "harness.h"

// db::Session against the real MariaDB: a call the server rolls back to settle a conflict
// (MariaDB 11.6+'s snapshot-isolation error 1020, a deadlock) runs again at once on the same
// connection, at most kRolledBackTries times; other failures are not retried. The server raises
// the errors itself (SIGNAL with their numbers), so the tries are counted exactly.

using namespace outbox;
using namespace outbox::test;

namespace {

// A statement the server answers with error `code`.
std::string raise(unsigned code) {
  return fmt::format("SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = {}, MESSAGE_TEXT = 'raised by the test'", code);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_call_the_server_rolled_back_runs_again) {
  TestDatabase database("session");
  db::Session session(stackParams(database.name()));
  for (unsigned code : {1020u, 1213u}) {
    int tries = 0;
    Status s = session.run([&](db::Connection& conn) { return conn.exec(++tries == 1 ? raise(code) : "DO 1"); });
    BOOST_TEST(s.isOk(), code << ": " << s.toString());
    BOOST_TEST(tries == 2, code);
    tries = 0;
    s = session.transaction([&](db::Connection& conn) { return conn.exec(++tries < 3 ? raise(code) : "DO 1"); });
    BOOST_TEST(s.isOk(), code << ": " << s.toString());
    BOOST_TEST(tries == 3, code);
  }
  // Rolled back every time: the caller sees it after the last try, as transient.
  int tries = 0;
  Status s = session.transaction([&](db::Connection& conn) {
    ++tries;
    return conn.exec(raise(1020));
  });
  BOOST_TEST(s.isTransient());
  BOOST_TEST((s.cause() == Cause::kRolledBack));
  BOOST_TEST(tries == db::Session::kRolledBackTries);
  // Anything else is not run again.
  tries = 0;
  s = session.run([&](db::Connection& conn) {
    ++tries;
    return conn.exec(raise(1205));  // a lock wait timed out: the row is held, asking at once will not help
  });
  BOOST_TEST(s.isTransient());
  BOOST_TEST(tries == 1);
  tries = 0;
  s = session.run([&](db::Connection& conn) {
    ++tries;
    return conn.exec("SELECT * FROM no_such_table");
  });
  BOOST_TEST(s.isPermanent());
  BOOST_TEST(tries == 1);
}

// A transaction whose function throws (a bug, which the relay turns into a halt) is rolled back:
// its writes are not committed by the next transaction's begin() on the same connection.
BOOST_AUTO_TEST_CASE(a_transaction_whose_function_throws_is_rolled_back) {
  TestDatabase database("session_throw");
  BOOST_REQUIRE(database.sql().exec("CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB").isOk());
  db::Session session(stackParams(database.name()));
  BOOST_CHECK_THROW((void)session.transaction([](db::Connection& conn) -> Status {
    OUTBOX_RETURN_IF_ERROR(conn.exec("INSERT INTO t VALUES (1)"));
    throw std::logic_error("no column 'x' in the result");
  }),
                    std::logic_error);
  Status s = session.transaction([](db::Connection& conn) { return conn.exec("INSERT INTO t VALUES (2)"); });
  BOOST_TEST(s.isOk(), s.toString());
  BOOST_TEST(database.scalar("SELECT COUNT(*) FROM t") == 1u);
  BOOST_TEST(database.scalar("SELECT COUNT(*) FROM t WHERE id = 1") == 0u);
}

// db::ConnectionPool (docs/design.md, "Connections"): sessions over a pool of two share two
// connections however many they are; a third borrower waits until one comes back; a connection
// given back inside a transaction, or after a failed call, is never lent again with what it held;
// a borrow on another database moves the connection there; a session asks for the connection it
// had last.
BOOST_AUTO_TEST_CASE(sessions_over_a_pool_share_its_connections_and_never_inherit_each_others_state) {
  TestDatabase first("pool_a"), second("pool_b");
  int setups = 0;
  db::ConnectionPool pool(stackParams(first.name()), 2, [&](db::Connection& conn) {
    ++setups;
    return conn.exec("SET SESSION innodb_lock_wait_timeout = 7");
  });
  std::vector<std::unique_ptr<db::Session>> sessions;
  int prepares = 0;
  for (int i = 0; i < 10; ++i) {
    sessions.push_back(std::make_unique<db::Session>(pool, i % 2 == 0 ? first.name() : second.name(),
                                                     [&](db::Connection&) {
                                                       ++prepares;
                                                       return Status::ok();
                                                     }));
  }
  auto connectionId = [](db::Session& s) {
    return s.run([](db::Connection& c) { return c.queryU64("SELECT CONNECTION_ID()"); }).value().value_or(0);
  };
  auto databaseOf = [](db::Session& s) {
    return s.run([](db::Connection& c) -> Result<std::string> {
      auto rows = c.query("SELECT DATABASE(), @@session.innodb_lock_wait_timeout");
      if (!rows.isOk()) return rows.status();
      rows->next();
      return std::string(rows->text(0)) + "/" + std::string(rows->text(1));
    });
  };
  std::set<uint64_t> ids;
  for (auto& s : sessions) ids.insert(connectionId(*s));
  BOOST_TEST(ids.size() == 1u, "one at a time: the same connection each time");
  BOOST_TEST(prepares == 10);
  for (size_t i = 0; i < sessions.size(); ++i) {
    BOOST_TEST(databaseOf(*sessions[i]).value() == (i % 2 == 0 ? first.name() : second.name()) + "/7");
  }
  // Three at once over a pool of two: the third waits until a Hold ends.
  {
    db::Session::Hold a(*sessions[0]), b(*sessions[1]);
    const uint64_t idA = connectionId(*sessions[0]), idB = connectionId(*sessions[1]);
    BOOST_TEST(idA != idB);
    BOOST_TEST(pool.openConnections() == 2u);
    std::atomic<bool> done{false};
    std::thread third([&] {
      (void)connectionId(*sessions[2]);
      done = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    BOOST_TEST(!done.load(), "a third borrower waits while both are lent");
    BOOST_TEST(pool.waits() >= 1u);
    {
      db::Session::Hold release(*sessions[3]);  // nothing: a Hold borrows only when a call runs
    }
    sessions[1]->drop();  // the second Hold's connection closes: its place frees
    third.join();
    BOOST_TEST(done.load());
  }
  BOOST_TEST(setups >= 2);
  // A transaction left open is rolled back before the connection is lent again: the next borrower
  // neither sees the row nor holds its lock.
  BOOST_REQUIRE(first.sql().exec("CREATE TABLE pooled (id INT PRIMARY KEY)").isOk());
  {
    auto loan = pool.borrow(first.name());
    BOOST_REQUIRE(loan.isOk());
    BOOST_REQUIRE((*loan)->exec("START TRANSACTION").isOk());
    BOOST_REQUIRE((*loan)->exec("INSERT INTO pooled VALUES (1)").isOk());
    BOOST_TEST((*loan)->inTransaction());
  }
  for (int i = 0; i < 2; ++i) {
    auto loan = pool.borrow(first.name());
    BOOST_REQUIRE(loan.isOk());
    BOOST_TEST(!(*loan)->inTransaction());
    BOOST_TEST((*loan)->queryU64("SELECT COUNT(*) FROM pooled").value().value_or(9) == 0u);
  }
  BOOST_TEST(first.scalar("SELECT COUNT(*) FROM pooled") == 0u);
  // A failed call closes its connection rather than lend it again.
  const uint64_t before = connectionId(*sessions[0]);
  Status failed = sessions[0]->run([](db::Connection& c) { return c.exec("SELECT * FROM no_such_table"); });
  BOOST_TEST(!failed.isOk());
  BOOST_TEST(waitUntil(
      [&] {
        return first.scalar(fmt::format("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = {}", before)) ==
               0u;
      },
      std::chrono::seconds(5)));
  BOOST_TEST(connectionId(*sessions[0]) != before);
  BOOST_TEST(pool.openConnections() <= 2u);
}

// A batch refused for a new scan (Cause::kScanAgain, the relay's assign) is rolled back and keeps
// its connection, on a pool's session as on one of its own: the next transaction runs on the same
// one, prepared once, the refused write undone. Another transient failure of a transaction still
// drops the connection.
BOOST_AUTO_TEST_CASE(a_batch_refused_for_a_new_scan_keeps_its_connection_rolled_back) {
  TestDatabase database("scan_again");
  BOOST_REQUIRE(database.sql().exec("CREATE TABLE refused (id INT PRIMARY KEY)").isOk());
  db::ConnectionPool pool(stackParams(database.name()), 2);
  int prepares = 0;
  db::Session pooled(pool, database.name(), [&](db::Connection&) {
    ++prepares;
    return Status::ok();
  });
  db::Session own(stackParams(database.name()));
  for (db::Session* session : {&pooled, &own}) {
    // The connection a transaction runs on (a pool's session lends another for statements).
    auto connectionId = [&] {
      uint64_t id = 0;
      Status s = session->transaction([&](db::Connection& c) -> Status {
        auto read = c.queryU64("SELECT CONNECTION_ID()");
        if (!read.isOk()) return read.status();
        id = read->value_or(0);
        return Status::ok();
      });
      BOOST_TEST(s.isOk(), s.toString());
      return id;
    };
    const uint64_t before = connectionId();
    auto refuse = [&](int id, Cause cause) {
      return session->transaction(
          [&](db::Connection& c) {
            auto wrote = c.execCounts(fmt::format("START TRANSACTION; INSERT INTO refused VALUES ({})", id));
            BOOST_TEST(wrote.status.isOk(), wrote.status.toString());
            return Status::transient("refused by the test").because(cause);
          },
          db::Session::Begin::kByFn);
    };
    BOOST_TEST((refuse(1, Cause::kScanAgain).cause() == Cause::kScanAgain));
    BOOST_TEST(connectionId() == before);
    BOOST_TEST(session->run([](db::Connection& c) -> Status {
                        return c.inTransaction() ? Status::permanent("in a transaction") : Status::ok();
                      }).isOk());
    BOOST_TEST(database.scalar("SELECT COUNT(*) FROM refused") == 0u);
    BOOST_TEST(!refuse(2, Cause::kNone).isOk());
    BOOST_TEST(connectionId() != before);
    BOOST_TEST(database.scalar("SELECT COUNT(*) FROM refused") == 0u);
  }
  BOOST_TEST(prepares == 2);  // the first call, and the call after the other failure dropped it
}

// db::Rows read by column name: a SELECT's alias or a column's own name (without its table's
// alias), ASCII case ignored as SQL ignores it; NULL reads as nullopt; a name the result lacks,
// or holds twice, is a caller's bug and throws rather than read another column; has() asks first,
// for a SHOW whose columns the server decides.
BOOST_AUTO_TEST_CASE(rows_are_read_by_column_name) {
  TestDatabase database("rows_by_name");
  db::Connection& conn = database.sql();
  BOOST_REQUIRE(conn.exec("CREATE TABLE named (id BIGINT UNSIGNED PRIMARY KEY, entity_key VARCHAR(20), payload TEXT)")
                    .isOk());
  BOOST_REQUIRE(conn.exec("INSERT INTO named VALUES (7, 'k7', NULL), (8, 'k8', 'body')").isOk());
  auto rows = conn.query(
      "SELECT n.payload, n.entity_key, n.id, n.id * 2 AS Doubled, n.payload IS NULL AS no_payload, -3 AS negative "
      "FROM named n ORDER BY n.id");
  BOOST_REQUIRE(rows.isOk());
  BOOST_TEST(rows->index("payload") == 0u);
  BOOST_TEST(rows->index("id") == 2u);
  BOOST_TEST(rows->index("doubled") == 3u);
  BOOST_TEST(rows->index("ENTITY_KEY") == 1u);
  BOOST_CHECK_THROW((void)rows->index("n.id"), std::logic_error);
  BOOST_CHECK_THROW((void)rows->index("missing"), std::logic_error);
  BOOST_TEST(rows->has("DOUBLED"));
  BOOST_TEST(!rows->has("missing"));
  BOOST_REQUIRE(rows->next());
  BOOST_TEST(rows->u64("id") == 7u);
  BOOST_TEST(rows->u64("Doubled") == 14u);
  BOOST_TEST(rows->text("entity_key") == "k7");
  BOOST_TEST(rows->isNull("payload"));
  BOOST_TEST(!rows->optText("payload").has_value());
  BOOST_TEST(!rows->optU64("payload").has_value());
  BOOST_TEST(rows->u64("no_payload") == 1u);
  BOOST_TEST(rows->i64("negative") == -3);
  BOOST_REQUIRE(rows->next());
  BOOST_TEST(rows->optText("payload").value_or("") == "body");
  BOOST_TEST(rows->optU64("id").value_or(0) == 8u);
  BOOST_TEST(!rows->next());
  // Two columns of one name (a join's two ids): neither is guessed.
  auto twice = conn.query("SELECT a.id, b.id FROM named a JOIN named b ON b.id = a.id + 1");
  BOOST_REQUIRE(twice.isOk());
  BOOST_CHECK_THROW((void)twice->index("id"), std::logic_error);
}

// Connection::execCounts: statements sent as one run in order, each one's matched rows counted;
// the first that fails stops the rest, and the connection goes on (every result was read). In a
// transaction its function begins (Session::Begin::kByFn, the trickle's assign), a failure rolls
// back what the statements wrote, and success commits it.
BOOST_AUTO_TEST_CASE(statements_sent_as_one_count_each_and_stop_at_the_first_failure) {
  TestDatabase database("exec_counts");
  db::Connection& conn = database.sql();
  BOOST_REQUIRE(conn.exec("CREATE TABLE counted (id BIGINT UNSIGNED PRIMARY KEY)").isOk());
  auto counts = conn.execCounts(
      "INSERT INTO counted VALUES (1), (2); UPDATE counted SET id = id + 10 WHERE id = 1; DELETE FROM counted WHERE "
      "id = 99");
  BOOST_TEST(counts.status.isOk(), counts.status.toString());
  BOOST_TEST(counts.matched == (std::vector<uint64_t>{2, 1, 0}), boost::test_tools::per_element());
  counts = conn.execCounts("INSERT INTO counted VALUES (3); INSERT INTO counted VALUES (3); INSERT INTO counted "
                           "VALUES (4)");
  BOOST_TEST((counts.status.cause() == Cause::kDuplicateKey), counts.status.toString());
  BOOST_TEST(counts.matched == (std::vector<uint64_t>{1}), boost::test_tools::per_element());
  BOOST_TEST(conn.queryU64("SELECT COUNT(*) FROM counted WHERE id = 4").value().value_or(9) == 0u);
  BOOST_TEST(conn.queryU64("SELECT COUNT(*) FROM counted").value().value_or(0) == 3u);  // 2, 3 and 11

  // A failure the session keeps its connection after (permanent): the rollback, not a closed
  // connection, undoes row 5, which the next transaction on that connection would otherwise commit.
  db::Session session(stackParams(database.name()));
  Status s = session.transaction(
      [](db::Connection& c) {
        auto wrote = c.execCounts("START TRANSACTION; INSERT INTO counted VALUES (5)");
        BOOST_TEST(wrote.status.isOk(), wrote.status.toString());
        return Status::permanent("the claim was lost");
      },
      db::Session::Begin::kByFn);
  BOOST_TEST(s.isPermanent());
  s = session.transaction([](db::Connection& c) { return c.exec("INSERT INTO counted VALUES (7)"); });
  BOOST_TEST(s.isOk(), s.toString());
  BOOST_TEST(conn.queryU64("SELECT COUNT(*) FROM counted WHERE id = 7").value().value_or(0) == 1u);
  BOOST_TEST(conn.queryU64("SELECT COUNT(*) FROM counted WHERE id = 5").value().value_or(9) == 0u);
  // A function that was to begin and did not: its write stands (autocommit), and the session says so.
  s = session.transaction([](db::Connection& c) { return c.exec("INSERT INTO counted VALUES (8)"); },
                          db::Session::Begin::kByFn);
  BOOST_TEST(s.isPermanent(), s.toString());
  s = session.transaction(
      [](db::Connection& c) {
        auto wrote = c.execCounts("START TRANSACTION; INSERT INTO counted VALUES (6)");
        return wrote.status;
      },
      db::Session::Begin::kByFn);
  BOOST_TEST(s.isOk(), s.toString());
  BOOST_TEST(conn.queryU64("SELECT COUNT(*) FROM counted WHERE id = 6").value().value_or(0) == 1u);
}

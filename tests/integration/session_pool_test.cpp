// A pool's connections set for what they run (db::ConnectionPool::Use), against the real MariaDB:
// a transaction gets one with autocommit off and no START TRANSACTION is sent for it; a statement
// gets one with autocommit on, whichever way the connection was set before, so that it commits by
// itself and leaves no transaction open. Part of session (session_test.cpp).
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "db/session.h"
#include "harness.h"

using namespace outbox;
using namespace outbox::test;

namespace {

// What a call saw on its connection.
struct Seen {
  uint64_t connectionId = 0;
  uint64_t autocommit = 9;
  uint64_t begins = 0;  // START TRANSACTION (and BEGIN) statements the connection has run
};

Result<Seen> look(db::Connection& c) {
  auto rows = c.query(
      "SELECT CONNECTION_ID(), @@autocommit, (SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE "
      "VARIABLE_NAME = 'COM_BEGIN')");
  if (!rows.isOk()) return rows.status();
  if (!rows->next()) return Status::permanent("no row");
  return Seen{rows->u64(0), rows->u64(1), rows->u64(2)};
}

// A transaction that writes `id` and says what it saw, on `session`.
Seen write(db::Session& session, int id) {
  Seen seen;
  Status s = session.transaction([&](db::Connection& c) -> Status {
    OUTBOX_RETURN_IF_ERROR(c.exec(fmt::format("INSERT INTO written VALUES ({})", id)));
    auto looked = look(c);
    if (!looked.isOk()) return looked.status();
    seen = *looked;
    return Status::ok();
  });
  BOOST_TEST(s.isOk(), s.toString());
  return seen;
}

Seen statement(db::Session& session, int id) {
  auto seen = session.run([&](db::Connection& c) -> Result<Seen> {
    OUTBOX_RETURN_IF_ERROR(c.exec(fmt::format("INSERT INTO written VALUES ({})", id)));
    if (c.inTransaction()) return Status::permanent("a statement left a transaction open");
    return look(c);
  });
  BOOST_TEST(seen.isOk(), seen.status().toString());
  return seen.isOk() ? *seen : Seen{};
}

// The connection a statement of `session` runs on.
uint64_t statementConnection(db::Session& session) {
  auto id = session.run([](db::Connection& c) { return c.queryU64("SELECT CONNECTION_ID()"); });
  BOOST_TEST(id.isOk(), id.status().toString());
  return id.isOk() ? id->value_or(0) : 0;
}

// A pool whose connections the server closes after resting `limit` seconds, as the pool knows.
db::ConnectionPool resting(TestDatabase& database, size_t capacity, int limit) {
  return db::ConnectionPool(stackParams(database.name()), capacity, [limit](db::Connection& c) {
    c.setIdleLimit(std::chrono::seconds(limit));
    return c.exec(fmt::format("SET SESSION wait_timeout = {}", limit));
  });
}

}  // namespace

BOOST_AUTO_TEST_CASE(transactions_run_on_connections_without_autocommit_and_statements_on_ones_with_it) {
  TestDatabase database("pool_use");
  BOOST_REQUIRE(database.sql().exec("CREATE TABLE written (id INT PRIMARY KEY)").isOk());
  auto committed = [&](int id) {
    return database.scalar(fmt::format("SELECT COUNT(*) FROM written WHERE id = {}", id)) == 1u;
  };

  // Room for two: a connection for each use, each lent again for its own.
  db::ConnectionPool pool(stackParams(database.name()), 2);
  db::Session session(pool, database.name());
  const Seen first = write(session, 1), second = write(session, 2);
  BOOST_TEST(first.autocommit == 0u);
  BOOST_TEST(second.connectionId == first.connectionId);
  BOOST_TEST(second.begins == first.begins, "no START TRANSACTION sent for the second transaction");
  BOOST_TEST(committed(1));
  BOOST_TEST(committed(2));
  const Seen third = statement(session, 3);
  BOOST_TEST(third.autocommit == 1u);
  BOOST_TEST(third.connectionId != first.connectionId);
  BOOST_TEST(committed(3));
  BOOST_TEST(pool.openConnections() == 2u);
  BOOST_TEST(write(session, 4).connectionId == first.connectionId);

  // A transaction refused (and its connection kept: Cause::kScanAgain) is rolled back on such a
  // connection, and the next one on it commits only its own.
  Status failed = session.transaction([](db::Connection& c) -> Status {
    OUTBOX_RETURN_IF_ERROR(c.exec("INSERT INTO written VALUES (5)"));
    return Status::transient("refused by the test").because(Cause::kScanAgain);
  });
  BOOST_TEST((failed.cause() == Cause::kScanAgain));
  const Seen sixth = write(session, 6);
  BOOST_TEST(sixth.connectionId == first.connectionId);
  BOOST_TEST(sixth.autocommit == 0u);
  BOOST_TEST(!committed(5));
  BOOST_TEST(committed(6));

  // Room for one: the connection is set again for each use, and each behaves as its use asks.
  db::ConnectionPool one(stackParams(database.name()), 1);
  db::Session alone(one, database.name());
  const Seen a = statement(alone, 10), b = write(alone, 11), c = statement(alone, 12);
  BOOST_TEST(a.connectionId == b.connectionId);
  BOOST_TEST(b.connectionId == c.connectionId);
  BOOST_TEST(a.autocommit == 1u);
  BOOST_TEST(b.autocommit == 0u);
  BOOST_TEST(c.autocommit == 1u);
  for (int id : {10, 11, 12}) BOOST_TEST(committed(id), id);

  // Kept by a Hold from a transaction on: a statement after it still commits by itself.
  {
    db::Session::Hold hold(session);
    const Seen held = write(session, 20);
    const Seen after = statement(session, 21);
    BOOST_TEST(after.connectionId == held.connectionId);
    BOOST_TEST(after.autocommit == 1u);
    BOOST_TEST(committed(21), "committed while the Hold lasts");
  }
  BOOST_TEST(committed(20));
  BOOST_TEST(database.scalar("SELECT COUNT(*) FROM written") == 10u);  // 1-4, 6, 10-12, 20 and 21
}

// What a session prepares on its first call runs on the connection lent for that call: when it is a
// transaction's (autocommit off), the prepare's statements are committed before the transaction
// begins, not left holding their locks through it.
BOOST_AUTO_TEST_CASE(a_prepare_on_a_connection_lent_for_a_transaction_holds_no_lock_through_it) {
  TestDatabase database("pool_prepare");
  db::Connection& other = database.sql();
  BOOST_REQUIRE(other.exec("CREATE TABLE prepared (id INT PRIMARY KEY, n INT NOT NULL DEFAULT 0)").isOk());
  BOOST_REQUIRE(other.exec("CREATE TABLE written (id INT PRIMARY KEY)").isOk());
  BOOST_REQUIRE(other.exec("SET SESSION innodb_lock_wait_timeout = 1").isOk());
  db::ConnectionPool pool(stackParams(database.name()), 2);
  db::Session session(pool, database.name(),
                      [](db::Connection& c) { return c.exec("INSERT IGNORE INTO prepared (id) VALUES (1)"); });
  Status s = session.transaction([&](db::Connection& c) -> Status {
    // The prepare's row, written by another connection while this transaction is open.
    OUTBOX_RETURN_IF_ERROR(other.exec("UPDATE prepared SET n = n + 1 WHERE id = 1"));
    return c.exec("INSERT INTO written VALUES (1)");
  });
  BOOST_TEST(s.isOk(), s.toString());
  BOOST_TEST(database.scalar("SELECT n FROM prepared WHERE id = 1") == 1u);
  BOOST_TEST(database.scalar("SELECT COUNT(*) FROM written") == 1u);
}

// A connection whose server closes it after a rest (MySQL's wait_timeout, which the relay's
// connections set there: Connection::idleLimit) is not lent after resting about that long: the
// pool closes it and lends a new one, so that the call does not fail on a closed connection first.
BOOST_AUTO_TEST_CASE(a_connection_that_rested_as_long_as_its_server_allows_is_closed_not_lent) {
  TestDatabase database("pool_rest");
  db::ConnectionPool pool = resting(database, 2, 2);
  db::Session session(pool, database.name());
  // Whether a connection rested under `under`, timed around both calls (so at least the pool's
  // rest): a machine that stalls past three quarters of the limit rightly gets a new one.
  auto restedUnder = [](std::chrono::steady_clock::time_point since, std::chrono::milliseconds under) {
    const bool was = std::chrono::steady_clock::now() - since < under;
    if (!was) BOOST_TEST_MESSAGE("the rest outlasted " << under.count() << " ms (a stall): not checked");
    return was;
  };
  auto start = std::chrono::steady_clock::now();
  const uint64_t first = statementConnection(session);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  const uint64_t again = statementConnection(session);
  if (restedUnder(start, std::chrono::milliseconds(1450))) BOOST_TEST(again == first, "lent again after a short rest");
  // Three quarters of the limit: closed before the server would (the two clocks differ).
  std::this_thread::sleep_for(std::chrono::milliseconds(1700));
  const uint64_t second = statementConnection(session);
  BOOST_TEST(second != 0u);
  BOOST_TEST(second != first);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // the server has closed it
  const uint64_t third = statementConnection(session);
  BOOST_TEST(third != 0u);
  BOOST_TEST(third != second);
  BOOST_TEST(pool.openConnections() == 1u);

  // A limit of a second still lends a connection that rested less than three quarters of it.
  db::ConnectionPool brief = resting(database, 1, 1);
  db::Session quick(brief, database.name());
  start = std::chrono::steady_clock::now();
  const uint64_t once = statementConnection(quick);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const uint64_t twice = statementConnection(quick);
  if (restedUnder(start, std::chrono::milliseconds(700))) BOOST_TEST(twice == once);
}

// A statement run by the session inside its own transaction's call would share the transaction's
// connection (its failure would drop it under the transaction, a rollback retry only the inner
// call): refused as a bug, and the transaction goes on unharmed.
BOOST_AUTO_TEST_CASE(a_statement_inside_the_sessions_own_transaction_is_refused) {
  TestDatabase database("pool_nested");
  BOOST_REQUIRE(database.sql().exec("CREATE TABLE written (id INT PRIMARY KEY)").isOk());
  db::ConnectionPool pool(stackParams(database.name()), 2);
  db::Session session(pool, database.name());
  Status inner;
  Status s = session.transaction([&](db::Connection& c) -> Status {
    inner = session.run([](db::Connection& other) { return other.exec("INSERT INTO written VALUES (2)"); });
    return c.exec("INSERT INTO written VALUES (1)");
  });
  BOOST_TEST(s.isOk(), s.toString());
  BOOST_TEST((inner.code() == StatusCode::kFatal), inner.toString());
  BOOST_TEST(database.scalar("SELECT COUNT(*) FROM written WHERE id = 1") == 1u);
  BOOST_TEST(database.scalar("SELECT COUNT(*) FROM written WHERE id = 2") == 0u);
}

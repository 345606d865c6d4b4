// Statements the binary log carries as text (STATEMENT, and MIXED, MariaDB's default), as the
// review of issue 33 found them: an UPDATE whose trigger inserts outbox rows (STATEMENT names only
// the UPDATE's table), temporary tables that asked a look for nothing, ANSI_QUOTES names read as
// unreadable; and what the log does not tie to a source's rows (LOAD DATA, DDL, XA elsewhere)
// costs a quiet source one look at most. Real MariaDB and nats-server.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <thread>

#include <fmt/format.h>

#include "db/binlog.h"
#include "harness.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_CASE(the_binlog_reader_reads_triggers_temporary_tables_and_ansi_quotes_on_statement_and_mixed) {
  TestDatabase one("wake_st1");
  TestDatabase two("wake_st2");
  for (auto* d : {&one, &two}) {
    BOOST_REQUIRE(d->sql().exec("CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)").isOk());
  }
  auto& a = one.sql();
  BOOST_REQUIRE(a.exec("CREATE TABLE orders (id BIGINT PRIMARY KEY, state INT)").isOk());
  BOOST_REQUIRE(a.exec("INSERT INTO orders VALUES (1, 0)").isOk());
  // The application's trigger writes the outbox row (a table with an auto-increment id).
  BOOST_REQUIRE(a.exec("CREATE TRIGGER orders_outbox AFTER UPDATE ON orders FOR EACH ROW "
                       "INSERT INTO t (v) VALUES (NEW.state)")
                    .isOk());
  auto reader = db::BinlogReader::open(stackParams(), 1'600'000'000u + static_cast<uint32_t>(getpid()), 500ms);
  BOOST_REQUIRE_MESSAGE(reader.isOk(), reader.status().message());
  auto next = [&] { return nextCommit(**reader); };  // heartbeats skipped, within 10 s

  // STATEMENT: the UPDATE's text names orders; the INSERT_ID the log sets before it says that
  // something it ran took an auto-increment value: every source looks (it rang none before).
  BOOST_REQUIRE(a.exec("SET SESSION binlog_format = 'STATEMENT'").isOk());
  BOOST_REQUIRE(a.exec("UPDATE orders SET state = 1 WHERE id = 1").isOk());
  auto c = next();
  BOOST_TEST(c.unknown);
  BOOST_TEST(c.tables.empty());

  // MIXED: creating and dropping a session's temporary table asks nothing (it asked the database
  // to look); rows into it name it (no source's table), then the INSERT into t.
  BOOST_REQUIRE(a.exec("SET SESSION binlog_format = 'MIXED'").isOk());
  BOOST_REQUIRE(a.exec("CREATE TEMPORARY TABLE scratch (id INT)").isOk());
  BOOST_REQUIRE(a.exec("INSERT INTO scratch VALUES (1)").isOk());
  BOOST_REQUIRE(a.exec("DROP TEMPORARY TABLE scratch").isOk());
  BOOST_REQUIRE(a.exec("INSERT INTO t (v) VALUES (2)").isOk());
  c = next();
  BOOST_TEST(!c.unknown);
  BOOST_TEST(c.databases.empty());
  BOOST_TEST((c.tables == std::vector<std::string>{one.name() + ".scratch"}));
  c = next();
  BOOST_TEST(!c.unknown);
  BOOST_TEST(c.databases.empty());
  BOOST_TEST((c.tables == std::vector<std::string>{one.name() + ".t"}));

  // ANSI_QUOTES: a name in double quotes, in another database than the session's.
  BOOST_REQUIRE(a.exec("SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')").isOk());
  BOOST_REQUIRE(a.exec(fmt::format("INSERT INTO \"{}\".\"t\" (v) VALUES (3)", two.name())).isOk());
  c = next();
  BOOST_TEST(!c.unknown);
  BOOST_TEST((c.tables == std::vector<std::string>{two.name() + ".t"}));
  // SET STATEMENT ... FOR, as the server logs it.
  BOOST_REQUIRE(a.exec(fmt::format("SET STATEMENT max_statement_time = 60 FOR INSERT INTO {}.t (v) VALUES (4)",
                                   two.name()))
                    .isOk());
  c = next();
  BOOST_TEST(!c.unknown);
  BOOST_TEST((c.tables == std::vector<std::string>{two.name() + ".t"}));
  BOOST_REQUIRE(a.exec("SET SESSION binlog_format = 'ROW'").isOk());
}

// Issue 33's test list: a LOAD DATA, a DDL and an XA transaction elsewhere cost a quiet source one
// look each at most, and it is quiet again after.
BOOST_AUTO_TEST_CASE(a_load_data_a_ddl_and_an_xa_transaction_elsewhere_cost_one_look_each) {
  TestDatabase database("wake_look");
  SourceSpec source{uniqueName("wl", database), &database, {{"poll_interval", "\"10s\""}}};
  const std::string config = writeConfig({source});
  migrate(config);
  auto& sql = database.sql();
  BOOST_REQUIRE(sql.exec("CREATE TABLE other (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)").isOk());
  const std::string file = fmt::format("{}/load-{}.txt", tempDir(), database.name());
  ::unlink(file.c_str());
  BOOST_REQUIRE(sql.exec(fmt::format("SELECT seq FROM seq_1_to_100 INTO OUTFILE '{}'", file)).isOk());
  BridgeProcess bridge(config);
  bridge.start();
  const int port = bridge.httpPort();
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return sourceMetric(port, "outbox_doorbell_up", source.name) == 1; }, 30s),
                        bridge.log());
  std::this_thread::sleep_for(2s);  // past the session's first polls
  auto scans = [&] { return sourceMetric(port, "outbox_scans_total", source.name); };
  auto producer = database.connect();
  const std::pair<const char*, std::vector<std::string>> events[] = {
      {"LOAD DATA", {fmt::format("LOAD DATA INFILE '{}' INTO TABLE other (v)", file)}},
      {"DDL", {"CREATE TABLE made_later (id INT PRIMARY KEY)"}},
      {"XA", {"XA START 'wl'", "INSERT INTO other (v) VALUES (1)", "XA END 'wl'", "XA PREPARE 'wl'",
              "XA COMMIT 'wl'"}},
  };
  for (const char* format : {"ROW", "MIXED"}) {
    BOOST_REQUIRE(producer->exec(fmt::format("SET SESSION binlog_format = '{}'", format)).isOk());
    for (const auto& [what, statements] : events) {
      BOOST_TEST_CONTEXT(what << " on " << format) {
        // Quiet first: a late look the event before (or the DROP below) earned has come by now.
        BOOST_REQUIRE(waitUntil([&] {
          const double was = scans();
          std::this_thread::sleep_for(1s);
          return scans() == was;
        }, 20s));
        // One look at most over 3.5 s, whenever it came (a look late on a loaded machine is one
        // look still): a source still scanning after it would have scanned again.
        const double before = scans();
        for (const auto& s : statements) BOOST_REQUIRE_MESSAGE(producer->exec(s).isOk(), s);
        std::this_thread::sleep_for(3500ms);
        BOOST_TEST(scans() <= before + 1, "more than one look, or still scanning after it");
      }
    }
    BOOST_REQUIRE(producer->exec("DROP TABLE made_later").isOk());
  }
  ::unlink(file.c_str());
}

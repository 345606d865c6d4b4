// The conformance suite's streams and checks: what a consumer with its replica in MySQL (--inbox)
// must bootstrap again for (docs/consumers.md section 3, "The stream itself", and section 4) — a
// purge behind it while it was stopped, an epoch bump, the stream deleted and recreated, the
// stream emptied by max_age while the source was quiet, a row changed behind the producer rule's
// back — and its connections over TLS with client certificates.
#include "conformance.h"

#include <atomic>
#include <thread>

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;
namespace data = boost::unit_test::data;

// (Not in an anonymous namespace: the data test cases are templates whose lambdas capture it.)
// A source of 20 accounts with its bridge, and a consumer of it verified at version 20.
struct Following {
  AccountsSource src;
  InboxDatabase inbox;
  BridgeProcess bridge;
  int port;
  ConsumerRun run;
  std::unique_ptr<db::Connection> conn;

  Following(const std::string& consumer, const std::string& purpose, const std::map<std::string, std::string>& keys = {})
      : src(purpose, "", keys),
        bridge(src.config),
        port(src.seedAndStart(bridge, 20)),
        run(consumer, src, port, inbox.dsn()),
        conn(src.database.connect()) {
    run.start();
    BOOST_REQUIRE_MESSAGE(run.saysWithin("] verified at version 20:", 30s), run.allText());
  }
  void changes(int count, const std::string& what) {
    for (int i = 1; i <= count; ++i) src.change(*conn, i, fmt::format("{} {}", what, i));
    src.change(*conn, 20, std::nullopt, true);
    src.change(*conn, 100 + count, what);
  }
};

// Stopped at version 20; six changes published, then the stream purged. Restarted, it resumes
// from its inbox row, finds the stream begins past what it needs next, and bootstraps.
BOOST_DATA_TEST_CASE(a_purge_behind_a_stopped_consumer, data::make(consumerNames()), consumer) {
  Following f(consumer, "cfpurge");
  BOOST_REQUIRE(f.run.stop() == 0);
  f.changes(4, "Missed");
  uint64_t final = requireAllPublished(f.src, f.bridge);
  StreamReader reader;
  BOOST_REQUIRE(reader.js().purgeStream(f.src.spec.stream()).isOk());
  f.run.start();
  BOOST_REQUIRE_MESSAGE(f.run.saysWithin("] resumed from the inbox: epoch 1, version 20, 20 records", 30s), f.run.allText());
  requireConverged(f.run, f.src, final);
  BOOST_TEST(f.run.allText().find("purged or expired: re-bootstrapping") != std::string::npos, f.run.allText());
  BOOST_TEST(f.bridge.stop() == 0);
}

// `outbox-bridge epoch bump` under a running consumer, then changes in the new epoch.
BOOST_DATA_TEST_CASE(an_epoch_bump, data::make(consumerNames()), consumer) {
  Following f(consumer, "cfepoch");
  auto bumped = runBridge({"epoch", "bump", "--config", f.src.config, "--source", f.src.spec.name, "--reason", "test"});
  BOOST_REQUIRE_MESSAGE(bumped.exitCode == 0, bumped.err);
  f.changes(3, "Epoch 2");
  uint64_t final = requireAllPublished(f.src, f.bridge);
  BOOST_REQUIRE_MESSAGE(f.run.saysWithin("re-bootstrapped in a new epoch: epoch 2", 30s), f.run.allText());
  requireConverged(f.run, f.src, final);
  BOOST_TEST(f.bridge.stop() == 0);
}

// The stream deleted under a running consumer; the bridge's next publish recreates it from
// sequence 1, shorter than the sequence the consumer followed (after an epoch bump the recreated
// stream holds the new epoch's versions alone).
BOOST_DATA_TEST_CASE(the_stream_deleted_and_recreated, data::make(consumerNames()), consumer) {
  Following f(consumer, "cfdelete");
  auto bumped = runBridge({"epoch", "bump", "--config", f.src.config, "--source", f.src.spec.name, "--reason", "test"});
  BOOST_REQUIRE_MESSAGE(bumped.exitCode == 0, bumped.err);
  f.changes(3, "Epoch 2");
  uint64_t before = requireAllPublished(f.src, f.bridge);
  BOOST_REQUIRE_MESSAGE(f.run.saysWithin(fmt::format("] verified at version {}:", before), 30s), f.run.allText());
  StreamReader reader;
  const std::string stream = f.src.spec.stream();
  uint64_t followed = reader.state(stream).lastSeq;
  BOOST_REQUIRE(reader.js().deleteStream(stream).isOk());
  f.changes(2, "Recreated");
  uint64_t final = requireAllPublished(f.src, f.bridge);
  BOOST_REQUIRE_MESSAGE(reader.state(stream).lastSeq < followed, "the recreated stream is not shorter: this would not "
                                                                  "test the recreation");
  requireConverged(f.run, f.src, final);
  const std::string all = f.run.allText();
  BOOST_TEST(all.find("re-bootstrapped", all.find("re-bootstrapped in a new epoch: epoch 2") + 1) != std::string::npos,
             all);
  BOOST_TEST(f.bridge.stop() == 0);
}

// max_age 2s: the consumer stopped at 20, six changes published and expired while the source is
// quiet (no later message will show a gap). Restarted, it resumes from its inbox row and
// bootstraps, not waits.
BOOST_DATA_TEST_CASE(the_stream_emptied_by_max_age_while_the_source_is_quiet, data::make(consumerNames()), consumer) {
  Following f(consumer, "cfmaxage", {{"max_age", "\"2s\""}, {"duplicate_window", "\"1s\""}});
  BOOST_REQUIRE(f.run.stop() == 0);
  f.changes(4, "Expired");
  uint64_t final = requireAllPublished(f.src, f.bridge);
  StreamReader reader;
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return reader.state(f.src.spec.stream()).messages == 0; }, 10s),
                        "the stream is not empty");
  f.run.start();
  requireConverged(f.run, f.src, final, 30s);
  BOOST_TEST(f.run.allText().find("purged or expired: re-bootstrapping") != std::string::npos, f.run.allText());
  BOOST_TEST(f.bridge.stop() == 0);
}

// An account changed with no outbox row (the producer rule broken): no message tells the
// consumer, its checksum verification does, at the same version three times, and it bootstraps.
BOOST_DATA_TEST_CASE(a_row_changed_behind_the_producer_rule_is_found_by_verify, data::make(consumerNames()),
                     consumer) {
  Following f(consumer, "cfbehind");
  BOOST_REQUIRE(f.src.database.sql().exec("UPDATE accounts SET display_name = 'Changed behind' WHERE id = 7").isOk());
  BOOST_REQUIRE_MESSAGE(f.run.saysWithin("] checksum differs at version 20", 30s), f.run.allText());
  BOOST_REQUIRE_MESSAGE(f.run.saysWithin("] re-bootstrapped: epoch 1, watermark 20, 20 records", 30s), f.run.allText());
  requireConverged(f.run, f.src, 20);
  BOOST_TEST(readFile(f.run.dumpPath()).find("{\"id\":7,\"displayName\":\"Changed behind\"}") != std::string::npos);
  BOOST_TEST(f.bridge.stop() == 0);
}

// --inbox's DSN is a source's, read by the bridge's rules; a password in it (it would show in
// `ps`) or a bad one exits 2 naming --inbox, before anything connects, and never echoes it.
BOOST_DATA_TEST_CASE(inbox_dsn_refused_before_anything_connects, data::make(consumerNames()), consumer) {
  AccountsSource src("cfdsn");
  const std::string secret = "dsn-pw-4e1b";
  registerSecret(secret);
  for (const std::string& dsn :
       {fmt::format("mysql://u:{}@127.0.0.1:3306/db", secret), std::string("mysql://u@127.0.0.1/db?ssl-mode=SOMETIMES"),
        std::string("mysql://u@127.0.0.1/db?ssl-ca=/nonexistent/ca.pem&ssl-mode=PREFERRED"),
        std::string("postgres://u@127.0.0.1/db"), std::string("mysql://u@::1/db"),
        std::string("mysql://u@127.0.0.1/db?socket=/run/mysqld/mysqld.sock"),
        std::string("mysql://u@127.0.0.1/db?ssl-mode=REQUIRED&ssl-cert=/tmp/c.pem"), std::string("mysql://@127.0.0.1/db"),
        std::string("mysql://u@127.0.0.1/db-name"), std::string("mysql://u@127.0.0.1:99999/db")}) {
    BOOST_TEST_CONTEXT(dsn) {
      ConsumerRun run(consumer, src, 1, dsn);
      run.start();
      BOOST_REQUIRE(waitUntil([&] { return !run.running(); }, 20s));
      BOOST_TEST(run.stop().value_or(-1) == 2, run.allText());
      BOOST_TEST(run.text().find("--inbox") != std::string::npos, run.text());
      BOOST_TEST(run.text().find(secret) == std::string::npos, run.text());
    }
  }
}

// One inbox handed from each consumer to the next, and back to the first (their tables are the
// same): each resumes from the row and records the one before left, follows the changes made
// meanwhile and while it runs, and ends equal to the table.
BOOST_AUTO_TEST_CASE(one_inbox_handed_from_each_consumer_to_the_next) {
  AccountsSource src("cfhand");
  InboxDatabase inbox;
  BridgeProcess bridge(src.config);
  int port = src.seedAndStart(bridge, 20);
  auto conn = src.database.connect();
  int round = 0;
  std::vector<std::string> names = consumerNames();
  names.push_back(names.front());
  for (const auto& name : names) {
    BOOST_TEST_CONTEXT(name) {
      ConsumerRun run(name, src, port, inbox.dsn());
      run.start();
      if (round > 0) {
        BOOST_REQUIRE_MESSAGE(run.saysWithin("] resumed from the inbox: epoch 1,", 30s), run.allText());
      }
      for (uint64_t i = 1; i <= 4; ++i) src.change(*conn, i + round, fmt::format("{} {}", name, i));
      src.change(*conn, 10 + round, std::nullopt, true);
      requireConverged(run, src, requireAllPublished(src, bridge));
      src.change(*conn, 30 + round, "Written between two consumers");
      ++round;
    }
  }
  BOOST_TEST(bridge.stop() == 0);
}

// Every consumer of one source at once, each with its inbox: at the last version their --dumps are
// the same bytes (records in the byte order of their keys, strings escaped alike: quotes,
// backslashes, control characters, UTF-8, NULL), not only the same records.
BOOST_AUTO_TEST_CASE(the_dumps_of_every_consumer_of_one_source_are_identical) {
  AccountsSource src("cfsame");
  BridgeProcess bridge(src.config);
  int port = src.seedAndStart(bridge, 20);
  auto conn = src.database.connect();
  std::vector<std::unique_ptr<InboxDatabase>> inboxes;
  std::vector<std::unique_ptr<ConsumerRun>> runs;
  for (const auto& name : consumerNames()) {
    inboxes.push_back(std::make_unique<InboxDatabase>());
    runs.push_back(std::make_unique<ConsumerRun>(name, src, port, inboxes.back()->dsn()));
    runs.back()->start();
  }
  const std::vector<std::optional<std::string>> names = {
      "quote \" backslash \\ slash / tab \t", "control \x01\x1f del \x7f", "Zürich ☃ 東京 😀", "", std::nullopt,
      "<html> & 'single'", "line\nbreak\r\n"};
  for (size_t i = 0; i < names.size(); ++i) src.change(*conn, 3 + i, names[i]);
  src.change(*conn, 1000, "After a key of four digits");
  src.change(*conn, 5, std::nullopt, true);
  uint64_t final = requireAllPublished(src, bridge);
  for (auto& run : runs) requireConverged(*run, src, final);
  const std::string first = readFile(runs.front()->dumpPath());
  for (size_t i = 1; i < runs.size(); ++i) {
    BOOST_TEST(readFile(runs[i]->dumpPath()) == first, consumerNames()[i] << "'s dump differs from "
                                                                           << consumerNames().front() << "'s");
  }
  BOOST_TEST(bridge.stop() == 0);
}

// The MariaDB that holds the inbox (the stack's: the source's too) restarted under a consumer
// following a producer that writes 20 changes a second through it: a change whose COMMIT got no
// answer is read back from the row, never guessed, and the consumer ends equal to the table.
BOOST_DATA_TEST_CASE(the_inbox_database_restarted_under_a_running_consumer, data::make(consumerNames()), consumer) {
  Following f(consumer, "cfdbrestart");
  std::atomic<bool> stop{false};
  std::atomic<int> written{0};
  std::thread writer([&] {
    std::unique_ptr<db::Connection> conn;
    for (int i = 0; !stop; ++i) {
      try {
        if (!conn) conn = f.src.database.connect();
        f.src.change(*conn, 1 + i % 30, fmt::format("Through the restart {}", i));
        ++written;
      } catch (const std::exception&) {
        conn.reset();  // the server is down: again on a new connection
      }
      std::this_thread::sleep_for(50ms);
    }
  });
  struct Joined {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~Joined() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
  } joined{stop, writer};
  std::this_thread::sleep_for(1s);
  stackCommand("restart", stack().mysqlService);
  std::this_thread::sleep_for(1s);
  stop = true;
  writer.join();
  uint64_t final = requireAllPublished(f.src, f.bridge);
  requireConverged(f.run, f.src, final);
  BOOST_TEST_MESSAGE(fmt::format("{}: {} changes through a restart of the inbox's MariaDB, at version {}", consumer,
                                 written.load(), final));
  BOOST_TEST(f.bridge.stop() == 0);
}

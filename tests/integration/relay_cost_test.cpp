#define BOOST_TEST_MODULE relay_cost
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness.h"

// The cost per row's measures that a test can see (docs/design.md, "Cost per row"): the read of
// new rows leaves out its join of the versions above the highest outbox id with a version, and a
// row that has a version all the same is scanned again, not published twice and not halted on;
// it leaves out the quarantine's join above the highest quarantined id, and a row quarantined
// ahead of the scan all the same is passed over, poison or not; a trickle's assign goes as one
// multi-statement, or one at a time where the database refuses that.

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {

// The server's general log in mysql.general_log while it lives: the statements a bridge sent.
struct GeneralLog {
  TestDatabase& database;
  explicit GeneralLog(TestDatabase& db) : database(db) {
    BOOST_REQUIRE(database.sql().exec("SET GLOBAL log_output = 'TABLE'").isOk());
    BOOST_REQUIRE(database.sql().exec("TRUNCATE mysql.general_log").isOk());
    BOOST_REQUIRE(database.sql().exec("SET GLOBAL general_log = 1").isOk());
  }
  ~GeneralLog() {
    (void)database.sql().exec("SET GLOBAL general_log = 0");
    (void)database.sql().exec("SET GLOBAL log_output = 'FILE'");
    (void)database.sql().exec("TRUNCATE mysql.general_log");
  }
  // The statements logged so far that contain every one of `parts`.
  std::vector<std::string> statements(const std::vector<std::string>& parts) {
    std::string where = "command_type = 'Query' AND thread_id <> CONNECTION_ID()";
    for (const auto& p : parts) where += fmt::format(" AND INSTR(argument, '{}') > 0", p);
    auto rows = database.sql().query(fmt::format("SELECT CONVERT(argument USING utf8mb4) FROM mysql.general_log "
                                                 "WHERE {} ORDER BY event_time",
                                                 where));
    BOOST_REQUIRE(rows.isOk());
    std::vector<std::string> out;
    while (rows->next()) out.emplace_back(rows->text(0));
    return out;
  }
};

void insertRow(TestDatabase& database, const SourceSpec& source, int key) {
  BOOST_REQUIRE(database.sql()
                    .exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('account', '{}', "
                                      "'upsert', '{{\"id\": {}}}')",
                                      source.outboxTable(), key, key))
                    .isOk());
}

// A migrated source with rows keyed 1..`rows`, and a bridge that has published them.
struct PublishedSource {
  TestDatabase database;
  SourceSpec source;
  std::string config;
  BridgeProcess bridge;
  PublishedSource(const std::string& purpose, int rows)
      : database(purpose),
        source{uniqueName(purpose, database), &database, {}},
        config(writeConfig({source})),
        bridge((migrate(config), config)) {
    for (int i = 1; i <= rows; ++i) insertRow(database, source, i);
    bridge.start();
    BOOST_REQUIRE_MESSAGE(
        waitUntil([&] { return database.state(source.name).publishedThrough == uint64_t(rows); }, 20s), bridge.log());
  }
};

}  // namespace

// A trickle of one-row commits: every read of new rows is the lean one (no versions join, no
// quarantine join), the rows are published once in order all the same.
BOOST_AUTO_TEST_CASE(a_trickle_is_read_without_the_versions_join) {
  PublishedSource f("lean", 1);
  auto& [database, source, config, bridge] = f;
  GeneralLog log(database);
  const int kRows = 20;
  for (int i = 1; i <= kRows; ++i) {
    insertRow(database, source, i + 1);
    BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == uint64_t(i + 1); }, 20s),
                          bridge.log());
  }
  // readNew's statement: "... WHERE o.id > CURSOR ... LIMIT N" on the outbox table.
  const std::string table = "`" + source.outboxTable() + "` o";
  auto reads = log.statements({table, "o.id > ", " LIMIT "});
  auto whole = log.statements({table, "o.id > ", " LIMIT ", source.outboxTable() + "_versions"});
  BOOST_TEST(reads.size() >= size_t(kRows), reads.size() << " reads of new rows for " << kRows << " rows");
  BOOST_TEST(whole.empty(), (whole.empty() ? "" : whole.front()));
  auto quarantineJoined = log.statements({table, "o.id > ", " LIMIT ", "outbox_quarantine"});
  BOOST_TEST(quarantineJoined.empty(), (quarantineJoined.empty() ? "" : quarantineJoined.front()));
  // Each row's assign: the claim and the versions' INSERT in one round trip, on a connection lent
  // for transactions (autocommit off): no START TRANSACTION before them.
  auto assigns = log.statements({"UPDATE outbox_source_state", "; INSERT INTO"});
  BOOST_TEST(assigns.size() >= size_t(kRows), assigns.size() << " assigns sent as one for " << kRows << " rows");
  auto started = log.statements({"START TRANSACTION; UPDATE outbox_source_state"});
  BOOST_TEST(started.empty(), (started.empty() ? "" : started.front()));
  // Nor are the pool's connections set back and forth between the reads and the assigns.
  auto set = log.statements({"SET SESSION autocommit"});
  BOOST_TEST(set.size() < size_t(kRows / 4), set.size() << " autocommit settings for " << kRows << " rows");

  StreamReader reader;
  auto messages = reader.readAll(source.stream(), "control." + source.name);
  BOOST_REQUIRE_EQUAL(messages.size(), size_t(kRows + 1));
  for (size_t i = 0; i < messages.size(); ++i) {
    BOOST_TEST(messages[i].headers.at("Outbox-Version") == std::to_string(i + 1));
    BOOST_TEST(messages[i].headers.at("Outbox-Entity-Key") == std::to_string(i + 1));
  }
  BOOST_TEST(bridge.stop() == 0);
}

// A row above the cursor that has a version all the same (nothing the bridge does leaves one: an
// operator's hand, here) meets the versions' unique outbox_id in the assign after a lean read:
// the batch is scanned again with the join, the versioned row is passed over, the others get the
// next versions in order, and the source goes on (no halt, no row twice).
BOOST_AUTO_TEST_CASE(a_versioned_row_above_the_cursor_is_scanned_again_not_halted_on) {
  PublishedSource f("leandup", 3);
  auto& [database, source, config, bridge] = f;
  // The next three rows in one commit, the middle one given a version far above the others'.
  const std::string versions = source.outboxTable() + "_versions";
  const uint64_t next = database.scalar(fmt::format("SELECT MAX(id) + 1 FROM {}", source.outboxTable()));
  BOOST_REQUIRE(database.sql().exec(fmt::format("INSERT INTO {} (version, outbox_id) VALUES (1000000, {})", versions,
                                                next + 1))
                    .isOk());
  BOOST_REQUIRE(database.sql()
                    .exec(fmt::format("INSERT INTO {} (id, entity_type, entity_key, op, payload) VALUES ({}, "
                                      "'account', '4', 'upsert', '{{}}'), ({}, 'account', '5', 'upsert', '{{}}'), "
                                      "({}, 'account', '6', 'upsert', '{{}}')",
                                      source.outboxTable(), next, next + 1, next + 2))
                    .isOk());
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 5; }, 20s),
                        bridge.log());
  BOOST_TEST(bridge.log().find("have a version already; scanning again") != std::string::npos, bridge.log());
  auto state = database.state(source.name);
  BOOST_TEST(state.assignedThrough == 5u);
  BOOST_TEST(state.haltedReason.empty(), state.haltedReason);
  BOOST_TEST(database.scalar(fmt::format("SELECT outbox_id FROM {} WHERE version = 4", versions)) == next);
  BOOST_TEST(database.scalar(fmt::format("SELECT outbox_id FROM {} WHERE version = 5", versions)) == next + 2);

  StreamReader reader;
  auto messages = reader.readAll(source.stream(), "control." + source.name);
  BOOST_REQUIRE_EQUAL(messages.size(), 5u);
  BOOST_TEST(messages[3].headers.at("Outbox-Entity-Key") == "4");
  BOOST_TEST(messages[4].headers.at("Outbox-Entity-Key") == "6");
  BOOST_TEST(messages[4].headers.at("Outbox-Version") == "5");
  BOOST_TEST(bridge.stop() == 0);
}

// Rows an operator quarantined ahead of the scan (their quarantine written by hand here, before
// the rows commit, so that the bridge's read, above every id quarantined when its session began,
// leaves the quarantine out): a good row's batch is refused by the assign, a small one's INSERT
// and a large one's locking read alike, and scanned again; a poison row is looked up before it
// would halt the source. All are passed over, the others get the next versions in order, no halt.
BOOST_AUTO_TEST_CASE(rows_quarantined_ahead_of_the_scan_are_passed_over_poison_or_not) {
  PublishedSource f("leanq", 3);
  auto& [database, source, config, bridge] = f;
  uint64_t published = 3;
  // `count` rows in one commit, the middle one (of `middleType`) quarantined ahead of them; waits
  // until the others are published. Returns the middle one's id.
  std::set<uint64_t> setAside;
  auto commitRows = [&](uint64_t count, const char* middleType) {
    const uint64_t next = database.scalar(fmt::format("SELECT MAX(id) + 1 FROM {}", source.outboxTable()));
    const uint64_t middle = next + count / 2;
    BOOST_REQUIRE(database.sql()
                      .exec(fmt::format("INSERT INTO outbox_quarantine (source, outbox_id, reason) VALUES ('{}', {}, "
                                        "'by hand')",
                                        source.name, middle))
                      .isOk());
    std::string values;
    for (uint64_t id = next; id < next + count; ++id) {
      values += fmt::format("{}({}, '{}', '{}', 'upsert', '{{}}')", values.empty() ? "" : ", ", id,
                            id == middle ? middleType : "account", id);
    }
    BOOST_REQUIRE(database.sql()
                      .exec(fmt::format("INSERT INTO {} (id, entity_type, entity_key, op, payload) VALUES {}",
                                        source.outboxTable(), values))
                      .isOk());
    published += count - 1;
    BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == published; }, 20s),
                          bridge.log());
    setAside.insert(middle);
    return middle;
  };
  // Said at INFO, not as a failure (nor counted as one: below).
  auto saidAtInfo = [&](uint64_t id) {
    const std::string log = bridge.log();
    const size_t said = log.find(fmt::format("row {} was quarantined", id));
    BOOST_REQUIRE_MESSAGE(said != std::string::npos, log);
    const size_t lineStart = log.rfind('\n', said) == std::string::npos ? 0 : log.rfind('\n', said) + 1;
    const std::string line = log.substr(lineStart, said - lineStart);
    BOOST_TEST(line.find(" INFO ") != std::string::npos, line);
  };
  saidAtInfo(commitRows(3, "account"));  // the folded INSERT refuses it
  commitRows(3, "bad.type");
  // A batch larger than kFoldedCheckRows reads the quarantine under lock after its claim.
  saidAtInfo(commitRows(21, "account"));
  auto state = database.state(source.name);
  BOOST_TEST(state.assignedThrough == published);
  BOOST_TEST(state.haltedReason.empty(), state.haltedReason);
  // Never halted on the poison row, not even for the moment until a recheck found it quarantined.
  BOOST_TEST(bridge.log().find("poison row") == std::string::npos, bridge.log());
  // The refused batches were no database errors.
  const std::string page = httpRequest(bridge.httpPort(), "GET", "/metrics").body;
  BOOST_TEST(metricSample(page, fmt::format("outbox_publish_errors_total{{source=\"{}\",kind=\"database\"}}",
                                            source.name)) == 0.0,
             page);
  BOOST_TEST(database.scalar(fmt::format("SELECT COUNT(*) FROM {}_versions WHERE outbox_id IN ({})",
                                         source.outboxTable(), fmt::join(setAside, ", "))) == 0u);
  // Still the operator's reasons: the relay did not quarantine them again.
  BOOST_TEST(database.scalar(fmt::format("SELECT COUNT(*) FROM outbox_quarantine WHERE source = '{}' AND reason = "
                                         "'by hand'",
                                         source.name)) == setAside.size());
  StreamReader reader;
  auto messages = reader.readAll(source.stream(), "control." + source.name);
  BOOST_REQUIRE_EQUAL(checkDenseOnce(messages, source.name, published), "");
  for (const auto& m : messages) {
    BOOST_TEST(!setAside.count(std::stoull(m.headers.at("Outbox-Entity-Key"))), m.headers.at("Outbox-Entity-Key"));
  }
  BOOST_TEST(bridge.stop() == 0);
}

// A database, or a proxy before it, that will not take several statements in one (the server
// refuses them here, as ProxySQL set to would: a test-only knob keeps the bridge from asking for
// them): after three assigns refused in a row (a claim refused for a reason of its own is not
// taken for it) the bridge says so once and the assigns go one statement at a time, each row
// published once, in order, no halt.
BOOST_AUTO_TEST_CASE(a_database_that_refuses_statements_sent_as_one_gets_them_one_at_a_time) {
  TestDatabase database("single");
  SourceSpec source{uniqueName("single", database), &database, {}};
  std::string config = writeConfig({source});
  migrate(config);
  ::setenv("OUTBOX_TEST_SINGLE_STATEMENTS", "1", 1);
  BridgeProcess bridge(config);
  bridge.start();
  ::unsetenv("OUTBOX_TEST_SINGLE_STATEMENTS");
  const int kRows = 5;
  for (int i = 1; i <= kRows; ++i) {
    insertRow(database, source, i);
    BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == uint64_t(i); }, 20s),
                          bridge.log());
  }
  const std::string log = bridge.log();
  const std::string said = "would not take several statements in one";
  BOOST_TEST(log.find(said) != std::string::npos, log);
  BOOST_TEST(log.find(said) == log.rfind(said), log);
  BOOST_TEST(database.state(source.name).haltedReason.empty());
  StreamReader reader;
  auto messages = reader.readAll(source.stream(), "control." + source.name);
  BOOST_REQUIRE_EQUAL(messages.size(), size_t(kRows));
  for (size_t i = 0; i < messages.size(); ++i) {
    BOOST_TEST(messages[i].headers.at("Outbox-Version") == std::to_string(i + 1));
    BOOST_TEST(messages[i].headers.at("Outbox-Entity-Key") == std::to_string(i + 1));
  }
  BOOST_TEST(bridge.stop() == 0);
}

// A claim refused for a reason of its own (a trigger's error here; a statement time limit or a
// read-only moment would do the same), with nothing of its batch answered, looks like a refusal of
// several statements in one: that batch goes one statement at a time, and its claim alone is
// answered. Two such batches in a row leave the source sending its statements as one (the next
// batch goes as one again); only three in a row switch it for good, said once.
BOOST_AUTO_TEST_CASE(claims_refused_for_their_own_reason_switch_to_one_at_a_time_only_three_in_a_row) {
  PublishedSource f("refusing", 1);
  auto& [database, source, config, bridge] = f;
  db::Connection& sql = database.sql();
  // The refusals to come, in a table outside transactions: the trigger's error undoes its own
  // statement, not the count it took down. Only a claim moves assigned_through.
  BOOST_REQUIRE(sql.exec("CREATE TABLE refusals (n INT NOT NULL) ENGINE = MyISAM").isOk());
  BOOST_REQUIRE(sql.exec("INSERT INTO refusals VALUES (0)").isOk());
  BOOST_REQUIRE(sql.exec("CREATE TRIGGER refuse_claims BEFORE UPDATE ON outbox_source_state FOR EACH ROW BEGIN IF "
                         "NEW.assigned_through <> OLD.assigned_through AND (SELECT n FROM refusals) > 0 THEN UPDATE "
                         "refusals SET n = n - 1; SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test'; "
                         "END IF; END")
                    .isOk());
  int key = 1;
  auto publishOne = [&](bool refused) {
    BOOST_REQUIRE(sql.exec(fmt::format("UPDATE refusals SET n = {}", refused ? 1 : 0)).isOk());
    insertRow(database, source, ++key);
    BOOST_REQUIRE_MESSAGE(
        waitUntil([&] { return database.state(source.name).publishedThrough == uint64_t(key); }, 20s), bridge.log());
    BOOST_TEST(database.scalar("SELECT n FROM refusals") == 0u, "the claim was refused once");
  };
  const std::string said = "would not take several statements in one";
  publishOne(true);
  publishOne(true);
  publishOne(false);
  BOOST_TEST(bridge.log().find(said) == std::string::npos, bridge.log());
  GeneralLog log(database);
  for (int i = 0; i < 3; ++i) publishOne(true);
  publishOne(false);
  publishOne(false);
  const std::string out = bridge.log();
  BOOST_TEST(out.find(said) != std::string::npos, out);
  BOOST_TEST(out.find(said) == out.rfind(said), out);
  // After the switch, no batch goes as one: of the last two rows', the claims went alone.
  auto asOne = log.statements({"UPDATE outbox_source_state", "; INSERT INTO"});
  BOOST_TEST(asOne.size() == 3u, asOne.size() << " batches sent as one (the three refused)");
  requireDenseOnce(source, uint64_t(key));
  BOOST_TEST(bridge.stop() == 0);
}

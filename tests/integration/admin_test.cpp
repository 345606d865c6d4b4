#define BOOST_TEST_MODULE admin
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <thread>

#include <fmt/format.h>

#include "admin/actions.h"
#include "harness.h"
#include "relay/mysql_store.h"

using namespace outbox;
using namespace outbox::test;
using namespace std::chrono_literals;

namespace {
const std::map<std::string, std::string> kAuth{{"Authorization", "Bearer s3cret-admin-token-1"}};
const std::string kAdminToml = "[http]\nlisten = \"127.0.0.1:0\"\nadmin_token = \"s3cret-admin-token-1\"\n";
const bool kNoted = (registerSecret("s3cret-admin-token-1"), true);
// A source's relay store and an operator's, on two connections, over one migrated database: the
// two sides of a quarantine racing an assign.
struct TwoStores {
  TestDatabase database;
  SourceSpec spec;
  std::string path;
  Config config;
  const SourceConfig& source;
  MysqlOutboxStore relayStore, operatorStore;
  std::string table;

  TwoStores(const std::string& purpose, const std::string& prefix)
      : database(purpose),
        spec{uniqueName(prefix, database), &database, {}},
        path(writeConfig({spec})),
        config((migrate(path), loadConfig(path, processEnvironment()))),
        source(config.sources.front()),
        relayStore(source),
        operatorStore(source),
        table(spec.outboxTable()) {
    BOOST_REQUIRE(relayStore.connect().isOk());
    BOOST_REQUIRE(operatorStore.connect().isOk());
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(the_admin_api_requires_its_bearer_token) {
  TestDatabase database("adminauth");
  SourceSpec source{uniqueName("aut", database), &database, {}};
  std::string config = writeConfig({source}, kAdminToml);
  migrate(config);
  BridgeProcess bridge(config);
  bridge.start();
  int port = bridge.httpPort();
  auto none = httpRequest(port, "GET", "/v1/admin/sources");
  BOOST_TEST(none.status == 401);
  BOOST_TEST(none.headers["WWW-Authenticate"] == "Bearer");
  BOOST_TEST(none.body == R"({"error":"a valid bearer token is required"})");
  BOOST_TEST(httpRequest(port, "GET", "/v1/admin/sources", "", {{"Authorization", "Bearer wrong"}}).status == 401);
  BOOST_TEST(httpRequest(port, "POST", "/v1/admin/sources/" + source.name + "/pause").status == 401);
  auto ok = httpRequest(port, "GET", "/v1/admin/sources", "", kAuth);
  BOOST_TEST(ok.status == 200);
  BOOST_TEST(ok.body.find("\"source\":\"" + source.name + "\"") != std::string::npos, ok.body);
  BOOST_TEST(ok.body.find("\"paused\":false") != std::string::npos, ok.body);
  BOOST_TEST(ok.body.find("s3cret-admin-token-1") == std::string::npos);
  BOOST_TEST(httpRequest(port, "GET", "/v1/admin/sources/nope", "", kAuth).status == 404);
  BOOST_TEST(httpRequest(port, "GET", "/v1/admin/sources/" + source.name + "/pause", "", kAuth).status == 405);
  BOOST_TEST(bridge.stop() == 0);
  // Without a configured token the admin API is off.
  std::string plain = writeConfig({source});
  BridgeProcess second(plain);
  second.start();
  auto off = httpRequest(second.httpPort(), "GET", "/v1/admin/sources", "", kAuth);
  BOOST_TEST(off.status == 403);
  BOOST_TEST(second.stop() == 0);
}

BOOST_AUTO_TEST_CASE(pause_stops_publishing_until_resume_without_a_hole) {
  TestDatabase database("pause");
  SourceSpec source{uniqueName("pau", database), &database, {}};
  std::string config = writeConfig({source}, kAdminToml + "stuck_after = \"1s\"\n");
  migrate(config);
  BridgeProcess bridge(config);
  bridge.start();
  int port = bridge.httpPort();
  insertRows(database.sql(), source.outboxTable(), 10);
  BOOST_REQUIRE(waitUntil([&] { return database.state(source.name).publishedThrough == 10; }, 20s));
  auto paused = httpRequest(port, "POST", "/v1/admin/sources/" + source.name + "/pause", "", kAuth);
  BOOST_REQUIRE_EQUAL(paused.status, 200);
  BOOST_TEST(paused.body == fmt::format(R"({{"source":"{}","paused":true}})", source.name));
  insertRows(database.sql(), source.outboxTable(), 10, 10);
  // The relay meets the pause when it tries to assign these rows (the assign refuses on a paused
  // source), and from then on reports it: nothing of them may have gone out by then, or after.
  BOOST_REQUIRE_MESSAGE(waitUntil([&] {
    return httpRequest(port, "GET", "/metrics").body.find(fmt::format("outbox_paused{{source=\"{}\"}} 1", source.name)) !=
           std::string::npos;
  }, 20s), bridge.log());
  BOOST_TEST(database.state(source.name).publishedThrough == 10u);
  BOOST_TEST(database.state(source.name).assignedThrough == 10u);
  StreamReader reader;
  BOOST_TEST(reader.readAll(source.stream(), "control." + source.name).size() == 10u);
  // Rows that wait longer than stuck_after (1 s) on a paused source are not "stuck".
  auto oldestPending = [&] {
    std::string body = httpRequest(port, "GET", "/v1/admin/sources/" + source.name, "", kAuth).body;
    size_t at = body.find("\"oldestPendingSeconds\":");
    return at == std::string::npos ? 0.0 : std::strtod(body.c_str() + at + 23, nullptr);
  };
  BOOST_REQUIRE(waitUntil([&] { return oldestPending() > 1.5; }, 20s));
  BOOST_TEST(httpRequest(port, "GET", "/healthz").status == 200);
  BOOST_TEST(httpRequest(port, "GET", "/v1/admin/sources/" + source.name, "", kAuth).body.find("\"paused\":true") !=
             std::string::npos);
  BOOST_REQUIRE_EQUAL(httpRequest(port, "POST", "/v1/admin/sources/" + source.name + "/resume", "", kAuth).status, 200);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 20; }, 20s), bridge.log());
  BOOST_REQUIRE_EQUAL(checkDenseOnce(reader.readAll(source.stream(), "control." + source.name), source.name, 20), "");
  auto leases = httpRequest(port, "GET", "/v1/admin/leases", "", kAuth);
  BOOST_TEST(leases.status == 200);
  BOOST_TEST(leases.body.find("\"leaseEpoch\":1") != std::string::npos, leases.body);
  // This instance leads the source and is its only candidate, leading this one source.
  BOOST_TEST(leases.body.find("\"thisInstance\":true,\"candidates\":[{\"holder\":") != std::string::npos, leases.body);
  BOOST_TEST(leases.body.find("\"leads\":1,\"thisInstance\":true}]") != std::string::npos, leases.body);
  BOOST_TEST(bridge.stop() == 0);
}

BOOST_AUTO_TEST_CASE(quarantine_through_the_admin_api_resumes_a_halted_source) {
  TestDatabase database("adminq");
  SourceSpec source{uniqueName("adq", database), &database, {}};
  std::string config = writeConfig({source}, kAdminToml);
  migrate(config);
  insertRows(database.sql(), source.outboxTable(), 2);
  BOOST_REQUIRE(database.sql().exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES "
                                                "('bad type', 'k', 'upsert', '{{}}')", source.outboxTable())).isOk());
  uint64_t poison = database.scalar("SELECT LAST_INSERT_ID()");
  insertRows(database.sql(), source.outboxTable(), 2, 2);
  BridgeProcess bridge(config);
  bridge.start();
  int port = bridge.httpPort();
  BOOST_REQUIRE(waitUntil([&] { return !database.state(source.name).haltedReason.empty(); }, 20s));
  BOOST_TEST((database.state(source.name).haltedRow == HaltedRow{poison, std::nullopt}));
  auto status = httpRequest(port, "GET", "/v1/admin/sources/" + source.name, "", kAuth);
  BOOST_TEST(status.body.find(fmt::format("\"haltedRowId\":{},", poison)) != std::string::npos, status.body);
  const std::string path = "/v1/admin/sources/" + source.name + "/quarantine";
  BOOST_TEST(httpRequest(port, "POST", path, "not json", kAuth).status == 400);
  BOOST_TEST(httpRequest(port, "POST", path, R"({"id": 1})", kAuth).status == 400);  // no reason
  auto published = httpRequest(port, "POST", path, R"({"id": 1, "reason": "x"})", kAuth);
  BOOST_TEST(published.status == 409);
  BOOST_TEST(published.body.find("already has version 1") != std::string::npos, published.body);
  auto q = httpRequest(port, "POST", path, fmt::format(R"({{"id": {}, "reason": "bad entity type"}})", poison), kAuth);
  BOOST_REQUIRE_EQUAL(q.status, 200);
  BOOST_TEST(q.body.find("\"haltCleared\":true") != std::string::npos, q.body);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 4; }, 20s), bridge.log());
  BOOST_TEST(!database.state(source.name).haltedRow.has_value());
  // The status is cached for up to a second.
  BOOST_TEST(waitUntil([&] {
    status = httpRequest(port, "GET", "/v1/admin/sources/" + source.name, "", kAuth);
    return status.body.find("\"halted\":false,\"haltedReason\":null,\"haltedRowId\":null,") != std::string::npos;
  }, 5s), status.body);
  StreamReader reader;
  BOOST_REQUIRE_EQUAL(checkDenseOnce(reader.readAll(source.stream(), "control." + source.name), source.name, 4), "");
  BOOST_TEST(bridge.stop() == 0);
}

// Issue 19, finding 6: an operator's quarantine and the assign of a batch that already held the
// row both committed: the row was quarantined and published. (At READ COMMITTED the quarantine's
// SELECT ... FOR UPDATE of the missing version took no gap lock; at any level the assign never
// looked at the quarantine.) Both take the state row first now, and the assign reads the
// quarantine under lock: exactly one of them wins, every time. Raced 1,000 times on two
// connections, each side started at the same moment; every other batch is of three rows, the
// raced one in the middle (issue 20: small batches check in their versions INSERT).
BOOST_AUTO_TEST_CASE(quarantine_and_assign_of_one_row_never_both_win) {
  TwoStores f("qrace", "qr");
  auto& [database, spec, path, config, source, relayStore, operatorStore, table] = f;
  uint64_t assignedThrough = 0;
  int assignWon = 0, quarantineWon = 0;
  constexpr int kTries = 1000;
  insertRows(database.sql(), table, 2 * kTries, 0);
  uint64_t nextId = database.scalar("SELECT MIN(id) FROM " + table);
  auto logins = [&] {
    return database.scalar("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'CONNECTIONS'");
  };
  const uint64_t loginsBefore = logins();
  for (int i = 0; i < kTries; ++i) {
    // The batch as the scan read it, before the operator acted.
    std::vector<OutboxRow> batch(i % 2 == 0 ? 1 : 3);
    for (auto& row : batch) row.id = nextId++;
    const uint64_t id = batch[batch.size() / 2].id;
    std::atomic<int> ready{0};
    Status quarantined;
    std::thread operatorThread([&] {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      quarantined = operatorStore.quarantine(id, "race");
    });
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    Status assigned = relayStore.assign(batch, assignedThrough, ScanMark{batch.back().id, batch.back().id});
    operatorThread.join();
    const uint64_t outcome = database.scalar(fmt::format(
        "SELECT (SELECT COUNT(*) FROM {}_versions WHERE outbox_id = {}) + 2 * (SELECT COUNT(*) FROM outbox_quarantine "
        "WHERE source = '{}' AND outbox_id = {})",
        table, id, source.name, id));
    const bool versioned = (outcome & 1) != 0, setAside = (outcome & 2) != 0;
    BOOST_REQUIRE_MESSAGE(!(versioned && setAside), fmt::format("try {}: row {} was quarantined and assigned a version "
                                                                "(assign: {}; quarantine: {})",
                                                                i, id, assigned.toString(), quarantined.toString()));
    BOOST_REQUIRE_MESSAGE(versioned || setAside, fmt::format("try {}: neither won (assign: {}; quarantine: {})", i,
                                                             assigned.toString(), quarantined.toString()));
    BOOST_REQUIRE_EQUAL(assigned.isOk(), versioned);
    BOOST_REQUIRE_EQUAL(quarantined.isOk(), setAside);
    // The batch is versioned whole or not at all.
    BOOST_REQUIRE_EQUAL(database.scalar(fmt::format("SELECT COUNT(*) FROM {}_versions WHERE outbox_id BETWEEN {} AND {}",
                                                    table, batch.front().id, batch.back().id)),
                        versioned ? batch.size() : 0u);
    if (versioned) {
      assignedThrough += batch.size();
      ++assignWon;
      BOOST_REQUIRE_MESSAGE(quarantined.isRejected(), quarantined.toString());
    } else {
      ++quarantineWon;
      // Refused for the quarantine, not for anything else.
      BOOST_REQUIRE_MESSAGE(assigned.message().find(fmt::format("row {} was quarantined", id)) != std::string::npos,
                            assigned.toString());
    }
  }
  const uint64_t reconnects = logins() - loginsBefore;
  BOOST_TEST_MESSAGE("assign won " << assignWon << " times, quarantine " << quarantineWon << "; " << reconnects
                                   << " logins to the server");
  BOOST_TEST(database.state(source.name).assignedThrough == assignedThrough);
  // Both outcomes (hundreds of times each on an idle machine): a refused assign keeps its connection
  // (Session::transaction), where a login per refusal (a TLS handshake) left the quarantine winning
  // 995 to 999 of 1,000 and the server counting a login for each.
  BOOST_TEST(assignWon >= 1);
  BOOST_TEST(quarantineWon >= 1);
  BOOST_TEST(reconnects < static_cast<uint64_t>(kTries / 20));
}

// Issue 20: a small batch checks the quarantine in its versions INSERT, a larger one reads it
// first. Either way a batch the scan read before a row of it was quarantined is refused whole, the
// row named: no version, assigned_through unmoved; the batch without that row then goes through.
BOOST_AUTO_TEST_CASE(a_batch_holding_a_row_quarantined_since_the_scan_is_refused_whole) {
  TwoStores f("qbatch", "qb");
  auto& [database, spec, path, config, source, relayStore, operatorStore, table] = f;
  constexpr size_t kLarge = MysqlOutboxStore::kFoldedCheckRows + 4;
  insertRows(database.sql(), table, 3 + kLarge, 0);
  uint64_t id = database.scalar("SELECT MIN(id) FROM " + table);
  uint64_t assignedThrough = 0;
  for (size_t size : {size_t{3}, kLarge}) {
    BOOST_TEST_CONTEXT("a batch of " << size) {
      std::vector<OutboxRow> batch(size);
      for (auto& row : batch) row.id = id++;
      const uint64_t quarantinedId = batch[size / 2].id;
      BOOST_REQUIRE(operatorStore.quarantine(quarantinedId, "bad row").isOk());
      Status refused = relayStore.assign(batch, assignedThrough, ScanMark{batch.back().id, batch.back().id});
      BOOST_TEST(refused.isTransient(), refused.toString());
      BOOST_TEST(refused.message().find(fmt::format("row {} was quarantined", quarantinedId)) != std::string::npos,
                 refused.toString());
      BOOST_TEST(database.scalar(fmt::format("SELECT COUNT(*) FROM {}_versions", table)) == assignedThrough);
      BOOST_TEST(database.state(source.name).assignedThrough == assignedThrough);
      batch.erase(batch.begin() + static_cast<long>(size / 2));
      BOOST_REQUIRE(relayStore.assign(batch, assignedThrough, ScanMark{batch.back().id, batch.back().id}).isOk());
      assignedThrough += batch.size();
      BOOST_TEST(database.state(source.name).assignedThrough == assignedThrough);
      BOOST_TEST(database.scalar(fmt::format("SELECT COUNT(*) FROM {}_versions WHERE outbox_id = {}", table,
                                             quarantinedId)) == 0u);
    }
  }
}

// Issue 24, finding 4: quarantining an id no row has yet exited 0 (the admin API answered 200);
// when the producer later committed that id it was never published. Only a committed row without
// a version can be quarantined; the rest is refused (exit 2, HTTP 409), as are ids that are not
// ids and empty or overlong reasons.
BOOST_AUTO_TEST_CASE(quarantine_refuses_a_row_that_does_not_exist) {
  TestDatabase database("qmissing");
  SourceSpec source{uniqueName("qm", database), &database, {}};
  std::string config = writeConfig({source}, kAdminToml);
  migrate(config);
  insertRows(database.sql(), source.outboxTable(), 3);
  const uint64_t next = database.scalar("SELECT MAX(id) FROM " + source.outboxTable()) + 1;
  auto cli = [&](const std::string& id, const std::string& reason) {
    return runBridge({"quarantine", "--config", config, "--source", source.name, "--id", id, "--reason", reason});
  };
  auto missing = cli(std::to_string(next), "not there yet");
  BOOST_TEST(missing.exitCode == 2);
  BOOST_TEST(missing.err.find(fmt::format("no committed row {}", next)) != std::string::npos, missing.err);
  for (const char* bad : {"-1", "0", "", "18446744073709551616", "12abc", "+3", " 3"}) {
    auto r = cli(bad, "bad id");
    BOOST_TEST(r.exitCode == 2, "--id '" << bad << "': exit " << r.exitCode << " " << r.err);
    BOOST_TEST(r.err.find("--id") != std::string::npos, r.err);
  }
  BOOST_TEST(cli("2", "").exitCode == 2);
  BOOST_TEST(cli("2", std::string(1001, 'r')).exitCode == 2);
  BOOST_TEST(database.scalar("SELECT COUNT(*) FROM outbox_quarantine") == 0u);

  BridgeProcess bridge(config);
  bridge.start();
  int port = bridge.httpPort();
  const std::string path = "/v1/admin/sources/" + source.name + "/quarantine";
  auto refused = httpRequest(port, "POST", path, fmt::format(R"({{"id": {}, "reason": "not there yet"}})", next), kAuth);
  BOOST_TEST(refused.status == 409);
  BOOST_TEST(refused.body.find("no committed row") != std::string::npos, refused.body);
  // The producer commits that id now: it is published like any other.
  insertRows(database.sql(), source.outboxTable(), 1, 3);
  BOOST_REQUIRE_MESSAGE(waitUntil([&] { return database.state(source.name).publishedThrough == 4; }, 20s), bridge.log());
  StreamReader reader;
  BOOST_REQUIRE_EQUAL(checkDenseOnce(reader.readAll(source.stream(), "control." + source.name), source.name, 4), "");
  BOOST_TEST(database.scalar("SELECT COUNT(*) FROM outbox_quarantine") == 0u);
  BOOST_TEST(bridge.stop() == 0);
}

// `curl -X POST URL` sends no Content-Length: it was answered 400 {"error":"bad request"} after a
// 5 s read timeout, before the token was even looked at. Now it is a POST with an empty body.
BOOST_AUTO_TEST_CASE(a_post_without_a_body_is_a_post_with_an_empty_body) {
  TestDatabase database("adminnobody");
  SourceSpec source{uniqueName("nob", database), &database, {}};
  std::string config = writeConfig({source}, kAdminToml);
  migrate(config);
  BridgeProcess bridge(config);
  bridge.start();
  int port = bridge.httpPort();
  auto post = [&](const std::string& path, const std::string& auth) {
    auto begin = std::chrono::steady_clock::now();
    auto reply = rawHttp(port, fmt::format("POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\n{}Connection: close\r\n\r\n", path,
                                           auth.empty() ? "" : "Authorization: Bearer " + auth + "\r\n"),
                         10s);
    BOOST_TEST((std::chrono::steady_clock::now() - begin) < 2s, path << " waited for a body");
    return reply;
  };
  const std::string pause = "/v1/admin/sources/" + source.name + "/pause";
  auto anonymous = post(pause, "");
  BOOST_TEST(anonymous.status == 401);
  BOOST_TEST(anonymous.body == R"({"error":"a valid bearer token is required"})");
  BOOST_TEST(post(pause, "wrong").status == 401);
  auto paused = post(pause, "s3cret-admin-token-1");
  BOOST_TEST(paused.status == 200, paused.body);
  BOOST_TEST(paused.body.find("\"paused\":true") != std::string::npos, paused.body);
  BOOST_TEST(waitUntil([&] { return database.scalar(fmt::format("SELECT paused FROM outbox_source_state WHERE source = '{}'",
                                                                source.name)) == 1; }, 5s));
  BOOST_TEST(post("/v1/admin/sources/" + source.name + "/resume", "s3cret-admin-token-1").status == 200);
  // Quarantine needs its body: a clear 400, at once.
  auto quarantine = post("/v1/admin/sources/" + source.name + "/quarantine", "s3cret-admin-token-1");
  BOOST_TEST(quarantine.status == 400);
  BOOST_TEST(quarantine.body.find("expected a JSON body") != std::string::npos, quarantine.body);
  // A POST to no route is a 404 at once, not a wait for its body.
  auto nowhere = post("/v1/nowhere", "");
  BOOST_TEST(nowhere.status == 404);
  BOOST_TEST(nowhere.body.find("no route for POST /v1/nowhere") != std::string::npos, nowhere.body);
  BOOST_TEST(bridge.stop() == 0);
}

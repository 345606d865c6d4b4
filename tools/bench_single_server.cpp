// outbox-bench (e), (g) and (f), on the single server's source once the cluster's part has ended:
// a snapshot streamed to a client, the same backlog through a batched Node.js poller, and a prune.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include <httplib.h>
#include <fmt/format.h>

#include "tools/bench.h"
#include "tools/support/subprocess.h"
#include "config/config.h"
#include "db/connection.h"
#include "nats/jetstream.h"

namespace outbox::bench {

// (e) A snapshot of snapshotRecords records, streamed to a client that reads as fast as it can.
void snapshotFigure(Target& single, const Options& o) {
  const std::string& source = single.source;
  const std::string& log = single.log;
  db::Connection* conn = single.conn.get();
  Subprocess& bridge = single.bridge;
  check(conn->exec("CREATE TABLE bench_accounts (id BIGINT UNSIGNED PRIMARY KEY, display_name VARCHAR(191) NOT "
                   "NULL, balance DECIMAL(12,2) NULL)"),
        "create bench_accounts");
  check(conn->exec(fmt::format("INSERT INTO bench_accounts SELECT seq, CONCAT('Account holder ', seq), seq / 100 "
                               "FROM seq_1_to_{}",
                               o.snapshotRecords)),
        "fill bench_accounts");
  int port = httpPortFromLog(log);
  if (port <= 0) fail("the bridge logged no HTTP port; see " + log);
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(std::chrono::seconds(300));
  size_t bytes = 0;
  std::string tail;
  auto snapBegin = Clock::now();
  auto res = client.Get(fmt::format("/v1/sources/{}/control-snapshot", source), [&](const char* data, size_t n) {
    bytes += n;
    tail.append(data, n);
    if (tail.size() > 4096) tail.erase(0, tail.size() - 256);
    return true;
  });
  double snapSeconds = seconds(Clock::now() - snapBegin);
  if (!res || res->status != 200) fail("snapshot request failed");
  if (tail.find(fmt::format("\"recordCount\":{}", o.snapshotRecords)) == std::string::npos) {
    fail("the snapshot did not end with the expected recordCount");
  }
  ProcSample afterSnapshot = sample(bridge.pid());
  std::printf("(e)  snapshot of %d records (%.0f MiB): %.2f s, %.0f records/s  [target >= 500000]; "
              "bridge peak RSS over the whole run %.1f MiB  [target <= 64 MiB]\n",
              o.snapshotRecords, static_cast<double>(bytes) / (1 << 20), snapSeconds, o.snapshotRecords / snapSeconds,
              afterSnapshot.peakRssMiB);
}

// (g) The same backlog through a batched Node.js poller (mysql2 + nats.js), same servers.
void nodePollerFigure(Target& single, const Options& o, const Dsn& dsn, nats::JetStream& js, const std::string& runId) {
  const std::string& database = single.database;
  const std::string& table = single.table;
  db::Connection* conn = single.conn.get();
  const double drain = single.drain;
  const std::string nodeSource = "node" + runId;
  const std::string nodeTable = nodeSource + "_outbox";
  check(conn->exec(fmt::format("CREATE TABLE {} LIKE {}", nodeTable, table)), "create the node poller's table");
  // The poller keeps versions in the table, as teams write it (the bridge's v1 design).
  check(conn->exec(fmt::format("ALTER TABLE {} ADD COLUMN version BIGINT UNSIGNED NULL, ADD UNIQUE KEY uk_version "
                               "(version), ADD KEY idx_pending (version, id)",
                               nodeTable)),
        "give the node poller's table a version column");
  check(conn->exec(fmt::format("INSERT INTO outbox_source_state (source) VALUES ('{}')", nodeSource)), "state row");
  bulkInsert(*conn, nodeTable, o.rows, o.payloadBytes);
  nats::StreamSettings settings;
  settings.name = "NODE_" + upper(runId);
  settings.subject = "control." + nodeSource + ".>";
  check(js.ensureStream(settings), "create the node poller's stream");
  const std::string nodeLog = fmt::format("/tmp/outbox-bench-node-{}.log", runId);
  Subprocess node;
  node.start({"/usr/bin/env", "node", o.nodePoller + "/poller.mjs", fmt::format("mysql://{}@{}:{}/{}", dsn.user, dsn.host, dsn.port, database),
              dsn.password, o.natsUrl, nodeTable, "control." + nodeSource, nodeSource, std::to_string(o.rows)},
             nodeLog);
  while (node.running()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::ifstream in(nodeLog);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto at = text.find("\"rate\":");
  if (at == std::string::npos) {
    std::printf("(g)  node.js poller: failed, see %s\n", nodeLog.c_str());
  } else {
    double nodeRate = std::strtod(text.c_str() + at + 7, nullptr);
    std::printf("(g)  batched node.js poller (mysql2 + nats.js)  %9.0f rows/s   (b)/(g) = %.1f   [target >= 4]\n",
                nodeRate, drain / nodeRate);
  }
  (void)js.deleteStream(settings.name);
  std::fflush(stdout);
}

// (f) Prune: a table of pruneRows published rows, old enough, deleted by `outbox-bridge prune`.
void pruneFigure(Target& single, const Options& o, const Dsn& dsn) {
  const std::string& source = single.source;
  const std::string& table = single.table;
  db::Connection* conn = single.conn.get();
  check(conn->exec(fmt::format("TRUNCATE TABLE {}", table)), "empty the outbox table");  // no purge backlog left to slow the prune
  check(conn->exec(fmt::format("TRUNCATE TABLE {}_versions", table)), "empty the versions table");
  const std::string body = payload(o.payloadBytes, 0);
  constexpr uint64_t kFirstId = 1'000'000'000;  // above every id the runs before used
  check(conn->exec(fmt::format("INSERT INTO {} (id, entity_type, entity_key, op, payload, created_at) "
                               "SELECT {} + seq, 'item', seq, 'upsert', '{}', NOW(6) - INTERVAL 2 HOUR FROM seq_1_to_{}",
                               table, kFirstId, body, o.pruneRows)),
        "fill the outbox table");
  check(conn->exec(fmt::format("INSERT INTO {}_versions (version, outbox_id) SELECT seq, {} + seq FROM seq_1_to_{}",
                               table, kFirstId, o.pruneRows)),
        "version the rows");
  check(conn->exec(fmt::format("UPDATE outbox_source_state SET assigned_through = {0}, published_through = {0} "
                               "WHERE source = '{1}'",
                               o.pruneRows, source)),
        "mark them published");
  const std::string pruneLog = fmt::format("/tmp/outbox-bench-prune-{}.log", source);
  std::remove(pruneLog.c_str());
  Subprocess prune;
  if (!startBridge(prune, single, dsn.password, {"prune", "--keep", "1h"}, o, pruneLog)) {
    fail("cannot run outbox-bridge prune");
  }
  while (prune.running()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::ifstream in(pruneLog);
  std::string line((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!line.empty() && line.back() == '\n') line.pop_back();
  // The result line, without the log line's time, level and source.
  if (auto at = line.find("prune: "); at != std::string::npos) line = line.substr(at + 7);
  std::printf("(f)  prune of %d published rows: %s  [targets >= 100000 rows/s, longest transaction < 100 ms]\n",
              o.pruneRows, line.c_str());
}

}  // namespace outbox::bench

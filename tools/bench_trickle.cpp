// outbox-bench (i): a trickle over 1, 50 and 200 sources, with the binlog doorbell and polling
// only, under ROW and MIXED (statements, CPU, latency, connections), beside the producer alone.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tools/bench.h"
#include "tools/support/subprocess.h"
#include "config/config.h"
#include "db/connection.h"
#include "db/migrate.h"
#include "nats/jetstream.h"

namespace outbox::bench {
namespace {

// (i)'s load: `rows` one-row autocommit INSERTs, ten a second, into tables[i % tables.size()];
// `committed(i)` right after each.
void insertTenASecond(db::Connection& conn, const std::vector<std::string>& tables, int rows, int payloadBytes,
                      const std::function<void(int)>& committed = {}) {
  auto next = Clock::now();
  for (int i = 0; i < rows; ++i) {
    check(conn.exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('item','{}','upsert',"
                                "'{}')",
                                tables[static_cast<size_t>(i) % tables.size()], i, payload(payloadBytes, wallMicros()))),
          "insert");
    if (committed) committed(i);
    next += std::chrono::milliseconds(100);
    std::this_thread::sleep_until(next);
  }
}

// Who spent MariaDB's CPU: each server thread's role, from information_schema.PROCESSLIST's TID
// (MariaDB's one-thread-per-connection, its default). The producer's connection (`producerId`),
// the doorbell's binlog dump, the connections on `database` (the bridge's), and the rest — the
// server's own threads (InnoDB's log writer and purge, the binlog's background thread) and the
// measurement's connection — as "server".
using ThreadRoles = std::map<int, std::string>;
ThreadRoles threadRoles(db::Connection& admin, const std::string& database, uint64_t producerId) {
  ThreadRoles roles;
  auto rows = check(admin.query("SELECT ID, TID, COMMAND, DB FROM information_schema.PROCESSLIST"), "PROCESSLIST");
  while (rows.next()) {
    const int tid = static_cast<int>(rows.u64("TID"));
    if (rows.u64("ID") == producerId) {
      roles[tid] = "producer";
    } else if (rows.text("COMMAND").starts_with("Binlog Dump")) {
      roles[tid] = "dump";
    } else if (!rows.isNull("DB") && rows.text("DB") == database) {
      roles[tid] = "bridge";
    }
  }
  return roles;
}

// The CPU seconds between readings a and b of MariaDB by role (threadRoles; a thread it does not
// name is "server"), as "role x.xx%" over `took` seconds.
std::string cpuByRole(const CpuReading& a, const CpuReading& b, const ThreadRoles& roles, double took) {
  std::map<std::string, double> byRole{{"producer", 0}, {"bridge", 0}, {"dump", 0}, {"server", 0}};
  for (const auto& [tid, spent] : threadsSpentBetween(a, b).nanos) {
    auto role = roles.find(tid);
    byRole[role == roles.end() ? "server" : role->second] += static_cast<double>(spent) / 1e9;
  }
  std::string out;
  for (const char* role : {"producer", "bridge", "dump", "server"}) {
    out += fmt::format("{}{} {:.2f}%", out.empty() ? "" : ", ", role, byRole[role] / took * 100);
  }
  return out;
}

// (i)'s reference: the same load into as many outbox tables as the run has sources (the
// project's schema) with no bridge running — what the producer's own commits cost MariaDB, which
// every (i) figure includes. Spread over 50 tables each commit dirties pages of its own table,
// which one table's commits share: compared with one table's, the bridge was charged for that.
double producerAlone(const Options& o, Dsn dsn, db::Connection& admin, const std::string& runId, int tableCount) {
  dsn.database = fmt::format("bench_t{}p{}", runId, tableCount);
  check(admin.exec("CREATE DATABASE " + dsn.database), "create database");
  auto conn = check(db::Connection::open(db::paramsFrom(dsn)), "connect to MariaDB");
  std::vector<std::string> tables, applied;
  for (int i = 0; i < tableCount; ++i) tables.push_back(fmt::format("alone{}_outbox", i));
  check(db::migrate(*conn, tables, {}, applied), "create the outbox tables");
  quiesce(o);
  const uint64_t producerId = check(conn->queryU64("SELECT CONNECTION_ID()"), "CONNECTION_ID").value_or(0);
  const CpuReading m0 = readCpu(o.mysqlPid);
  const auto t0 = Clock::now();
  insertTenASecond(*conn, tables, 10 * o.trickleSeconds, o.payloadBytes);
  const CpuReading m1 = readCpu(o.mysqlPid);
  const double took = seconds(Clock::now() - t0);
  const double cpu = cpuSecondsBetween(m0, m1) / took * 100;
  std::printf("(i)  the producer alone over %d table%s, MariaDB's threads: %s\n", tableCount,
              tableCount == 1 ? "" : "s",
              cpuByRole(m0, m1, threadRoles(admin, dsn.database, producerId), took).c_str());
  (void)admin.exec("DROP DATABASE " + dsn.database);
  return cpu;
}

// (i) The trickle (docs/design.md, "Waking up: the binlog doorbell", issue 20): `sources` sources
// on one database of their own, waking by `wake` ("auto": the binlog doorbell; "poll": the idle
// check only), first at rest, then 10 rows/s spread evenly over them, one-row autocommit
// transactions. MariaDB's statements are its Questions counter less the producer's and the
// measurement's own; latency is from the producer's commit to the time nats-server stored the
// message.
void trickle(const Options& o, Dsn dsn, db::Connection& admin, nats::Connection& nc, const std::string& runId,
             int sources, const std::string& wake, const std::string& binlogFormat, double producerCpu) {
  const std::string id = fmt::format("t{}{}{}{}", runId, sources, wake.front(), binlogFormat.front());
  dsn.database = "bench_" + id;
  check(admin.exec("CREATE DATABASE " + dsn.database), "create database");
  std::vector<std::string> names, tables, streams;
  const std::string path = fmt::format("/tmp/outbox-bench-{}.toml", id);
  {
    std::ofstream out(path);
    out << fmt::format("[nats]\nurl = \"{}\"\n\n[http]\nlisten = \"127.0.0.1:0\"\n", o.natsUrl);
    for (int i = 0; i < sources; ++i) {
      names.push_back(fmt::format("{}s{}", id, i));
      tables.push_back(names.back() + "_control_outbox");
      streams.push_back("CONTROL_" + upper(names.back()));
      out << fmt::format("\n[[source]]\nname = \"{}\"\ndsn = \"mysql://{}@{}:{}/{}\"\npassword = \"{}\"\n"
                         "snapshot_query = \"SELECT 1 AS id\"\nwake = \"{}\"\n",
                         names.back(), dsn.user, dsn.host, dsn.port, dsn.database, dsn.password, wake);
    }
  }
  // The password is in this config: no OUTBOX_BRIDGE_* variable of an earlier run may be left over.
  for (char** e = environ; *e != nullptr;) {
    std::string var(*e);
    if (var.rfind("OUTBOX_BRIDGE_", 0) == 0) {
      unsetenv(var.substr(0, var.find('=')).c_str());
    } else {
      ++e;
    }
  }
  const std::string log = fmt::format("/tmp/outbox-bench-{}.log", id);
  Subprocess migrate;
  if (!migrate.start({o.bridge, "migrate", "--config", path}, log + ".migrate")) fail("cannot run migrate");
  while (migrate.running()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  quiesce(o);
  auto conn = check(db::Connection::open(db::paramsFrom(dsn)), "connect to MariaDB");
  Subprocess bridge;
  if (!bridge.start({o.bridge, "run", "--config", path}, log)) fail("cannot start the bridge");
  auto logText = [&] {
    std::ifstream in(log);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  auto count = [](const std::string& text, const std::string& what) {
    int n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  auto begin = Clock::now();
  while (count(logText(), "in step with stream") < sources ||
         (wake == "auto" && logText().find("watching the binary log") == std::string::npos)) {
    if (!bridge.running()) fail("the bridge exited; see " + log);
    if (Clock::now() - begin > std::chrono::seconds(180)) fail("the sources did not start; see " + log);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Past the first polls of each session, which follow the flow.
  std::this_thread::sleep_for(std::chrono::seconds(5));
  auto questions = [&] {
    auto rows = check(admin.query("SHOW GLOBAL STATUS LIKE 'Questions'"), "Questions");
    rows.next();
    return static_cast<double>(rows.u64(1));
  };
  struct Cost {
    double bridgeCpu, mysqlCpu, statements;
    std::string byRole;
  };
  const uint64_t producerId = check(conn->queryU64("SELECT CONNECTION_ID()"), "CONNECTION_ID").value_or(0);
  auto measure = [&](const std::function<void()>& during) {
    const double q0 = questions();
    const CpuReading b0 = readCpu(bridge.pid()), m0 = readCpu(o.mysqlPid);
    auto t0 = Clock::now();
    during();
    double took = seconds(Clock::now() - t0);
    const CpuReading b1 = readCpu(bridge.pid()), m1 = readCpu(o.mysqlPid);
    const double q1 = questions();
    return Cost{cpuSecondsBetween(b0, b1) / took * 100, cpuSecondsBetween(m0, m1) / took * 100, (q1 - q0 - 1) / took,
                cpuByRole(m0, m1, threadRoles(admin, dsn.database, producerId), took)};
  };
  const double restSeconds = std::max(5, o.idleSeconds * 2);
  Cost rest = measure([&] { std::this_thread::sleep_for(std::chrono::duration<double>(restSeconds)); });
  // 10 rows/s over the sources, round robin; the last row's publish is awaited within the window.
  const int rows = 10 * o.trickleSeconds;
  std::vector<int64_t> committedAt(static_cast<size_t>(rows));
  Cost flow = measure([&] {
    insertTenASecond(*conn, tables, rows, o.payloadBytes, [&](int i) { committedAt[static_cast<size_t>(i)] = wallMicros(); });
  });
  const double bridgeStatements = flow.statements - 10.0;  // less the producer's INSERTs
  begin = Clock::now();
  auto published = [&] {
    return check(conn->queryU64("SELECT SUM(published_through) FROM outbox_source_state"), "published").value_or(0);
  };
  while (published() < static_cast<uint64_t>(rows)) {
    if (Clock::now() - begin > std::chrono::seconds(30)) fail("the trickle was not published; see " + log);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto js = check(nats::JetStream::create(nc, std::chrono::milliseconds(10'000), 1024), "jetstream");
  std::vector<double> latencies;
  for (int i = 0; i < sources; ++i) {
    const uint64_t n = static_cast<uint64_t>(rows / sources + (i < rows % sources ? 1 : 0));
    if (n == 0) continue;
    auto messages = check(js->readRange(streams[static_cast<size_t>(i)], "control." + names[static_cast<size_t>(i)] + ".>",
                                        1, n, std::chrono::milliseconds(10'000)),
                          "read stream");
    for (const auto& m : messages) {
      auto key = m.headers.find("Outbox-Entity-Key");
      if (key == m.headers.end()) continue;
      latencies.push_back(static_cast<double>(m.timestampNanos / 1000 - committedAt.at(std::stoul(key->second))) / 1000.0);
    }
  }
  // The bridge's connections to the server now, all of them on the bench's database but the
  // producer's (and the doorbell's dump, which names none).
  const uint64_t connections =
      check(conn->queryU64(fmt::format("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = '{}' AND ID "
                                       "<> CONNECTION_ID()",
                                       dsn.database)),
            "connections")
          .value_or(0);
  bridge.terminate(std::chrono::seconds(10));
  std::printf("(i)  %-5s %3d source%s, %-8s at rest: bridge %5.2f%%, MariaDB %5.2f%%, %6.1f statements/s | 10 rows/s: "
              "bridge %5.2f%%, MariaDB %5.2f%% (%+.2f%% on the producer alone, %.2fx its own), %6.1f statements/s "
              "(%.1f a row, %.1f beyond those at rest), p50 %.1f ms, p99 %.1f ms (%zu rows) | %llu connections\n",
              binlogFormat.c_str(), sources, sources == 1 ? " " : "s", wake == "auto" ? "doorbell" : "polling",
              rest.bridgeCpu, rest.mysqlCpu, rest.statements, flow.bridgeCpu, flow.mysqlCpu, flow.mysqlCpu - producerCpu,
              producerCpu > 0 ? (flow.mysqlCpu - producerCpu) / producerCpu : 0.0, bridgeStatements,
              bridgeStatements / 10.0, (bridgeStatements - rest.statements) / 10.0, percentile(latencies, 0.5), percentile(latencies, 0.99), latencies.size(),
              static_cast<unsigned long long>(connections));
  std::printf("(i)        MariaDB's threads at rest: %s | at 10 rows/s: %s\n", rest.byRole.c_str(),
              flow.byRole.c_str());
  std::fflush(stdout);
  for (const auto& stream : streams) (void)js->deleteStream(stream);
  (void)admin.exec("DROP DATABASE " + dsn.database);
}

}  // namespace

// (i) The trickle, while no other bridge runs: the doorbell over 1, 50 and 200 sources, then
// polling only, under each binary log format (SET GLOBAL, set back after: the sessions that
// start meanwhile, the producer's and the bridge's, take it).
void trickleFigures(const Options& o, db::Connection& admin, nats::Connection& nc, const std::string& runId) {
  std::printf("(i)  a trickle [targets, ROW and MIXED alike: 1 source at 10 rows/s, the bridge adds <= 1.2x the "
              "producer's own MariaDB CPU, <= 5 statements a row; 50 sources at rest: MariaDB <= 0.5%%, <= 2 "
              "statements/s; 50 or 200 sources at 10 rows/s: <= 1.5x the producer's own, p99 <= 15 ms; 200 sources "
              "<= 20 connections]\n");
  Dsn server = Dsn::parse("--dsn", o.dsn);
  server.password = o.password;
  auto before = check(admin.query("SELECT @@global.binlog_format"), "binlog_format");
  before.next();
  const std::string formatBefore(before.text(0));
  for (const auto& format : o.binlogFormats) {
    check(admin.exec(fmt::format("SET GLOBAL binlog_format = '{}'", format)), "SET GLOBAL binlog_format");
    std::vector<std::pair<int, const char*>> runs;
    for (int n : o.trickleSources) runs.emplace_back(n, "auto");
    runs.emplace_back(1, "poll");
    runs.emplace_back(50, "poll");
    std::map<int, double> producerCpu;  // by the number of tables
    for (auto [n, wake] : runs) {
      if (producerCpu.contains(n)) continue;
      producerCpu[n] = producerAlone(o, server, admin, runId + format.substr(0, 1), n);
      std::printf("(i)  %-5s the producer alone, 10 one-row INSERTs a second over %d table%s, no bridge: MariaDB "
                  "%.2f%% (every MariaDB figure below with as many sources includes it)\n",
                  format.c_str(), n, n == 1 ? "" : "s", producerCpu[n]);
      std::fflush(stdout);
    }
    for (auto [n, wake] : runs) trickle(o, server, admin, nc, runId, n, wake, format, producerCpu[n]);
  }
  (void)admin.exec(fmt::format("SET GLOBAL binlog_format = '{}'", formatBefore));
}

}  // namespace outbox::bench

// outbox-bench: the project's benchmark (its targets: docs/design.md, "Performance, and where the
// time goes"). In one run, on the same MariaDB and nats-server: (a) the raw JetStream async-publish
// rate, (b) the bridge draining a backlog of the same messages, (c) commit-to-ack latency at a
// steady rate, (d) the bridge idle, (h) (c) again with one-id holes and a long statement elsewhere,
// (i) a trickle over 1, 50 and 200 sources, with the binlog doorbell and polling only, ROW and
// MIXED (statements, CPU, latency, connections), (j) the settled stream (tools/bench_settle.cpp).
// It prints each figure beside the raw rate, since shared machines are noisy.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tools/bench.h"
#include "tools/support/subprocess.h"
#include "config/config.h"
#include "db/connection.h"
#include "db/migrate.h"
#include "nats/jetstream.h"
#include "relay/jetstream_publisher.h"

namespace outbox::bench {


[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "outbox-bench: %s\n", what.c_str());
  std::exit(1);
}

void check(Status s, const char* what) {
  if (!s.isOk()) fail(fmt::format("{}: {}", what, s.message()));
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

int64_t wallMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string payload(int bytes, int64_t stamp, int64_t row) {
  std::string head = row < 0 ? fmt::format("{{\"t\":{},\"pad\":\"", stamp)
                             : fmt::format("{{\"t\":{},\"i\":{},\"pad\":\"", stamp, row);
  int pad = std::max(0, bytes - static_cast<int>(head.size()) - 2);
  return head + std::string(static_cast<size_t>(pad), 'x') + "\"}";
}

int64_t rowOf(const std::string& payload) {
  auto at = payload.find("\"i\":");
  return at == std::string::npos ? -1 : std::atoll(payload.c_str() + at + 4);
}


// Creates a stream, retrying for 30 s: a cluster that has just elected its meta leader may not
// have the peers current that a new R3 stream needs (the error is transient).
void createStream(nats::JetStream& js, const nats::StreamSettings& settings) {
  auto deadline = Clock::now() + std::chrono::seconds(30);
  for (int attempt = 1;; ++attempt) {
    Status s = js.ensureStream(settings);
    if (s.isOk()) return;
    if (!s.isTransient() || Clock::now() > deadline) fail("create stream " + settings.name + ": " + s.message());
    if (attempt == 1) std::fprintf(stderr, "outbox-bench: %s; retrying\n", s.message().c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

// (a) The raw rate: the same messages (README, "Benchmark"), async, pipelined, acked, no
// database: the bridge's subject, payload and headers, its dedup id and both fences included, as
// JetStreamPublisher sends them. `bare`: a Nats-Msg-Id alone, the figure (a) was before
// 2026-12-03, printed beside it so that older notes stay comparable.
double rawPublishRate(const Target& t, const Options& o, bool bare) {
  auto js = check(nats::JetStream::create(*t.nc, std::chrono::milliseconds(10'000), 8192), "jetstream");
  nats::StreamSettings settings;
  settings.name = fmt::format("BENCH_RAW_{}{}", t.id, bare ? "_BARE" : "");
  settings.subject = fmt::format("bench.raw{}.{}.>", bare ? "bare" : "", t.id);
  settings.replicas = t.replicas;
  createStream(*js, settings);
  SourceConfig source;
  source.name = "bench_raw_" + t.id;
  OutboxRow row;
  row.entityType = "account";
  row.op = "upsert";
  row.payload = payload(o.payloadBytes, 0);
  std::vector<nats::AckEvent> acks;
  size_t acked = 0, inFlight = 0;
  auto collectAcks = [&] {
    js->waitForAcks(std::chrono::milliseconds(50));
    acks.clear();
    js->takeAcks(acks);
    for (const auto& a : acks) {
      if (!a.ok) fail("raw publish failed: " + a.error);
    }
    acked += acks.size();
    inFlight -= acks.size();
  };
  const size_t window = 4096;
  auto begin = Clock::now();
  for (int i = 1; i <= o.rows; ++i) {
    while (inFlight >= window) collectAcks();
    const auto version = static_cast<uint64_t>(i);
    row.entityKey = std::to_string(i % 100'000);
    nats::OutgoingMessage m;
    m.subject = fmt::format("bench.raw{}.{}.account", bare ? "bare" : "", t.id);
    m.data = *row.payload;
    m.headers = bare ? decltype(m.headers){{"Nats-Msg-Id", fmt::format("raw:{}", i)}}
                     : bridgeHeaders(source, row, version, 1, version - 1, version > 1);
    check(js->publishAsync(m), "raw publish");
    ++inFlight;
  }
  while (acked < static_cast<size_t>(o.rows)) collectAcks();
  double rate = o.rows / seconds(Clock::now() - begin);
  (void)js->deleteStream(settings.name);
  return rate;
}

std::string writeConfig(const Options& o, const Target& t) {
  Dsn dsn = Dsn::parse("--dsn", o.dsn);
  std::string path = fmt::format("/tmp/outbox-bench-{}.toml", t.source);
  std::ofstream out(path);
  out << fmt::format("[nats]\nurl = \"{}\"\n\n[log]\nlevel = \"info\"\n\n[http]\nlisten = \"127.0.0.1:0\"\n\n",
                     t.url);
  out << fmt::format("[[source]]\nname = \"{}\"\ndsn = \"mysql://{}@{}:{}/{}\"\nreplicas = {}\n", t.source, dsn.user,
                     dsn.host, dsn.port, t.database, t.replicas);
  out << "snapshot_query = \"SELECT id, display_name AS displayName, balance FROM bench_accounts\"\n";
  out << t.sourceConfig;
  return path;
}

// `rows` rows; row j changes item j, or j % keys when keys > 0.
void bulkInsert(db::Connection& conn, const std::string& table, int rows, int payloadBytes, int keys = 0) {
  const std::string body = payload(payloadBytes, 0);
  const int chunk = 2000;
  for (int i = 0; i < rows; i += chunk) {
    std::string sql = "INSERT INTO " + table + " (entity_type, entity_key, op, payload) VALUES ";
    for (int j = i; j < std::min(rows, i + chunk); ++j) {
      if (j > i) sql += ',';
      sql += fmt::format("('item','{}','upsert','{}')", keys > 0 ? j % keys : j, body);
    }
    check(conn.exec(sql), "insert backlog");
  }
}

uint64_t publishedThrough(db::Connection& conn, const std::string& source) {
  auto v = check(conn.queryU64("SELECT published_through FROM outbox_source_state WHERE source = '" + source + "'"),
                 "read state");
  return v.value_or(0);
}

ProcSample sample(pid_t pid) {
  ProcSample s;
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  std::vector<std::string> f;
  while (fields >> field) f.push_back(field);
  if (f.size() > 13) s.cpuSeconds = (std::stod(f[11]) + std::stod(f[12])) / static_cast<double>(sysconf(_SC_CLK_TCK));
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) s.rssMiB = std::stod(line.substr(6)) / 1024.0;
    if (line.rfind("VmHWM:", 0) == 0) s.peakRssMiB = std::stod(line.substr(6)) / 1024.0;
  }
  return s;
}

int httpPortFromLog(const std::string& log) {
  const std::string marker = "http: listening on http://";
  for (int i = 0; i < 500; ++i) {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto at = text.rfind(marker);
    if (at != std::string::npos) return std::atoi(text.c_str() + text.find(':', at + marker.size()) + 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

double sourceMetric(const std::string& page, const std::string& family, const std::string& source) {
  const std::string key = fmt::format("{}{{source=\"{}\"}} ", family, source);
  auto at = page.find(key);
  return at == std::string::npos ? -1 : std::atof(page.c_str() + at + key.size());
}

std::string metricsPage(int port) {
  if (port <= 0) return "";
  httplib::Client client("127.0.0.1", port);
  auto res = client.Get("/metrics");
  return res && res->status == 200 ? res->body : "";
}

// While a run lasts, the bridge's open holes as its /metrics page shows them (every 200 ms), and
// the CPU MariaDB spent: what figure (h) reports beside its latency.
class HoleSampler {
 public:
  HoleSampler(const Target& t, const Options& o) : source_(t.source), mysqlPid_(o.mysqlPid), bridgePid_(t.bridge.pid()) {
    port_ = httpPortFromLog(t.log);
    begin_ = sample(bridgePid_);
    if (mysqlPid_ > 0) mysqlBegin_ = sample(mysqlPid_).cpuSeconds;
    first_ = read();
    started_ = Clock::now();
    thread_ = std::thread([this] {
      while (!stop_) {
        Reading r = read();
        most_.holes = std::max(most_.holes, r.holes);
        most_.ranges = std::max(most_.ranges, r.ranges);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  // One line: the most open hole ids and entries, hole reads a scan, RSS, MariaDB CPU.
  std::string finish() {
    stop_ = true;
    thread_.join();
    const double elapsed = seconds(Clock::now() - started_);
    Reading last = read();
    ProcSample end = sample(bridgePid_);
    const double scans = last.scans - first_.scans;
    std::string reads = last.reads < 0 ? "n/a (before issue 33)" : fmt::format("{:.2f}", (last.reads - first_.reads) / std::max(scans, 1.0));
    std::string ranges = most_.ranges < 0 ? "n/a" : fmt::format("{:.0f}", most_.ranges);
    std::string mysql = mysqlPid_ > 0 ? fmt::format("{:.1f} %", (sample(mysqlPid_).cpuSeconds - mysqlBegin_) / elapsed * 100.0) : "n/a";
    return fmt::format("open hole ids at most {:.0f} (entries at most {}); hole reads a scan {} ({:.0f} scans); bridge RSS "
                       "{:.1f} -> {:.1f} MiB, CPU {:.1f} %; MariaDB CPU {}",
                       most_.holes, ranges, reads, scans, begin_.rssMiB, end.rssMiB,
                       (end.cpuSeconds - begin_.cpuSeconds) / elapsed * 100.0, mysql);
  }

 private:
  struct Reading {
    double holes = -1, ranges = -1, reads = -1, scans = 0;
  };
  Reading read() {
    Reading r;
    const std::string page = metricsPage(port_);
    if (page.empty()) return r;
    r.holes = sourceMetric(page, "outbox_open_holes", source_);
    r.ranges = sourceMetric(page, "outbox_open_hole_ranges", source_);
    r.reads = sourceMetric(page, "outbox_hole_reads_total", source_);
    r.scans = std::max(0.0, sourceMetric(page, "outbox_scans_total", source_));
    return r;
  }
  std::string source_;
  pid_t mysqlPid_;
  pid_t bridgePid_;
  int port_ = 0;
  ProcSample begin_;
  double mysqlBegin_ = 0;
  Reading first_, most_;
  Clock::time_point started_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Starts `outbox-bridge COMMAND --config ...` for t's source. The bridge refuses OUTBOX_BRIDGE_*
// variables its config does not name, so only this source's password is in the environment.
bool startBridge(Subprocess& child, const Target& t, const std::string& password, std::vector<std::string> args,
                 const Options& o, const std::string& log) {
  static std::string exported;
  if (!exported.empty()) unsetenv(exported.c_str());
  exported = fmt::format("OUTBOX_BRIDGE_SOURCE_{}_PASSWORD", upper(t.source));
  setenv(exported.c_str(), password.c_str(), 1);
  args.insert(args.begin(), o.bridge);
  args.insert(args.end(), {"--config", t.config});
  return child.start(args, log);
}

void prepareSource(Target& t, const Options& o, Dsn dsn, db::Connection& admin) {
  t.database = "bench_" + t.id;
  t.source = "bench" + t.id;
  t.table = t.source + "_control_outbox";
  t.stream = "CONTROL_" + upper(t.source);
  t.log = fmt::format("/tmp/outbox-bench-{}.log", t.source);
  check(admin.exec("CREATE DATABASE " + t.database), "create database");
  dsn.database = t.database;
  t.conn = check(db::Connection::open(db::paramsFrom(dsn)), "connect to MariaDB");
  t.config = writeConfig(o, t);
  Subprocess migrate;
  const std::string log = fmt::format("/tmp/outbox-bench-migrate-{}.log", t.source);
  if (!startBridge(migrate, t, dsn.password, {"migrate"}, o, log)) fail("cannot run outbox-bridge migrate");
  while (migrate.running()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  bulkInsert(*t.conn, t.table, o.rows, o.payloadBytes, t.backlogKeys);
}

double cpuOf(pid_t pid) { return pid > 0 ? sample(pid).cpuSeconds : 0.0; }

double cpuOf(const std::vector<pid_t>& pids) {
  double sum = 0;
  for (pid_t pid : pids) sum += cpuOf(pid);
  return sum;
}

// Waits (up to a minute) until MariaDB is at rest: two seconds in a row under 0.5 % of a core.
// What an earlier phase left it (the drain's dirty pages, the purge of a dropped database's undo,
// a prune's deletes) runs for tens of seconds after, and would count in (i)'s small figures: the
// first runs of a format measured 2.6 % for the producer alone, the later ones 1.4 %.
void quiesce(const Options& o) {
  const auto until = Clock::now() + std::chrono::seconds(60);
  int quiet = 0;
  while (quiet < 2 && Clock::now() < until) {
    const double m0 = cpuOf(o.mysqlPid);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    quiet = cpuOf(o.mysqlPid) - m0 < 0.005 ? quiet + 1 : 0;
  }
}

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

// (i)'s reference: the same load into an outbox table (the project's schema) with no bridge
// running — what the producer's own commits cost MariaDB, which every (i) figure includes.
double producerAlone(const Options& o, Dsn dsn, db::Connection& admin, const std::string& runId) {
  dsn.database = fmt::format("bench_t{}p", runId);
  check(admin.exec("CREATE DATABASE " + dsn.database), "create database");
  auto conn = check(db::Connection::open(db::paramsFrom(dsn)), "connect to MariaDB");
  std::vector<std::string> applied;
  check(db::migrate(*conn, {"alone_outbox"}, {}, applied), "create the outbox table");
  quiesce(o);
  const double m0 = cpuOf(o.mysqlPid);
  const auto t0 = Clock::now();
  insertTenASecond(*conn, {"alone_outbox"}, 10 * o.trickleSeconds, o.payloadBytes);
  const double cpu = (cpuOf(o.mysqlPid) - m0) / seconds(Clock::now() - t0) * 100;
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
  };
  auto measure = [&](const std::function<void()>& during) {
    double q0 = questions(), b0 = cpuOf(bridge.pid()), m0 = cpuOf(o.mysqlPid);
    auto t0 = Clock::now();
    during();
    double took = seconds(Clock::now() - t0);
    double q1 = questions(), b1 = cpuOf(bridge.pid()), m1 = cpuOf(o.mysqlPid);
    return Cost{(b1 - b0) / took * 100, (m1 - m0) / took * 100, (q1 - q0 - 1) / took};
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
  std::fflush(stdout);
  for (const auto& stream : streams) (void)js->deleteStream(stream);
  (void)admin.exec("DROP DATABASE " + dsn.database);
}

// (b) Starts t's bridge on its backlog and waits until it has published all of it; the bridge
// keeps running (idle) for (c) and (d). `single` is the single server's target, for the ratios.
double startAndDrain(Target& t, const Options& o, const std::string& password, uint64_t rows) {
  auto begin = Clock::now();
  if (!startBridge(t.bridge, t, password, {"run"}, o, t.log)) fail("cannot start the bridge");
  while (publishedThrough(*t.conn, t.source) < rows) {
    if (!t.bridge.running()) fail("the bridge exited during the drain; see " + t.log);
    if (Clock::now() - begin > std::chrono::minutes(10)) fail("the drain took over 10 minutes");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return seconds(Clock::now() - begin);
}

void drainBacklog(Target& t, const Target& single, const Options& o, const std::string& password) {
  double natsCpu0 = cpuOf(t.natsPids), mysqlCpu0 = cpuOf(o.mysqlPid);
  double drainSeconds = startAndDrain(t, o, password, static_cast<uint64_t>(o.rows));
  t.drain = o.rows / drainSeconds;
  ProcSample afterDrain = sample(t.bridge.pid());
  double natsCpu = cpuOf(t.natsPids) - natsCpu0, mysqlCpu = cpuOf(o.mysqlPid) - mysqlCpu0;
  const bool isSingle = &t == &single;
  std::string ratios = isSingle ? fmt::format("(b)/(a) = {:.2f}   [target >= 0.50]; against the bare rate {:.2f}   "
                                               "[issue 33: >= 0.60]",
                                               t.drain / t.raw, t.drain / t.bare)
                                : fmt::format("{}/{} = {:.2f}   {}/(b) = {:.2f}", t.tag('b'), t.tag('a'),
                                              t.drain / t.raw, t.tag('b'), t.drain / single.drain);
  std::printf("%-4s bridge drain of the backlog, %-10s %9.0f rows/s  %s\n", t.tag('b').c_str(), t.name.c_str(), t.drain,
              ratios.c_str());
  std::string servers = t.natsPids.size() == 1 ? "nats-server" : fmt::format("{} nats-servers", t.natsPids.size());
  std::printf("     where the time goes, CPU seconds in %.1f s of drain: bridge %.1f, mariadbd %.1f, %s %.1f "
              "(of %.1f available); bridge peak RSS %.1f MiB\n",
              drainSeconds, afterDrain.cpuSeconds, mysqlCpu, servers.c_str(), natsCpu,
              drainSeconds * static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN)), afterDrain.peakRssMiB);
  std::printf("     MariaDB CPU per drained row: %.1f us%s\n", mysqlCpu / o.rows * 1e6,
              isSingle ? "  [target <= 10 us]" : "");
  std::fflush(stdout);
}

std::vector<int64_t> insertSteadily(db::Connection& conn, const std::string& table, int rate, int rows,
                                    int payloadBytes, const std::function<std::string(int)>& keyOf) {
  auto interval = std::chrono::duration<double>(1.0 / rate);
  auto next = Clock::now();
  std::vector<int64_t> committedAt(static_cast<size_t>(rows));
  for (int i = 0; i < rows; ++i) {
    check(conn.exec(fmt::format("INSERT INTO {} (entity_type, entity_key, op, payload) VALUES ('item','{}','upsert','{}')",
                                table, keyOf(i), payload(payloadBytes, wallMicros(), i))),
          "insert");
    committedAt[static_cast<size_t>(i)] = wallMicros();
    next += std::chrono::duration_cast<Clock::duration>(interval);
    std::this_thread::sleep_until(next);
  }
  return committedAt;
}

AckLatencies ackLatencies(Target& t, uint64_t before, const std::vector<int64_t>& committedAt, int warmup) {
  const auto total = static_cast<uint64_t>(committedAt.size());
  auto waitStart = Clock::now();
  while (publishedThrough(*t.conn, t.source) < before + total) {
    if (Clock::now() - waitStart > std::chrono::seconds(30)) fail("latency run did not finish");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto js = check(nats::JetStream::create(*t.nc, std::chrono::milliseconds(10'000), 1024), "jetstream");
  // The bridge created the stream from its config: make sure the figures are those of replicas = N.
  auto state = check(js->streamState(t.stream), "stream state");
  if (state.replicas != t.replicas) {
    fail(fmt::format("stream {} has {} replica(s), not {}", t.stream, state.replicas, t.replicas));
  }
  auto messages = check(js->readRange(t.stream, "control." + t.source + ".>", before + 1, before + total,
                                      std::chrono::milliseconds(10'000)),
                        "read stream");
  AckLatencies out;
  for (const auto& m : messages) {
    auto at = m.data.find("\"t\":");
    const int64_t n = rowOf(m.data);
    if (at == std::string::npos || n < 0 || static_cast<uint64_t>(n) >= total) continue;
    const int64_t stored = m.timestampNanos / 1000;
    const double latency = static_cast<double>(stored - committedAt[static_cast<size_t>(n)]) / 1000.0;
    if (n < warmup) {
      out.waking.push_back(latency);
      continue;
    }
    out.steady.push_back(latency);
    out.fromInsert.push_back(static_cast<double>(stored - std::stoll(m.data.substr(at + 4))) / 1000.0);
  }
  return out;
}

// (c) steady rate, default config: commit-to-ack from the moment the producer's autocommit
// INSERT returned (its commit done) to the time nats-server stored the message. The time before
// the INSERT also travels in the payload, for the producer's view (insert to ack).
// `figure` names the run: 'c', or 'h' for (h) (the same rows with auto_increment_increment = 3,
// a SELECT SLEEP(600) running elsewhere): returns the p99.
double commitToAck(Target& t, const Target& single, const Options& o, char figure = 'c') {
  uint64_t before = publishedThrough(*t.conn, t.source);
  HoleSampler holes(t, o);
  // The first second wakes the relay from its idle poll_interval: the rows committed then wait up
  // to that long. They are reported apart; the target is about the steady flow after them.
  const int warmup = o.latencyRate;
  const int total = o.latencyRate * o.latencySeconds + warmup;
  const auto committedAt = insertSteadily(*t.conn, t.table, o.latencyRate, total, o.payloadBytes,
                                          [](int i) { return std::to_string(i); });
  auto [latencies, fromInsert, waking] = ackLatencies(t, before, committedAt, warmup);
  const double p99 = percentile(latencies, 0.99);
  std::string versus = &t == &single && figure == 'c'
                           ? ""
                           : fmt::format("   {} p99 / (c) p99 = {:.2f}", t.tag(figure), p99 / single.p99);
  std::printf("%-4s commit-to-ack at %d rows/s, %-10s (%s): p50 %.1f ms, p99 %.1f ms, max %.1f ms  [target %s]  (%zu "
              "rows)%s\n",
              t.tag(figure).c_str(), o.latencyRate, t.name.c_str(),
              figure == 'c' ? "default config: poll_interval 250ms, polls follow the flow"
                            : "auto_increment_increment = 3, a SELECT SLEEP(600) elsewhere: every gap a hole",
              percentile(latencies, 0.5), p99, percentile(latencies, 1.0),
              figure == 'c' ? "p99 <= 25 ms" : "p99 <= 2 x (c) p99", latencies.size(), versus.c_str());
  std::printf("     from before the producer's INSERT (its commit included): p50 %.1f ms, p99 %.1f ms; the first "
              "second after idle (waking from poll_interval): max %.1f ms\n",
              percentile(fromInsert, 0.5), percentile(fromInsert, 0.99), percentile(waking, 1.0));
  std::printf("     %s\n", holes.finish().c_str());
  std::fflush(stdout);
  return p99;
}

}  // namespace outbox::bench

int main(int argc, char** argv) {
  using namespace outbox;
  using namespace outbox::bench;
  spdlog::set_level(spdlog::level::warn);  // the figures on stdout, not the NATS client's connects
  Options o;
  std::string clusterUrls;
  std::vector<pid_t> clusterPids;
  CLI::App app{"outbox-bench: the raw JetStream rate and the bridge, side by side, in one run"};
  app.add_option("--dsn", o.dsn, "mysql://USER@HOST:PORT/ANYDB (a scratch database is created)")->required();
  app.add_option("--password", o.password, "database password (also passed to the bridge)");
  app.add_option("--nats", o.natsUrl, "nats://HOST:PORT")->required();
  app.add_option("--bridge", o.bridge, "the outbox-bridge binary")->required();
  app.add_option("--nats-cluster", clusterUrls,
                 "nats://HOST:PORT,nats://HOST:PORT,... a 3-node cluster: also measure (a), (b) and (c) there, "
                 "with streams of replicas = 3, beside the single server");
  app.add_option("--nats-cluster-pid", clusterPids,
                 "the cluster's nats-server pids (repeat the option), to report their CPU time");
  app.add_option("--rows", o.rows, "backlog rows (default 200000)");
  app.add_option("--payload-bytes", o.payloadBytes, "payload size (default 200)");
  app.add_option("--latency-rate", o.latencyRate, "rows/s in the latency run (default 1000)");
  app.add_option("--latency-seconds", o.latencySeconds, "length of the latency run (default 10)");
  app.add_option("--idle-seconds", o.idleSeconds, "length of the idle sample (default 5)");
  app.add_option("--snapshot-records", o.snapshotRecords, "records in the snapshot run (default 1000000; 0: skip)");
  app.add_option("--trickle-seconds", o.trickleSeconds,
                 "length of each trickle run of (i), 10 rows/s over 1, 50 and 200 sources (default 20; 0: skip)");
  app.add_option("--trickle-sources", o.trickleSources, "the source counts of (i)'s doorbell runs (default 1 50 200)");
  app.add_option("--binlog-formats", o.binlogFormats, "the binary log formats (i) runs under (default ROW MIXED)")
      ->check(CLI::IsMember({"ROW", "MIXED", "STATEMENT"}));
  app.add_option("--holes-seconds", o.holesSeconds,
                 "length of (h), one-id holes beside a SELECT SLEEP(600) (default: --latency-seconds)");
  app.add_option("--settle-seconds", o.settleSeconds,
                 "length of each steady run of (j), the settled stream, settling on and off (default 10; 0: skip)");
  app.add_option("--settle-keys", o.settleKeys, "the keys (j)'s rows change, one at random a row (default 10000)")
      ->check(CLI::PositiveNumber);
  app.add_option("--settle-window-ms", o.settleWindowMs, "(j)'s settle window, ms (default 1000)")
      ->check(CLI::Range(1, 3'600'000));
  app.add_flag("--settle-drain,!--no-settle-drain", o.settleDrain,
               "(j)'s drains of the backlog with settling on and off (default on; --no-settle-drain skips them)");
  app.add_option("--prune-rows", o.pruneRows, "published rows in the prune run (default 500000; 0: skip)");
  app.add_option("--node-poller", o.nodePoller, "tools/node-poller (installed), to compare with a batched Node.js poller");
  app.add_option("--nats-pid", o.natsPid, "nats-server's pid, to report its CPU time");
  app.add_option("--mysql-pid", o.mysqlPid, "mariadbd's pid, to report its CPU time");
  CLI11_PARSE(app, argc, argv);

  db::initLibrary();
  Dsn dsn = Dsn::parse("--dsn", o.dsn);
  if (!o.password.empty()) dsn.password = o.password;
  const std::string runId = fmt::format("{:x}", std::random_device{}() & 0xffffff);

  // The single server always; the cluster, when given, measured right after it on each figure.
  std::vector<std::unique_ptr<Target>> targets;
  targets.push_back(std::make_unique<Target>());
  Target& single = *targets.front();
  single.name = "single";
  single.url = o.natsUrl;
  if (o.natsPid > 0) single.natsPids = {o.natsPid};
  single.id = runId;
  if (!clusterUrls.empty()) {
    auto& cluster = *targets.emplace_back(std::make_unique<Target>());
    cluster.name = "R3 cluster";
    cluster.mark = "'";
    cluster.url = clusterUrls;
    cluster.replicas = 3;
    cluster.natsPids = clusterPids;
    cluster.id = runId + "r3";
  }

  auto admin = check(db::Connection::open(db::paramsFrom(dsn)), "connect to MariaDB");
  for (auto& t : targets) {
    t->nc = check(nats::Connection::connect(NatsConfig{.url = t->url}, "outbox-bench"),
                  ("connect to " + t->url).c_str());
  }

  std::printf("outbox-bench: %d rows of %d-byte payloads; MariaDB and nats-server on this machine (%ld cores)%s\n\n",
              o.rows, o.payloadBytes, sysconf(_SC_NPROCESSORS_ONLN),
              targets.size() > 1 ? "; beside it a 3-node nats-server cluster on this machine, streams with replicas = 3"
                                 : "");

  for (auto& t : targets) {
    t->raw = rawPublishRate(*t, o, /*bare=*/false);
    t->bare = rawPublishRate(*t, o, /*bare=*/true);
    std::string versus = t.get() == &single ? "" : fmt::format("   {}/(a) = {:.2f}", t->tag('a'), t->raw / single.raw);
    std::printf("%-4s raw JetStream async publish, %-10s %9.0f msg/s%s\n", t->tag('a').c_str(), t->name.c_str(), t->raw,
                versus.c_str());
    std::printf("     the same payloads with a Nats-Msg-Id alone (no outbox headers, no fences): %.0f msg/s\n", t->bare);
    std::fflush(stdout);
  }

  for (auto& t : targets) prepareSource(*t, o, dsn, *admin);
  for (auto& t : targets) drainBacklog(*t, single, o, dsn.password);

  // (d) before (c): the bridge has drained and sits idle.
  ProcSample idleStart = sample(single.bridge.pid());
  std::this_thread::sleep_for(std::chrono::seconds(o.idleSeconds));
  ProcSample idleEnd = sample(single.bridge.pid());
  double idleCpu = (idleEnd.cpuSeconds - idleStart.cpuSeconds) / o.idleSeconds * 100.0;

  for (auto& t : targets) t->p99 = commitToAck(*t, single, o);
  std::printf("(d)  idle: %.2f%% of a core, RSS %.1f MiB  [targets < 1%%, <= 32 MiB]\n", idleCpu, idleEnd.rssMiB);
  std::fflush(stdout);

  // (h) (c) again with one-id holes a long statement elsewhere could hold (issue 19): ids 3 apart,
  // so every gap between two committed ids is an open hole, and a SELECT SLEEP(600) on another
  // connection throughout. The bridge must not let it keep them open, nor read them all each poll.
  {
    check(single.conn->exec("SET SESSION auto_increment_increment = 3"), "auto_increment_increment");
    auto sleeper = check(db::Connection::open(db::paramsFrom(dsn)), "connect to MariaDB");
    auto id = check(sleeper->queryU64("SELECT CONNECTION_ID()"), "connection id");
    std::thread sleeping([&] { (void)sleeper->exec("DO SLEEP(600)"); });
    auto plugin = check(admin->queryU64("SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = "
                                        "'METADATA_LOCK_INFO' AND PLUGIN_STATUS = 'ACTIVE'"),
                        "plugins");
    std::printf("(h)  the server %s metadata locks (metadata_lock_info %s)\n", plugin.value_or(0) ? "shows" : "does not show",
                plugin.value_or(0) ? "loaded" : "not loaded");
    Options holes = o;
    if (o.holesSeconds > 0) holes.latencySeconds = o.holesSeconds;
    commitToAck(single, single, holes, 'h');
    (void)admin->exec(fmt::format("KILL QUERY {}", id.value_or(0)));
    sleeping.join();
    check(single.conn->exec("SET SESSION auto_increment_increment = 1"), "auto_increment_increment");
  }

  // The cluster's part ends here; (e), (g) and (f) run on the single server.
  for (size_t i = 1; i < targets.size(); ++i) {
    Target& t = *targets[i];
    t.bridge.terminate(std::chrono::seconds(10));
    auto js = check(nats::JetStream::create(*t.nc, std::chrono::milliseconds(10'000), 16), "jetstream");
    (void)js->deleteStream(t.stream);
    (void)admin->exec("DROP DATABASE " + t.database);
  }

  // From here on the single server's source, under the names the runs below always used.
  const std::string& database = single.database;
  const std::string& source = single.source;
  const std::string& table = single.table;
  const std::string& log = single.log;
  const std::string& stream = single.stream;
  db::Connection* conn = single.conn.get();
  Subprocess& bridge = single.bridge;
  const double drain = single.drain;
  auto js = check(nats::JetStream::create(*single.nc, std::chrono::milliseconds(10'000), 1024), "jetstream");
  dsn.database = database;

  // (e) A snapshot of snapshotRecords records, streamed to a client that reads as fast as it can.
  if (o.snapshotRecords > 0) {
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

  bridge.terminate(std::chrono::seconds(10));

  // (i) The trickle, while no other bridge runs: the doorbell over 1, 50 and 200 sources, then
  // polling only, under each binary log format (SET GLOBAL, set back after: the sessions that
  // start meanwhile, the producer's and the bridge's, take it).
  if (o.trickleSeconds > 0) {
    std::printf("(i)  a trickle [targets, ROW and MIXED alike: 1 source at 10 rows/s, the bridge adds <= 1.2x the "
                "producer's own MariaDB CPU, <= 5 statements a row; 50 sources at rest: MariaDB <= 0.5%%, <= 2 "
                "statements/s; 50 or 200 sources at 10 rows/s: <= 1.5x the producer's own, p99 <= 15 ms; 200 sources "
                "<= 20 connections]\n");
    Dsn server = Dsn::parse("--dsn", o.dsn);
    server.password = o.password;
    auto before = check(admin->query("SELECT @@global.binlog_format"), "binlog_format");
    before.next();
    const std::string formatBefore(before.text(0));
    for (const auto& format : o.binlogFormats) {
      check(admin->exec(fmt::format("SET GLOBAL binlog_format = '{}'", format)), "SET GLOBAL binlog_format");
      const double producerCpu = producerAlone(o, server, *admin, runId + format.substr(0, 1));
      std::printf("(i)  %-5s the producer alone, 10 one-row INSERTs a second, no bridge: MariaDB %.2f%% (every MariaDB "
                  "figure below includes it)\n",
                  format.c_str(), producerCpu);
      std::fflush(stdout);
      std::vector<std::pair<int, const char*>> runs;
      for (int n : o.trickleSources) runs.emplace_back(n, "auto");
      runs.emplace_back(1, "poll");
      runs.emplace_back(50, "poll");
      for (auto [n, wake] : runs) trickle(o, server, *admin, *single.nc, runId, n, wake, format, producerCpu);
    }
    (void)admin->exec(fmt::format("SET GLOBAL binlog_format = '{}'", formatBefore));
  }

  // (j) The settled stream, while no other bridge runs: a source settling and one not, in turn.
  if (o.settleSeconds > 0) settleFigures(o, dsn, *admin, runId);

  // (g) The same backlog through a batched Node.js poller (mysql2 + nats.js), same servers.
  if (!o.nodePoller.empty()) {
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
    check(js->ensureStream(settings), "create the node poller's stream");
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
    (void)js->deleteStream(settings.name);
    std::fflush(stdout);
  }

  // (f) Prune: a table of pruneRows published rows, old enough, deleted by `outbox-bridge prune`.
  if (o.pruneRows > 0) {
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
  (void)js->deleteStream(stream);
  (void)admin->exec("DROP DATABASE " + database);
  return 0;
}

// outbox-bench's helpers (tools/bench.h): failing, payloads, a process's CPU and memory, the
// bridge's log and /metrics page, a target's database and source, and MariaDB at rest.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <httplib.h>
#include <fmt/format.h>

#include "tools/bench.h"
#include "tools/support/subprocess.h"
#include "config/config.h"
#include "db/connection.h"

namespace outbox::bench {
namespace {

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

}  // namespace

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

void bulkInsert(db::Connection& conn, const std::string& table, int rows, int payloadBytes, int keys) {
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

CpuReading readCpu(pid_t pid) {
  CpuReading r;
  if (pid <= 0) return r;
  r.tickSeconds = sample(pid).cpuSeconds;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator(fmt::format("/proc/{}/task", pid), ec)) {
    std::ifstream in(task.path() / "schedstat");
    uint64_t nanos = 0;
    if (in >> nanos) r.taskNanos[std::atoi(task.path().filename().c_str())] = nanos;
  }
  return r;
}

ThreadsSpent threadsSpentBetween(const CpuReading& a, const CpuReading& b) {
  ThreadsSpent out;
  for (const auto& [tid, before] : a.taskNanos) {
    auto after = b.taskNanos.find(tid);
    if (after == b.taskNanos.end() || after->second < before) out.someEnded = true;
  }
  for (const auto& [tid, after] : b.taskNanos) {
    auto before = a.taskNanos.find(tid);
    // Started since (or its id taken again by a new thread): all of its account is new.
    out.nanos[tid] = before == a.taskNanos.end() || after < before->second ? after : after - before->second;
  }
  return out;
}

double cpuSecondsBetween(const CpuReading& a, const CpuReading& b) {
  const ThreadsSpent spent = threadsSpentBetween(a, b);
  if (a.taskNanos.empty() || spent.someEnded) return b.tickSeconds - a.tickSeconds;
  uint64_t nanos = 0;
  for (const auto& [tid, n] : spent.nanos) nanos += n;
  return static_cast<double>(nanos) / 1e9;
}

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

}  // namespace outbox::bench

#pragma once

// outbox-bench's shared parts: the options, a target (a database, a source, its stream and its
// bridge), the helpers the figures measure with (tools/bench_support.cpp) and the figures, one
// file each or a few (tools/bench.cpp runs them in turn).

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tools/support/subprocess.h"
#include "common/status.h"
#include "config/config.h"
#include "db/connection.h"
#include "nats/jetstream.h"

namespace outbox::bench {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string dsn;
  std::string password;
  std::string natsUrl;
  std::string bridge;
  int rows = 200'000;
  int payloadBytes = 200;
  int latencyRate = 1000;
  int latencySeconds = 10;
  int idleSeconds = 5;
  int snapshotRecords = 1'000'000;
  int pruneRows = 500'000;
  int trickleSeconds = 20;  // (i): each trickle run; 0: skip (i)
  std::vector<int> trickleSources{1, 50, 200};   // (i): the doorbell over these many sources
  std::vector<std::string> binlogFormats{"ROW", "MIXED"};  // (i): each run under each (SET GLOBAL)
  int holesSeconds = 0;     // (h): its length; 0: latencySeconds
  int settleSeconds = 10;   // (j): the length of each steady run; 0: skip (j)
  int settleKeys = 10'000;  // (j): the keys the rows change, one at random a row
  int settleWindowMs = 1000;  // (j): the source's `settle`
  bool settleDrain = true;    // (j): the drain (b) with settling on and off too
  std::string nodePoller;  // the directory of tools/node-poller; empty: skip the comparison
  pid_t natsPid = 0;   // for "where the time goes"; 0: not shown
  pid_t mysqlPid = 0;
};

// Where a measurement runs: the single nats-server, or the cluster with R3 streams. Each target
// has its own streams, database and source (named after `id`), its own bridge, and its figures.
struct Target {
  std::string name;  // "single", "R3 cluster"
  std::string mark;  // "" or "'": (a) and (a')
  std::string url;   // one URL, or a cluster's list
  int replicas = 1;
  std::vector<pid_t> natsPids;  // for "where the time goes"; empty: not shown
  std::string id;               // runId, or runId + "r3"
  std::string sourceConfig;     // more lines of the source's [[source]] table (e.g. settle = "1s")
  int backlogKeys = 0;          // the backlog's rows change keys 0 .. backlogKeys - 1 in turn; 0: a key a row
  std::unique_ptr<nats::Connection> nc;
  std::string database, source, table, config, log, stream;
  std::unique_ptr<db::Connection> conn;
  Subprocess bridge;
  double raw = 0;    // (a)
  double bare = 0;   // (a) with a Nats-Msg-Id alone
  double drain = 0;  // (b)
  double p99 = 0;    // (c)

  std::string tag(char figure) const { return fmt::format("({}{})", figure, mark); }
};

[[noreturn]] void fail(const std::string& what);

template <typename T>
T check(Result<T> r, const char* what) {
  if (!r.isOk()) fail(fmt::format("{}: {}", what, r.status().message()));
  return std::move(r).value();
}

void check(Status s, const char* what);

std::string upper(std::string s);
double seconds(Clock::duration d);
int64_t wallMicros();
// A JSON payload of exactly `bytes` bytes: {"t":stamp,"i":row,"pad":"xx..."} ("i" when row >= 0).
std::string payload(int bytes, int64_t stamp, int64_t row = -1);
// The "i" of payload(), or -1.
int64_t rowOf(const std::string& payload);
double percentile(std::vector<double> v, double p);

struct ProcSample {
  double cpuSeconds = 0;
  double rssMiB = 0;
  double peakRssMiB = 0;
};
ProcSample sample(pid_t pid);
int httpPortFromLog(const std::string& log);
// The value of `family`{source="..."} on the bridge's /metrics page, or -1 when it is not there.
double sourceMetric(const std::string& page, const std::string& family, const std::string& source);
// The bridge's /metrics page ("" when it does not answer).
std::string metricsPage(int port);

uint64_t publishedThrough(db::Connection& conn, const std::string& source);
// `rows` rows; row j changes item j, or j % keys when keys > 0.
void bulkInsert(db::Connection& conn, const std::string& table, int rows, int payloadBytes, int keys = 0);
// Starts `outbox-bridge COMMAND --config ...` (`args`: the command and its flags) for t's source,
// logging to `log`; false when it cannot start.
bool startBridge(Subprocess& child, const Target& t, const std::string& password, std::vector<std::string> args,
                 const Options& o, const std::string& log);
// The CPU seconds a process (none when pid <= 0: 0), or processes, spent so far.
double cpuOf(pid_t pid);
// A process's CPU time to the nanosecond: the scheduler's own account of each of its threads
// (/proc/PID/task/TID/schedstat), for figures that a tick of /proc/PID/stat (10 ms) blurs — (i)'s
// producer costs MariaDB 80-100 ms in a 20 s run, so a tick either way moved its ratios by a tenth.
// A thread that ended between two readings took its account with it: the ticks are used then.
struct CpuReading {
  std::map<int, uint64_t> taskNanos;  // thread id -> nanoseconds on a CPU
  double tickSeconds = 0;
};
CpuReading readCpu(pid_t pid);
// What each thread of reading `b` spent since reading `a` of one process (a thread started since:
// all of its account), and whether a thread of `a` ended meanwhile (its account went with it).
struct ThreadsSpent {
  std::map<int, uint64_t> nanos;
  bool someEnded = false;
};
ThreadsSpent threadsSpentBetween(const CpuReading& a, const CpuReading& b);
// The CPU seconds spent between readings `a` and `b` of one process.
double cpuSecondsBetween(const CpuReading& a, const CpuReading& b);
double cpuOf(const std::vector<pid_t>& pids);
// A database and source of t's own (bench_<id>, bench<id>), migrated, with a backlog of o.rows.
void prepareSource(Target& t, const Options& o, Dsn dsn, db::Connection& admin);
// Waits (up to a minute) until MariaDB is at rest (o.mysqlPid; none: at once).
void quiesce(const Options& o);
// Starts t's bridge (`run`) on its backlog and waits until it has published through `rows`:
// the seconds it took. The bridge keeps running.
double startAndDrain(Target& t, const Options& o, const std::string& password, uint64_t rows);

// `rows` one-row autocommit INSERTs into `table`, `rate` a second, row i changing item keyOf(i)
// with payload(bytes, time before the INSERT, i): the wall time (us) each INSERT returned (its
// commit done), by row.
std::vector<int64_t> insertSteadily(db::Connection& conn, const std::string& table, int rate, int rows,
                                    int payloadBytes, const std::function<std::string(int)>& keyOf);

// Commit-to-ack of a steady run: for each of t's main-stream messages from sequence `before` + 1
// on, one per row, the time nats-server stored it less committedAt of its row (payload's "i"), ms.
struct AckLatencies {
  std::vector<double> steady;      // the rows from `warmup` on
  std::vector<double> fromInsert;  // the same from before the INSERT (the payload's "t")
  std::vector<double> waking;      // the first `warmup` rows (the relay waking from poll_interval)
};
AckLatencies ackLatencies(Target& t, uint64_t before, const std::vector<int64_t>& committedAt, int warmup);

// The figures, in the order tools/bench.cpp runs them. Each prints its lines on stdout.
// (a) The raw rate of t's server: messages a second (tools/bench_throughput.cpp).
double rawPublishRate(const Target& t, const Options& o, bool bare);
// (b) t's bridge drains its backlog (t.drain) and keeps running (tools/bench_throughput.cpp).
void drainBacklog(Target& t, const Target& single, const Options& o, const std::string& password);
// (c), or (h) when `figure` is 'h': commit-to-ack at a steady rate, its p99 (tools/bench_latency.cpp).
double commitToAck(Target& t, const Target& single, const Options& o, char figure = 'c');
// (h) (c) again on the single server with one-id holes (tools/bench_latency.cpp).
void holesFigure(Target& single, const Options& o, const Dsn& dsn, db::Connection& admin);
// (e) A snapshot through the single server's running bridge (tools/bench_single_server.cpp).
void snapshotFigure(Target& single, const Options& o);
// (i) The trickle, with no bridge running (tools/bench_trickle.cpp).
void trickleFigures(const Options& o, db::Connection& admin, nats::Connection& nc, const std::string& runId);
// (j) The settled stream (tools/bench_settle.cpp).
void settleFigures(const Options& o, const Dsn& dsn, db::Connection& admin, const std::string& runId);
// (g) The backlog through a batched Node.js poller; `dsn` names the single server's database
// (tools/bench_single_server.cpp).
void nodePollerFigure(Target& single, const Options& o, const Dsn& dsn, nats::JetStream& js, const std::string& runId);
// (f) A prune of o.pruneRows published rows of the single server's source (tools/bench_single_server.cpp).
void pruneFigure(Target& single, const Options& o, const Dsn& dsn);

}  // namespace outbox::bench

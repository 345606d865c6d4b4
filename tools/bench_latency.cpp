// outbox-bench (c) and (h): commit-to-ack at a steady rate, then the same with one-id holes and a
// long statement elsewhere, with the bridge's open holes and MariaDB's CPU beside.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "tools/bench.h"
#include "db/connection.h"
#include "nats/jetstream.h"

namespace outbox::bench {
namespace {

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

}  // namespace

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
double commitToAck(Target& t, const Target& single, const Options& o, char figure) {
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

// (h) (c) again with one-id holes a long statement elsewhere could hold (issue 19): ids 3 apart,
// so every gap between two committed ids is an open hole, and a SELECT SLEEP(600) on another
// connection throughout. The bridge must not let it keep them open, nor read them all each poll.
void holesFigure(Target& single, const Options& o, const Dsn& dsn, db::Connection& admin) {
  check(single.conn->exec("SET SESSION auto_increment_increment = 3"), "auto_increment_increment");
  auto sleeper = check(db::Connection::open(db::paramsFrom(dsn)), "connect to MariaDB");
  auto id = check(sleeper->queryU64("SELECT CONNECTION_ID()"), "connection id");
  std::thread sleeping([&] { (void)sleeper->exec("DO SLEEP(600)"); });
  auto plugin = check(admin.queryU64("SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = "
                                     "'METADATA_LOCK_INFO' AND PLUGIN_STATUS = 'ACTIVE'"),
                      "plugins");
  std::printf("(h)  the server %s metadata locks (metadata_lock_info %s)\n", plugin.value_or(0) ? "shows" : "does not show",
              plugin.value_or(0) ? "loaded" : "not loaded");
  Options holes = o;
  if (o.holesSeconds > 0) holes.latencySeconds = o.holesSeconds;
  commitToAck(single, single, holes, 'h');
  (void)admin.exec(fmt::format("KILL QUERY {}", id.value_or(0)));
  sleeping.join();
  check(single.conn->exec("SET SESSION auto_increment_increment = 1"), "auto_increment_increment");
}

}  // namespace outbox::bench

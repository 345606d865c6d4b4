// outbox-bench: the project's benchmark (its targets: docs/design.md, "Performance, and where the
// time goes"). In one run, on the same MariaDB and nats-server: (a) the raw JetStream async-publish
// rate, (b) the bridge draining a backlog of the same messages (tools/bench_throughput.cpp), (c)
// commit-to-ack latency at a steady rate, (h) (c) again with one-id holes and a long statement
// elsewhere (tools/bench_latency.cpp), (d) the bridge idle, (e) a snapshot, (g) a batched Node.js
// poller, (f) a prune (tools/bench_single_server.cpp), (i) a trickle over 1, 50 and 200 sources,
// with the binlog doorbell and polling only, ROW and MIXED (statements, CPU, latency, connections;
// tools/bench_trickle.cpp), (j) the settled stream (tools/bench_settle.cpp). It prints each figure
// beside the raw rate, since shared machines are noisy. This file: the options and the order of
// the figures.

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tools/bench.h"
#include "config/config.h"
#include "db/connection.h"
#include "nats/jetstream.h"

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

  // (h) (c) again with one-id holes a long statement elsewhere could hold (issue 19).
  holesFigure(single, o, dsn, *admin);

  // The cluster's part ends here; (e), (g) and (f) run on the single server.
  for (size_t i = 1; i < targets.size(); ++i) {
    Target& t = *targets[i];
    t.bridge.terminate(std::chrono::seconds(10));
    auto js = check(nats::JetStream::create(*t.nc, std::chrono::milliseconds(10'000), 16), "jetstream");
    (void)js->deleteStream(t.stream);
    (void)admin->exec("DROP DATABASE " + t.database);
  }

  // From here on the single server's source.
  auto js = check(nats::JetStream::create(*single.nc, std::chrono::milliseconds(10'000), 1024), "jetstream");
  dsn.database = single.database;

  if (o.snapshotRecords > 0) snapshotFigure(single, o);  // (e)

  single.bridge.terminate(std::chrono::seconds(10));

  // (i) The trickle, while no other bridge runs.
  if (o.trickleSeconds > 0) trickleFigures(o, *admin, *single.nc, runId);

  // (j) The settled stream, while no other bridge runs: a source settling and one not, in turn.
  if (o.settleSeconds > 0) settleFigures(o, dsn, *admin, runId);

  if (!o.nodePoller.empty()) nodePollerFigure(single, o, dsn, *js, runId);  // (g)
  if (o.pruneRows > 0) pruneFigure(single, o, dsn);                          // (f)
  (void)js->deleteStream(single.stream);
  (void)admin->exec("DROP DATABASE " + single.database);
  return 0;
}

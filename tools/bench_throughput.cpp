// outbox-bench (a) and (b): the raw JetStream async-publish rate, and the bridge draining a
// backlog of the same messages, each beside the single server's.

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "tools/bench.h"
#include "config/config.h"
#include "nats/jetstream.h"
#include "relay/jetstream_publisher.h"

namespace outbox::bench {
namespace {

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

}  // namespace

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

}  // namespace outbox::bench

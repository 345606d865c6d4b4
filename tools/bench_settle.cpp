// outbox-bench (j): the settled stream (README, "The settled stream"; docs/design.md, "The
// settled stream (issue 36)"). Two sources of their own on one database, each with a backlog of
// o.rows rows over o.settleKeys keys, measured in turn with no other bridge running: one with
// `settle` (the window o.settleWindowMs), one without. For each: (b)'s drain of the backlog, then
// (c)'s steady run — o.latencyRate rows/s for a first second apart and o.settleSeconds after it,
// each row changing one of o.settleKeys keys at random — its main stream's commit-to-ack beside the
// other's, and, settling, the time from a burst's last commit to its settled message.

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "tools/bench.h"

namespace outbox::bench {
namespace {

// One settled message as the subscriber received it.
struct Received {
  int64_t row = -1;         // the producer's row it carries (its payload's "i")
  std::string key;          // its Outbox-Entity-Key
  int64_t receivedAt = 0;   // wall us, when the subscriber had it
  int64_t storedAt = 0;     // wall us, when nats-server stored it
};

struct RunFigures {
  double drainRate = 0;     // rows/s; 0: not measured
  AckLatencies main;
  double bridgeCpu = 0;     // % of a core over the steady run
  std::vector<double> settled, settledWaking, toStore;  // ms
  size_t bursts = 0, burstsSettled = 0, messages = 0;
  double early = 0, squashed = 0;
};

// The window as the config spells it: "1s", or "1500ms".
std::string windowText(const Options& o) {
  return o.settleWindowMs % 1000 == 0 ? fmt::format("{}s", o.settleWindowMs / 1000) : fmt::format("{}ms", o.settleWindowMs);
}

void setUp(Target& t, const Options& o, const Dsn& dsn, db::Connection& admin, const std::string& id, bool settle) {
  t.name = settle ? "settle on" : "settle off";
  t.url = o.natsUrl;
  t.id = id;
  t.backlogKeys = o.settleKeys;
  if (settle) t.sourceConfig = fmt::format("settle = \"{}\"\n", windowText(o));
  t.nc = check(nats::Connection::connect(NatsConfig{.url = t.url}, "outbox-bench"), "connect to nats-server");
  Options backlog = o;
  backlog.rows = o.settleDrain ? o.rows : 0;
  prepareSource(t, backlog, dsn, admin);
}

std::string settledStreamOf(const Target& t) { return t.stream + "_SETTLED"; }

// Waits until `done` holds, failing after `limit` or when the bridge exits.
void waitFor(Target& t, std::chrono::seconds limit, const char* what, const std::function<bool()>& done) {
  const auto begin = Clock::now();
  while (!done()) {
    if (!t.bridge.running()) fail(fmt::format("the bridge exited while {}; see {}", what, t.log));
    if (Clock::now() - begin > limit) fail(fmt::format("{} took over {} s; see {}", what, limit.count(), t.log));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

RunFigures measure(Target& t, const Options& o, const std::string& password, bool settle) {
  RunFigures f;
  quiesce(o);
  const double drainSeconds = startAndDrain(t, o, password, o.settleDrain ? static_cast<uint64_t>(o.rows) : 0);
  if (o.settleDrain) f.drainRate = o.rows / drainSeconds;
  const int port = httpPortFromLog(t.log);
  auto js = check(nats::JetStream::create(*t.nc, std::chrono::milliseconds(10'000), 1024), "jetstream");
  std::unique_ptr<nats::Subscription> sub;
  if (settle) {
    // The backlog settled (nothing pending), then a subscriber from the settled stream's end on.
    waitFor(t, std::chrono::seconds(60), "settling the backlog", [&] {
      const std::string page = metricsPage(port);
      auto stream = check(js->findStream(settledStreamOf(t)), "settled stream");
      return stream.has_value() && sourceMetric(page, "outbox_settle_pending_keys", t.source) == 0;
    });
    const uint64_t last = check(js->streamState(settledStreamOf(t)), "settled stream state").lastSeq;
    sub = check(js->subscribe(settledStreamOf(t), fmt::format("control.{}_settled.>", t.source), last + 1), "subscribe");
  }
  // The load: a first second apart (the relay wakes from poll_interval), then o.settleSeconds.
  const int warmup = o.latencyRate;
  const int total = warmup + o.latencyRate * o.settleSeconds;
  std::mt19937 random(36);  // the same keys in both runs
  std::uniform_int_distribution<int> anyKey(0, o.settleKeys - 1);
  std::vector<int> keys(static_cast<size_t>(total));
  for (int& k : keys) k = anyKey(random);
  std::vector<bool> lastOfKey(static_cast<size_t>(total), false);
  {
    std::map<int, int> lastRow;
    for (int i = 0; i < total; ++i) lastRow[keys[static_cast<size_t>(i)]] = i;
    for (auto [key, row] : lastRow) lastOfKey[static_cast<size_t>(row)] = true;
  }
  std::mutex mu;
  std::vector<Received> received;  // guarded by mu
  std::atomic<size_t> finals{0};   // the keys whose last row of the run was received
  std::atomic<bool> stop{false};
  std::thread subscriber;
  if (sub) {
    subscriber = std::thread([&] {
      while (!stop) {
        auto next = check(sub->next(std::chrono::milliseconds(100)), "settled stream");
        if (!next) continue;
        const int64_t at = wallMicros();
        auto key = next->headers.find("Outbox-Entity-Key");
        Received r{rowOf(next->data), key == next->headers.end() ? "" : key->second, at, next->timestampNanos / 1000};
        if (r.row >= 0 && r.row < total && lastOfKey[static_cast<size_t>(r.row)]) ++finals;
        std::lock_guard lock(mu);
        received.push_back(std::move(r));
      }
    });
  }
  const uint64_t before = publishedThrough(*t.conn, t.source);
  const double cpu0 = sample(t.bridge.pid()).cpuSeconds;
  const auto begin = Clock::now();
  const auto committedAt = insertSteadily(*t.conn, t.table, o.latencyRate, total, o.payloadBytes,
                                          [&](int i) { return std::to_string(keys[static_cast<size_t>(i)]); });
  f.bridgeCpu = (sample(t.bridge.pid()).cpuSeconds - cpu0) / seconds(Clock::now() - begin) * 100.0;
  f.main = ackLatencies(t, before, committedAt, warmup);
  if (!sub) return f;
  const size_t keysChanged = static_cast<size_t>(std::count(lastOfKey.begin(), lastOfKey.end(), true));
  waitFor(t, std::chrono::seconds(30 + o.settleWindowMs / 1000), "settling the run",
          [&] { return finals >= keysChanged; });
  stop = true;
  subscriber.join();
  // A burst's last change: a row its key does not change again within the window (by the
  // producer's commit times; a margin of 100 ms either way for the relay's own delay).
  const int64_t window = int64_t{o.settleWindowMs} * 1000;
  std::vector<int> nextRow(static_cast<size_t>(total), -1);
  {
    std::map<int, int> later;
    for (int i = total - 1; i >= 0; --i) {
      auto at = later.find(keys[static_cast<size_t>(i)]);
      if (at != later.end()) nextRow[static_cast<size_t>(i)] = at->second;
      later[keys[static_cast<size_t>(i)]] = i;
    }
  }
  auto quietAfter = [&](int64_t row, int64_t margin) {
    const int n = nextRow[static_cast<size_t>(row)];
    return n < 0 || committedAt[static_cast<size_t>(n)] - committedAt[static_cast<size_t>(row)] >= window + margin;
  };
  std::vector<bool> settledRow(static_cast<size_t>(total), false);
  for (const auto& r : received) {
    if (r.row < 0 || r.row >= total) fail("a settled message that carries no row of the run");
    if (r.key != std::to_string(keys[static_cast<size_t>(r.row)])) {
      fail(fmt::format("the settled message of row {} names key {}, not {}", r.row, r.key, keys[static_cast<size_t>(r.row)]));
    }
    settledRow[static_cast<size_t>(r.row)] = true;
    const double ms = static_cast<double>(r.receivedAt - committedAt[static_cast<size_t>(r.row)]) / 1000.0;
    if (!quietAfter(r.row, -100'000)) continue;  // settled before its key was quiet: settle_max or the key bound
    (r.row < warmup ? f.settledWaking : f.settled).push_back(ms);
    if (r.row >= warmup) f.toStore.push_back(static_cast<double>(r.storedAt - committedAt[static_cast<size_t>(r.row)]) / 1000.0);
  }
  f.messages = received.size();
  for (int i = warmup; i < total; ++i) {
    if (!quietAfter(i, 100'000)) continue;
    ++f.bursts;
    if (settledRow[static_cast<size_t>(i)]) ++f.burstsSettled;
  }
  const std::string page = metricsPage(port);
  f.early = sourceMetric(page, "outbox_settled_early_total", t.source);
  f.squashed = sourceMetric(page, "outbox_settle_squashed_total", t.source);
  return f;
}

void tearDown(Target& t, db::Connection& admin) {
  t.bridge.terminate(std::chrono::seconds(10));
  auto js = check(nats::JetStream::create(*t.nc, std::chrono::milliseconds(10'000), 16), "jetstream");
  (void)js->deleteStream(t.stream);
  (void)js->deleteStream(settledStreamOf(t));
  (void)admin.exec("DROP DATABASE " + t.database);
}

}  // namespace

void settleFigures(const Options& o, const Dsn& dsn, db::Connection& admin, const std::string& runId) {
  const double window = o.settleWindowMs;
  std::printf("(j)  the settled stream: settle = \"%s\" on a source of its own, beside a source without settle, "
              "measured in turn on the same load with no other bridge running: %d rows/s (a first second apart, "
              "then %d s), each row changing one of %d keys at random (the same keys in both runs)\n",
              windowText(o).c_str(), o.latencyRate, o.settleSeconds, o.settleKeys);
  std::printf("     settle delay: from a burst's last commit (the wall time the producer's autocommit INSERT of the "
              "change a settled message carries returned: its key's last change before the key was quiet for "
              "settle) to the wall time a subscriber on the settled stream (an ordered consumer in this process) "
              "received the message\n");
  std::fflush(stdout);
  Target on, off;
  setUp(on, o, dsn, admin, runId + "s", true);
  setUp(off, o, dsn, admin, runId + "n", false);
  RunFigures withSettle = measure(on, o, dsn.password, true);
  tearDown(on, admin);
  RunFigures without = measure(off, o, dsn.password, false);
  tearDown(off, admin);

  const double p99 = percentile(withSettle.settled, 0.99);
  std::printf("(j)  settle delay, settle = %d ms: p50 %.1f ms, p99 %.1f ms, max %.1f ms  [target p99 <= settle + 50 ms "
              "= %.0f ms: %s]  (%zu messages; %zu of %zu bursts' last changes settled; the first second after idle "
              "apart: max %.1f ms)\n",
              o.settleWindowMs, percentile(withSettle.settled, 0.5), p99, percentile(withSettle.settled, 1.0),
              window + 50, p99 <= window + 50 ? "met" : "MISSED", withSettle.messages, withSettle.burstsSettled,
              withSettle.bursts, percentile(withSettle.settledWaking, 1.0));
  std::printf("     of it, from the commit to the settled message stored: p50 %.1f ms, p99 %.1f ms; keys settled early "
              "(settle_max_keys) %.0f, changes squashed %.0f (backlog included)\n",
              percentile(withSettle.toStore, 0.5), percentile(withSettle.toStore, 0.99), withSettle.early,
              withSettle.squashed);
  for (const auto* run : {&withSettle, &without}) {
    const bool settling = run == &withSettle;
    const double p = percentile(run->main.steady, 0.99);
    std::string versus = settling ? "" : fmt::format("   settle on / off: p99 {:.2f}", percentile(withSettle.main.steady, 0.99) / p);
    std::printf("(j)  main stream commit-to-ack at %d rows/s, settle %-3s: p50 %.1f ms, p99 %.1f ms, max %.1f ms; "
                "bridge CPU %.1f %%  (%zu rows)%s\n",
                o.latencyRate, settling ? "on" : "off", percentile(run->main.steady, 0.5), p,
                percentile(run->main.steady, 1.0), run->bridgeCpu, run->main.steady.size(), versus.c_str());
  }
  if (o.settleDrain) {
    std::printf("(j)  drain of a %d-row backlog over %d keys: settle on %.0f rows/s, settle off %.0f rows/s  on / off = "
                "%.2f\n",
                o.rows, o.settleKeys, withSettle.drainRate, without.drainRate, withSettle.drainRate / without.drainRate);
  }
  std::fflush(stdout);
}

}  // namespace outbox::bench

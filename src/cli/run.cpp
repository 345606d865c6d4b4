#include <atomic>
#include <csignal>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/cli.h"
#include "common/backoff.h"
#include "common/log.h"
#include "common/signal_watcher.h"
#include "common/stop_token.h"
#include "db/connection.h"
#include "db/pool.h"
#include "db/preflight.h"
#include "http/server.h"
#include "lease/joint_renewal.h"
#include "lease/lease.h"
#include "lease/mysql_lease_store.h"
#include "metrics/source_metrics.h"
#include "nats/jetstream.h"
#include "outbox_version.h"
#include "relay/jetstream_publisher.h"
#include "relay/mysql_store.h"
#include "relay/relay.h"
#include "settle/settle_feed.h"
#include "settle/settle_thread.h"
#include "settle/settled_message.h"
#include "wake/doorbell.h"
#include "wake/idle_check.h"

namespace outbox::cli {

namespace {

// Connections the leases of a server's sources share (a round trip each heartbeat, and each
// standby's ask).
constexpr size_t kLeaseConnections = 3;

std::unique_ptr<nats::Connection> connectNats(const NatsConfig& config, StopSignal& stop) {
  Backoff backoff(std::chrono::milliseconds(200), std::chrono::milliseconds(5000));
  while (!stop.stopped()) {
    auto conn = nats::Connection::connect(config);
    if (conn.isOk()) return std::move(conn).value();
    // Refused as configured (a login, a certificate, a seed): asking again will not help.
    if (conn.status().isPermanent()) throw Exit{kExitUsage, "config error: " + conn.status().message()};
    auto delay = backoff.next();
    spdlog::warn("nats-server at {} not reachable ({}); retrying in {} ms", config.url, conn.status().message(),
                 delay.count());
    stop.waitFor(delay);
  }
  return nullptr;
}

// What the server must allow is checked at start when it can be, so a missing grant stops the
// start (exit 2) instead of a relay that retries for ever. An unreachable server is not an error
// here: the relay checks on every connect.
void checkServerAtStart(const SourceConfig& source) {
  auto conn = db::Connection::open(db::paramsFrom(source.dsn));
  if (!conn.isOk()) {
    sourceLogger(source.name)->warn("{}; retrying in the background", conn.status().message());
    return;
  }
  std::vector<std::string> notes;  // the relay logs them on its first connect
  if (Status s = db::checkServer(**conn, notes); s.isPermanent()) {
    throw Exit{kExitUsage, fmt::format("source {}: {}", source.name, s.message())};
  }
}

HttpServer::Options httpOptionsOf(const Config& config) {
  HttpServer::Options o;
  if (!splitListen(config.http.listen, o.host, o.port)) {
    throw Exit{kExitUsage, fmt::format("config error: http.listen: '{}' must be HOST:PORT", config.http.listen)};
  }
  o.tlsCert = config.http.tlsCert;
  o.tlsKey = config.http.tlsKey;
  if (!config.http.metricsListen.empty() && !splitListen(config.http.metricsListen, o.metricsHost, o.metricsPort)) {
    throw Exit{kExitUsage,
               fmt::format("config error: http.metrics_listen: '{}' must be HOST:PORT", config.http.metricsListen)};
  }
  o.maxSnapshotStreams = static_cast<size_t>(config.http.maxSnapshotStreams);
  o.stuckAfter = config.http.stuckAfter;
  o.adminToken = config.http.adminToken;
  return o;
}

}  // namespace

Command addRunOptions(CLI::App* cmd) {
  auto path = std::make_shared<std::string>();
  addConfigOption(cmd, *path);
  return [path]() {
    Config config = loadOrExit(*path, "run");
    db::initLibrary();
    StopSignal stop;
    SignalWatcher signals(stop, [](int sig) {
      spdlog::info("received {}: stopping (a second one exits at once)", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    });
    // After the watcher: the check starts nats.c's threads, which must have SIGTERM blocked.
    checkFilesOrExit(config);
    spdlog::info("outbox-bridge {} starting as {}: {} source(s), nats {}", OUTBOX_BRIDGE_VERSION, makeHolderId(),
                 config.sources.size(), config.nats.url);

    // Listen first (issue 24, 11): /healthz and /readyz answer while nats-server or a database
    // is still out of reach, and say so.
    std::vector<std::unique_ptr<SourceMetrics>> metrics;
    std::vector<HttpSource> httpSources;
    for (const auto& source : config.sources) {
      metrics.push_back(std::make_unique<SourceMetrics>());
      httpSources.push_back({&source, metrics.back().get()});
    }
    // Short enough that a frozen leader's open transaction is gone well before its lease.
    const auto lockBound =
        std::max(std::chrono::seconds(1), std::chrono::duration_cast<std::chrono::seconds>(config.lease.ttl / 3));
    // The sources of a server share a few connections (docs/design.md, "Connections"): declared
    // before the server that shows them and the stores that borrow from them. None opens yet.
    db::ConnectionPools relayPools(static_cast<size_t>(config.database.maxConnections),
                                   MysqlOutboxStore::connectionSetup(lockBound));
    db::ConnectionPools leasePools(kLeaseConnections, MysqlLeaseStore::connectionSetup(lockBound));
    // Declared before the server, so it outlives the server's handlers on every way out.
    std::unique_ptr<nats::Connection> natsConnection;
    std::atomic<nats::Connection*> natsNow{nullptr};
    HttpServer::Options httpOptions = httpOptionsOf(config);
    httpOptions.pools = {{"relay", &relayPools}, {"lease", &leasePools}};
    HttpServer http(std::move(httpOptions), httpSources, [&natsNow] {
      const nats::Connection* nc = natsNow.load();
      if (nc == nullptr) return NatsLink{false, 0, "nats-server is not connected yet (connecting at start)"};
      return NatsLink{nc->isConnected(), nats::Connection::reconnects(), nc->problem()};
    });
    if (Status s = http.start(); !s.isOk()) {
      // A certificate that does not load is the config's fault; an address in use is not.
      if (s.isPermanent()) throw Exit{kExitUsage, "config error: " + s.message()};
      throw Exit{kExitFailure, s.message()};
    }

    natsConnection = connectNats(config.nats, stop);
    if (!natsConnection) return kExitOk;
    natsNow = natsConnection.get();

    struct SourceRuntime {
      std::unique_ptr<MysqlOutboxStore> store;
      std::unique_ptr<MysqlOutboxStore> assignStore;
      std::unique_ptr<MysqlOutboxStore> readStore;
      std::unique_ptr<MysqlLeaseStore> leaseStore;
      std::unique_ptr<LeaderLease> lease;
      std::unique_ptr<JetStreamPublisher> publisher;
      std::unique_ptr<Relay> relay;
      // A source that settles (docs/design.md, "The settled stream (issue 36)"): the relay's feed
      // (shared with the stop listener that wakes it) and the settle thread.
      std::shared_ptr<SettleFeed> settleFeed;
      std::unique_ptr<SettleThread> settleThread;
    };
    SteadyClock clock;
    // What wakes each relay besides its own polls (docs/design.md, "Waking up"); a stop wakes them too.
    // Shared with the stop listener: a start refused below unwinds before the SignalWatcher
    // requests stop.
    std::vector<std::shared_ptr<Wakeup>> wakeups;
    std::vector<WatchedSource> watched;
    for (const auto& source : config.sources) {
      wakeups.push_back(std::make_shared<Wakeup>());
      stop.onRequest([w = wakeups.back()] { w->stop(); });
      watched.push_back({&source, wakeups.back().get()});
    }
    HandOverGate handOverGate;  // the relays hand sources to lighter instances one at a time
    // The steady leaders' heartbeats of a database, one round for all (before the leases that use them).
    std::map<std::pair<const db::ConnectionPool*, std::string>, std::unique_ptr<JointRenewal>> jointRenewals;
    // ... and their published marks, written together (docs/design.md, "Marks").
    std::map<std::pair<const db::ConnectionPool*, std::string>, std::unique_ptr<JointMarks>> jointMarks;
    std::vector<SourceRuntime> runtimes;
    std::set<const db::ConnectionPool*> checked;
    for (size_t i = 0; i < config.sources.size(); ++i) {
      const SourceConfig& source = config.sources[i];
      SourceRuntime rt;
      db::ConnectionPool& pool = relayPools.forServer(db::paramsFrom(source.dsn));
      auto& marks = jointMarks[{&pool, source.dsn.database}];
      if (!marks) marks = std::make_unique<JointMarks>(pool, source.dsn.database);
      rt.store = std::make_unique<MysqlOutboxStore>(source, pool, MysqlOutboxStore::ServerCheck::kCheckAndWarn,
                                                    marks.get());
      if (checked.insert(&pool).second) checkServerAtStart(source);  // once per server and account
      // The scan's reads of PROCESSLIST: without PROCESS it would see only its own threads, and
      // no error. So it checks each time it prepares too (a grant revoked meanwhile).
      rt.assignStore =
          std::make_unique<MysqlOutboxStore>(source, pool, MysqlOutboxStore::ServerCheck::kCheck, marks.get());
      // The scan's: it reads the next batch while the one before is assigned (no marks: it writes nothing).
      rt.readStore = std::make_unique<MysqlOutboxStore>(source, pool, MysqlOutboxStore::ServerCheck::kCheck);
      db::ConnectionPool& leasePool = leasePools.forServer(MysqlLeaseStore::connectParams(source));
      auto& joint = jointRenewals[{&leasePool, source.dsn.database}];
      if (!joint) {
        joint = std::make_unique<JointRenewal>(leasePool, source.dsn.database, MysqlLeaseStore::freshFor(config.lease));
      }
      rt.leaseStore = std::make_unique<MysqlLeaseStore>(source, leasePool, config.lease, joint.get());
      // An instance whose NATS connection is down stands for no source (sources are not handed to it).
      rt.lease = std::make_unique<LeaderLease>(*rt.leaseStore, makeHolderId(), config.lease.ttl, config.lease.heartbeat,
                                               clock, [nc = natsConnection.get()] { return nc->isConnected(); },
                                               &handOverGate);
      rt.lease->alignHeartbeats();
      rt.publisher = std::make_unique<JetStreamPublisher>(source, config.nats, *natsConnection);
      // A stream with foreign subjects is an operator's mistake: refuse to start at all.
      if (Status s = rt.publisher->prepare(); s.isPermanent()) {
        throw Exit{kExitFailure, fmt::format("source {}: {}", source.name, s.message())};
      }
      Relay::Options options;
      options.maxInFlight = config.nats.maxPending;
      options.ackTimeout = config.nats.ackTimeout;
      options.wakeup = wakeups[i].get();
      if (source.settles()) {
        // A few times what can be in flight waits for the settle thread; past that it reads the
        // main stream instead.
        rt.settleFeed = std::make_shared<SettleFeed>(4 * static_cast<size_t>(config.nats.maxPending));
        stop.onRequest([f = rt.settleFeed] { f->wake(); });
        rt.settleThread = std::make_unique<SettleThread>(source, config.nats, *natsConnection, *rt.settleFeed,
                                                         *metrics[i], stop);
        // As for the main stream: a settled stream with foreign subjects stops the start.
        if (Status s = rt.settleThread->prepare(); s.isPermanent()) {
          throw Exit{kExitFailure, fmt::format("source {}: settled stream {}: {}", source.name, source.settledStream,
                                               s.message())};
        }
        metrics[i]->settles = true;
        options.settleFeed = rt.settleFeed.get();
      }
      options.readStore = rt.readStore.get();
      rt.relay = std::make_unique<Relay>(source, *rt.store, *rt.assignStore, *rt.publisher, rt.lease.get(), stop,
                                         *metrics[i], clock, options);
      sourceLogger(source.name)->info("{} -> stream {} ({}.>)", source.dsn.masked(), source.stream,
                                      source.subjectPrefix);
      if (source.settles()) {
        sourceLogger(source.name)
            ->info("settled stream {} ({}.>): settle {}, settle_max {}", source.settledStream,
                   settledPrefix(source.subjectPrefix), formatDuration(source.settle),
                   formatDuration(source.settleMax));
      }
      runtimes.push_back(std::move(rt));
    }

    std::vector<std::unique_ptr<BinlogDoorbell>> doorbells;
    for (auto& group : doorbellGroups(watched)) {
      const Dsn& dsn = config.doorbellDsn(*group.front().config);
      doorbells.push_back(std::make_unique<BinlogDoorbell>(group, dsn, stop));
    }
    std::vector<std::unique_ptr<IdleCheck>> idleChecks;
    for (auto& group : idleCheckGroups(watched)) idleChecks.push_back(std::make_unique<IdleCheck>(group, stop));
    std::vector<std::thread> threads;
    for (auto& rt : runtimes) {
      threads.emplace_back([&rt] { rt.relay->run(); });
      if (rt.settleThread) threads.emplace_back([&rt] { rt.settleThread->run(); });
    }
    for (auto& d : doorbells) d->start();
    for (auto& c : idleChecks) c->start();
    for (auto& t : threads) t.join();
    doorbells.clear();  // each joins its thread: stop was requested
    idleChecks.clear();
    http.stop();
    runtimes.clear();
    natsNow = nullptr;
    natsConnection.reset();
    nats::shutdownLibrary();
    spdlog::info("outbox-bridge stopped");
    return kExitOk;
  };
}

}  // namespace outbox::cli

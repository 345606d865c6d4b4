#include "wake/doorbell.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <random>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/backoff.h"
#include "common/log.h"
#include "db/binlog.h"
#include "wake/binlog_lag.h"

namespace outbox {

namespace {

// Table names compared as the server may fold them (lower_case_table_names).
std::string folded(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  return name;
}

}  // namespace

BinlogDoorbell::BinlogDoorbell(std::vector<WatchedSource> sources, const Dsn& dsn, StopSignal& stop)
    : sources_(std::move(sources)), dsn_(dsn), stop_(stop) {
  for (const auto& s : sources_) {
    tables_.push_back(folded(s.config->dsn.database + "." + s.config->outboxTable));
    histories_.push_back(folded(s.config->dsn.database + ".outbox_epoch_history"));
    databases_.push_back(folded(s.config->dsn.database));
    insists_ = insists_ || s.config->wake == Wake::kBinlog;
  }
  const std::string server = dsn.socket.empty() ? fmt::format("{}:{}", dsn.host, dsn.port) : dsn.socket;
  where_ = fmt::format("binlog doorbell of {} (source{} {}; as {})", server, sources_.size() == 1 ? "" : "s",
                       sourceNames(sources_), dsn.user);
  // A replica id the server's real replicas are unlikely to use: a dump of the same id ends the
  // older one.
  std::random_device random;
  serverId_ = std::uniform_int_distribution<uint32_t>(1u << 30, (1u << 31) - 1)(random);
  metrics_ = registerDoorbellMetrics(server);
  if (const char* delay = std::getenv("OUTBOX_TEST_DOORBELL_READ_DELAY_MS"); delay != nullptr) {
    readDelay_ = std::chrono::milliseconds(std::strtoll(delay, nullptr, 10));
    spdlog::warn(
        "{}: OUTBOX_TEST_DOORBELL_READ_DELAY_MS: pausing {} ms after each transaction it reads (for tests only)",
        where_, readDelay_.count());
  }
}

BinlogDoorbell::~BinlogDoorbell() { join(); }

void BinlogDoorbell::start() {
  thread_ = std::thread([this] {
    runRestartedAfterBugs(stop_, where_, [this] { run(); }, [this] { setWatching(false); });
  });
}

void BinlogDoorbell::join() {
  if (thread_.joinable()) thread_.join();
}

void BinlogDoorbell::setWatching(bool on, const db::BinlogReader* reader) {
  std::string unlogged;
  for (auto& s : sources_) {
    const bool logged = reader == nullptr || reader->logs(s.config->dsn.database);
    if (!logged) unlogged += (unlogged.empty() ? "" : ", ") + s.config->name;
    s.wakeup->doorbell = on && logged;
    s.wakeup->ring(Wakeup::By::kBinlogNoRows);
  }
  if (on && !unlogged.empty() && unlogged != unloggedReported_) {
    spdlog::warn("{}: the binary log leaves out the database of source(s) {} (binlog_do_db or binlog_ignore_db): "
                 "they poll, the idle check watching",
                 where_, unlogged);
  }
  if (on) unloggedReported_ = unlogged;
  metrics_->watching = on;
  if (!on) {
    metrics_->lagMillis = 0;
    metrics_->lagBytes = 0;
  }
}

void BinlogDoorbell::ringTable(const std::string& table) {
  const std::string name = folded(table);
  for (size_t i = 0; i < sources_.size(); ++i) {
    if (tables_[i] == name) sources_[i].wakeup->ring(Wakeup::By::kBinlog);
    // An epoch bump: a look, not rows to wait for.
    if (histories_[i] == name) sources_[i].wakeup->ring(Wakeup::By::kBinlogNoRows);
  }
}

void BinlogDoorbell::ring(const db::BinlogCommit& commit) {
  for (const auto& table : commit.tables) ringTable(table);
  // What the log does not tie to a table's new rows is a look, not rows to wait for: a DDL or an
  // XA COMMIT elsewhere must not keep quiet sources on the fast idle check.
  for (const auto& database : commit.databases) {
    const std::string name = folded(database);
    for (size_t i = 0; i < sources_.size(); ++i) {
      if (databases_[i] == name) sources_[i].wakeup->ring(Wakeup::By::kBinlogNoRows);
    }
  }
  if (commit.unknown) {
    for (auto& s : sources_) s.wakeup->ring(Wakeup::By::kBinlogNoRows);
  }
}

std::string BinlogDoorbell::otherServer(const db::BinlogReader& reader) {
  const SourceConfig& source = *sources_.front().config;
  if (&dsn_ == &source.dsn) return "";
  db::ConnectParams p = db::paramsFrom(source.dsn);
  p.readTimeout = std::chrono::seconds(5);
  auto conn = db::Connection::open(p);
  if (!conn.isOk()) {
    spdlog::debug("{}: cannot ask source {}'s server who it is: {}", where_, source.name, conn.status().message());
    return "";
  }
  auto who = (*conn)->query(db::BinlogReader::kServerIdentityQuery);
  if (!who.isOk() || !who->next()) return "";
  const std::string theirs = fmt::format("server_id {}, hostname {}", who->u64("server_id"), who->text("hostname"));
  if (theirs == reader.serverIdentity()) return "";
  return fmt::format("its dsn reaches {}, but source {}'s connection reaches {}: the doorbell would ring for another "
                     "server's commits (a replica, or a proxy's other backend?); give the [[doorbell]] the sources' "
                     "server",
                     reader.serverIdentity(), source.name, theirs);
}

Status BinlogDoorbell::read(db::BinlogReader& reader, bool& jump) {
  BinlogLag lag(db::paramsFrom(dsn_));
  jump = false;
  while (!stop_.stopped()) {
    auto commit = reader.next();
    if (!commit.isOk()) {
      if (reader.tooLarge()) {
        metrics_->jumpsTooLarge.fetch_add(1);
        spdlog::info("{}: {}: starting again at the end of the log (each source looks once)", where_,
                     commit.status().message());
        jump = true;
      }
      return commit.status();
    }
    ring(*commit);
    if (readDelay_.count() > 0) stop_.waitFor(readDelay_);
    const BinlogLag::Reading behind = lag.after(reader);
    metrics_->lagMillis = static_cast<uint64_t>(behind.time.count());
    if (behind.bytes) metrics_->lagBytes = *behind.bytes;
    if (reader.eventTime() == 0) metrics_->lagBytes = 0;
    if (behind.behind) {
      metrics_->jumpsBehind.fetch_add(1);
      spdlog::warn("{}: reading {} s and {} MiB behind the end of the binary log ({}:{}), which keeps the server from "
                   "purging those files and rings late: starting again at the end (each source looks once)",
                   where_, behind.time.count() / 1000, metrics_->lagBytes.load() >> 20, reader.file(),
                   reader.position());
      jump = true;
      return Status::transient("fell behind");
    }
  }
  return Status::ok();
}

void BinlogDoorbell::run() {
  const db::ConnectParams params = db::paramsFrom(dsn_);
  Backoff backoff(std::chrono::milliseconds(1000), std::chrono::milliseconds(60'000));
  std::string reported;  // the problem last logged: each is logged once until the doorbell works
  auto problem = [&](const Status& s, std::chrono::milliseconds retry) {
    if (s.message() == reported && !insists_) return;
    reported = s.message();
    const std::string line = fmt::format("{}: {}; the sources poll meanwhile (retrying in {} s)", where_,
                                         s.message(), std::max<int64_t>(1, retry.count() / 1000));
    if (insists_) {
      spdlog::error("{}", line);
    } else {
      spdlog::warn("{}", line);
    }
  };
  bool watching = false;
  auto stopWatching = [&] {
    if (watching) setWatching(false);
    watching = false;
  };
  bool jump = false;  // the last dump was given up to start again at the end (same server)
  while (!stop_.stopped()) {
    auto reader = db::BinlogReader::open(params, serverId_, kHeartbeat);
    std::string other = reader.isOk() && !jump ? otherServer(**reader) : "";
    if (!reader.isOk() || !other.empty()) {
      jump = false;
      stopWatching();
      // A setting, a grant or the wrong server takes an operator: look again less often.
      const Status s = reader.isOk() ? Status::permanent(other) : reader.status();
      auto delay = s.isPermanent() ? kRetryMissing : backoff.next();
      problem(s, delay);
      stop_.waitFor(delay);
      continue;
    }
    spdlog::info("{}: watching the binary log (binlog_format {}) as replica id {}", where_, (*reader)->format(),
                 serverId_);
    reported.clear();
    setWatching(true, reader->get());  // and look for what committed while nothing watched
    watching = true;
    auto since = std::chrono::steady_clock::now();
    Status ended = read(**reader, jump);
    if (stop_.stopped()) break;
    // Fell behind or met an event too large: the sources stay watched, and the next dump, from
    // the end, rings each once.
    if (jump) continue;
    stopWatching();
    // A dump that ran a while and then ended (a restart, a KILL, a failover) is tried again soon.
    if (std::chrono::steady_clock::now() - since > std::chrono::seconds(10)) backoff.reset();
    auto delay = backoff.next();
    problem(ended, delay);
    stop_.waitFor(delay);
  }
  stopWatching();
}

}  // namespace outbox

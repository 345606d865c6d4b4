#include "wake/doorbell.h"

#include <algorithm>
#include <cctype>
#include <random>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/backoff.h"
#include "db/binlog.h"

namespace outbox {

namespace {

// Table names compared as the server may fold them (lower_case_table_names).
std::string folded(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  return name;
}

}  // namespace

BinlogDoorbell::BinlogDoorbell(std::vector<WatchedSource> sources, StopSignal& stop)
    : sources_(std::move(sources)), stop_(stop) {
  const Dsn& dsn = sources_.front().config->dsn;
  for (const auto& s : sources_) {
    tables_.push_back(folded(s.config->dsn.database + "." + s.config->outboxTable));
    histories_.push_back(folded(s.config->dsn.database + ".outbox_epoch_history"));
    databases_.push_back(folded(s.config->dsn.database));
    insists_ = insists_ || s.config->wake == Wake::kBinlog;
  }
  const std::string server = dsn.socket.empty() ? fmt::format("{}:{}", dsn.host, dsn.port) : dsn.socket;
  where_ = fmt::format("binlog doorbell of {} (source{} {})", server, sources_.size() == 1 ? "" : "s",
                       sourceNames(sources_));
  // A replica id the server's real replicas are unlikely to use: a dump of the same id ends the
  // older one.
  std::random_device random;
  serverId_ = std::uniform_int_distribution<uint32_t>(1u << 30, (1u << 31) - 1)(random);
}

BinlogDoorbell::~BinlogDoorbell() { join(); }

void BinlogDoorbell::start() {
  thread_ = std::thread([this] { run(); });
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

void BinlogDoorbell::run() {
  const db::ConnectParams params = db::paramsFrom(sources_.front().config->dsn);
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
  while (!stop_.stopped()) {
    auto reader = db::BinlogReader::open(params, serverId_, kHeartbeat);
    if (!reader.isOk()) {
      // A setting or a grant takes an operator: look again less often.
      auto delay = reader.status().isPermanent() ? kRetryMissing : backoff.next();
      problem(reader.status(), delay);
      stop_.waitFor(delay);
      continue;
    }
    spdlog::info("{}: watching the binary log (binlog_format {}) as replica id {}", where_, (*reader)->format(),
                 serverId_);
    reported.clear();
    setWatching(true, reader->get());  // and look for what committed while nothing watched
    Status ended;
    auto since = std::chrono::steady_clock::now();
    while (!stop_.stopped()) {
      auto commit = (*reader)->next();
      if (!commit.isOk()) {
        ended = commit.status();
        break;
      }
      ring(*commit);
    }
    setWatching(false);
    if (stop_.stopped()) break;
    // A dump that ran a while and then ended (a restart, a KILL, a failover) is tried again soon.
    if (std::chrono::steady_clock::now() - since > std::chrono::seconds(10)) backoff.reset();
    auto delay = backoff.next();
    problem(ended, delay);
    stop_.waitFor(delay);
  }
}

}  // namespace outbox

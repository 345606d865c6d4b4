#include "wake/idle_check.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "db/connection.h"

namespace outbox {

IdleCheck::IdleCheck(std::vector<WatchedSource> sources, StopSignal& stop)
    : sources_(std::move(sources)), stop_(stop), interval_(sources_.front().config->pollInterval) {
  for (size_t i = 0; i < sources_.size(); ++i) {
    const SourceConfig& c = *sources_[i].config;
    // Names are SQL identifiers (config checks them): safe to splice.
    // The highest id, and whether an `epoch bump` waits for the leader to finish it (it writes
    // no outbox row, so neither this id nor the doorbell would say so).
    parts_.push_back(fmt::format(
        "SELECT {0}, (SELECT MAX(id) FROM `{1}`.`{2}`), (SELECT COUNT(*) FROM `{1}`.outbox_source_state WHERE "
        "source = '{3}' AND bump_from_epoch IS NOT NULL)",
        i, c.dsn.database, c.outboxTable, c.name));
    interval_ = std::min(interval_, c.pollInterval);
  }
  where_ = fmt::format("idle check of source{} {}", sources_.size() == 1 ? "" : "s", sourceNames(sources_));
}

IdleCheck::~IdleCheck() { join(); }

void IdleCheck::start() {
  thread_ = std::thread([this] { run(); });
}

void IdleCheck::join() {
  if (thread_.joinable()) thread_.join();
}

void IdleCheck::setChecked(bool on) {
  for (auto& s : sources_) {
    if (s.wakeup->idleChecked.exchange(on) != on && !on) s.wakeup->ring(Wakeup::By::kIdleCheck);
  }
}

std::string IdleCheck::statement(bool watchedToo) const {
  std::string out;
  for (size_t i = 0; i < sources_.size(); ++i) {
    if (!watchedToo && sources_[i].wakeup->doorbell.load()) continue;
    if (!out.empty()) out += " UNION ALL ";
    out += parts_[i];
  }
  return out;
}

void IdleCheck::run() {
  const db::ConnectParams params = db::paramsFrom(sources_.front().config->dsn);
  std::unique_ptr<db::Connection> conn;
  std::string reported;
  const uint64_t watchedEvery = std::max<uint64_t>(1, kWatchedCheck / interval_);
  for (uint64_t round = 1; !stop_.waitFor(interval_); ++round) {
    const std::string statement = this->statement(round % watchedEvery == 0);
    if (statement.empty()) continue;  // the doorbell watches them all, and their check is not due
    Status s;
    if (!conn) {
      auto opened = db::Connection::open(params);
      if (opened.isOk()) {
        conn = std::move(opened).value();
      } else {
        s = opened.status();
      }
    }
    if (conn) {
      auto rows = conn->query(statement);
      if (rows.isOk()) {
        setChecked(true);
        if (!reported.empty()) spdlog::info("{}: working again", where_);
        reported.clear();
        while (rows->next()) {
          const size_t i = rows->u64(0);
          if (i >= sources_.size()) continue;
          const bool newIds = !rows->isNull(1) && rows->u64(1) > sources_[i].wakeup->readThrough.load();
          if (newIds || rows->u64(2) > 0) sources_[i].wakeup->ring(Wakeup::By::kIdleCheck);
        }
        continue;
      }
      s = rows.status();
      conn.reset();
    }
    // The sources poll on their own meanwhile (their relays report the database's trouble too).
    setChecked(false);
    if (s.message() != reported) {
      spdlog::warn("{}: {}; the sources poll on their own meanwhile", where_, s.message());
      reported = s.message();
    }
  }
  setChecked(false);
}

}  // namespace outbox

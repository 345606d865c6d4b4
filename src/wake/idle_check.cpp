#include "wake/idle_check.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/log.h"
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
        "SELECT {0} AS source_index, (SELECT MAX(id) FROM `{1}`.`{2}`) AS max_id, (SELECT COUNT(*) FROM "
        "`{1}`.outbox_source_state WHERE source = '{3}' AND bump_from_epoch IS NOT NULL) AS bump_pending",
        i, c.dsn.database, c.outboxTable, c.name));
    interval_ = std::min(interval_, c.pollInterval);
  }
  where_ = fmt::format("idle check of source{} {}", sources_.size() == 1 ? "" : "s", sourceNames(sources_));
}

IdleCheck::~IdleCheck() { join(); }

void IdleCheck::start() {
  thread_ = std::thread([this] {
    runRestartedAfterBugs(stop_, where_, [this] { run(); }, [this] { setChecked(due(/*all=*/true), false); });
  });
}

void IdleCheck::join() {
  if (thread_.joinable()) thread_.join();
}

void IdleCheck::setChecked(const std::vector<size_t>& which, bool on) {
  for (size_t i : which) {
    Wakeup& w = *sources_[i].wakeup;
    if (w.idleChecked.exchange(on) != on && !on) w.ring(Wakeup::By::kIdleCheck);
  }
}

std::vector<size_t> IdleCheck::due(bool all) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < sources_.size(); ++i) {
    const Wakeup& w = *sources_[i].wakeup;
    if (all || !w.doorbell.load() || w.ringsUnanswered.load()) out.push_back(i);
  }
  return out;
}

namespace {

// How long a check waits for a table's metadata lock before it gives up on that table for the
// round: an ALTER queued behind a long transaction holds every new reader of the table, and
// lock_wait_timeout is a day by default.
constexpr int kLockWaitSeconds = 1;

}  // namespace

Status IdleCheck::check(db::Connection& conn, const std::vector<size_t>& which) {
  std::string statement;
  for (size_t i : which) statement += (statement.empty() ? "" : " UNION ALL ") + parts_[i];
  auto rows = conn.query(statement);
  if (!rows.isOk()) return rows.status();
  setChecked(which, true);
  const size_t sourceIndex = rows->index("source_index"), maxId = rows->index("max_id");
  const size_t bumpPending = rows->index("bump_pending");
  while (rows->next()) {
    const size_t i = rows->u64(sourceIndex);
    if (i >= sources_.size()) continue;
    const bool newIds = !rows->isNull(maxId) && rows->u64(maxId) > sources_[i].wakeup->readThrough.load();
    if (newIds || rows->u64(bumpPending) > 0) sources_[i].wakeup->ring(Wakeup::By::kIdleCheck);
  }
  return Status::ok();
}

void IdleCheck::run() {
  const db::ConnectParams params = db::paramsFrom(sources_.front().config->dsn);
  std::unique_ptr<db::Connection> conn;
  std::string reported;  // the failure of the connection last logged ("": none since it worked)
  // Sources whose own part failed (a missing table or grant, a metadata lock waited for): each
  // is checked alone, after the others, until its part works again, so it fails no one else's
  // check; and the failure last logged for it.
  std::vector<char> alone(sources_.size(), 0);
  std::vector<std::string> failing(sources_.size());
  // The watched sources every kWatchedCheck, or every round when poll_interval is longer; the
  // first round checks them all at once (so the relays know early that the check works).
  const uint64_t watchedEvery = std::max<uint64_t>(1, Wakeup::kWatchedCheck / interval_);
  for (uint64_t round = 0; round == 0 || !stop_.waitFor(interval_); ++round) {
    const std::vector<size_t> which = due(round % watchedEvery == 0);
    if (which.empty()) continue;  // the doorbell watches them all, and their check is not due
    Status s;
    if (!conn) {
      auto opened = db::Connection::open(params);
      if (opened.isOk()) {
        s = (*opened)->exec(fmt::format("SET SESSION lock_wait_timeout = {}", kLockWaitSeconds));
        if (s.isOk()) conn = std::move(opened).value();
      } else {
        s = opened.status();
      }
    }
    std::vector<size_t> together, single;
    for (size_t i : which) (alone[i] ? single : together).push_back(i);
    if (conn && !together.empty()) {
      s = check(*conn, together);
      // One table or grant of theirs, or one table's metadata lock: each is checked alone below.
      if (!s.isOk() && s.cause() != Cause::kConnection) single.insert(single.end(), together.begin(), together.end());
    }
    for (size_t n = 0; conn && (s.isOk() || s.cause() != Cause::kConnection) && n < single.size(); ++n) {
      const size_t i = single[n];
      s = check(*conn, {i});
      if (s.isOk()) {
        if (!failing[i].empty()) spdlog::info("idle check of source {}: working again", sources_[i].config->name);
        alone[i] = 0;
        failing[i].clear();
        continue;
      }
      if (s.cause() == Cause::kConnection) break;
      // Its relay polls on its own meanwhile (and reports the database's trouble too).
      setChecked({i}, false);
      alone[i] = 1;
      if (s.message() != failing[i]) {
        spdlog::warn("idle check of source {}: {}; it polls on its own meanwhile, the others' check goes on",
                     sources_[i].config->name, s.message());
        failing[i] = s.message();
      }
      s = Status::ok();
    }
    if (conn && (s.isOk() || s.cause() != Cause::kConnection)) {
      // A round that left watched sources out says nothing of a failure a full one met.
      if (!reported.empty() && which.size() == sources_.size()) {
        spdlog::info("{}: working again", where_);
        reported.clear();
      }
      continue;
    }
    // The connection failed (or could not be made): the sources poll on their own meanwhile.
    conn.reset();
    setChecked(which, false);
    if (s.message() != reported) {
      spdlog::warn("{}: {}; the sources poll on their own meanwhile", where_, s.message());
      reported = s.message();
    }
  }
  setChecked(due(/*all=*/true), false);
}

}  // namespace outbox

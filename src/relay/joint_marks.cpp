#include "relay/joint_marks.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include <fmt/format.h>

namespace outbox {

JointMarks::JointMarks(db::ConnectionPool& pool, std::string database) : session_(pool, std::move(database)) {}

void JointMarks::offer(const std::string& source, const WriteGuard& guard, PublishedMark mark) {
  if (mark.version == 0 || !guard.lease) return;
  std::lock_guard lock(mu_);
  auto [it, fresh] = offers_.try_emplace(source);
  Offer& o = it->second;
  if (!fresh && mark.version < o.mark.version) return;
  auto written = written_.find(source);
  const bool waiting = !fresh && (written == written_.end() || o.mark.version > written->second);
  o = Offer{guard, mark, waiting ? o.since : std::chrono::steady_clock::now()};
}

void JointMarks::carried(const std::string& source, uint64_t version) {
  std::lock_guard lock(mu_);
  uint64_t& written = written_[source];
  written = std::max(written, version);
}

void JointMarks::forget(const std::string& source) {
  // After a write in progress: it may hold the offer, and the session that made it is over (its
  // successor reconciles next, which may set the marks lower, to a stream that lost messages).
  std::lock_guard writing(writeMu_);
  std::lock_guard lock(mu_);
  offers_.erase(source);
  written_.erase(source);
}

std::map<std::string, JointMarks::Offer> JointMarks::pending(const std::string& source) const {
  const auto ripe = std::chrono::steady_clock::now() - kRipe;
  std::map<std::string, Offer> out;
  for (const auto& [name, o] : offers_) {
    auto written = written_.find(name);
    if (written != written_.end() && o.mark.version <= written->second) continue;
    if (name == source || o.since <= ripe) out.emplace(name, o);
  }
  return out;
}

uint64_t JointMarks::statements() const {
  std::lock_guard lock(mu_);
  return statements_;
}

uint64_t JointMarks::marks() const {
  std::lock_guard lock(mu_);
  return marks_;
}

Status JointMarks::write(const std::string& source) {
  std::lock_guard writing(writeMu_);
  std::map<std::string, Offer> offers;
  {
    std::lock_guard lock(mu_);
    offers = pending(source);
    if (!offers.count(source)) return Status::ok();  // written meanwhile, or carried
  }
  Status s = session_.run([&](db::Connection& conn) { return conn.exec(updateOf(conn, offers)); });
  if (!s.isOk()) return s;
  std::lock_guard lock(mu_);
  ++statements_;
  marks_ += offers.size();
  // An offer made while the statement ran stays pending; one forgotten meanwhile (a session
  // ended) is not taken for written.
  for (const auto& [name, o] : offers) {
    if (!offers_.count(name)) continue;
    uint64_t& written = written_[name];
    written = std::max(written, o.mark.version);
  }
  return Status::ok();
}

std::string JointMarks::updateOf(db::Connection& conn, const std::map<std::string, Offer>& offers) {
  // Each source's row under its own guard (MysqlOutboxStore::guardedStateUpdate's conditions:
  // the lease held at its epoch, the source's epoch); each mark moved forward only, each column
  // on its own (docs/design.md, "Marks": a ride may race with it).
  std::string names, through, seq, guards;
  for (const auto& [source, o] : offers) {
    const std::string name = conn.quote(source);
    const bool first = names.empty();
    fmt::format_to(std::back_inserter(names), "{}{}", first ? "" : ", ", name);
    fmt::format_to(std::back_inserter(through), " WHEN {} THEN GREATEST(s.published_through, {})", name,
                   o.mark.version);
    fmt::format_to(std::back_inserter(seq), " WHEN {} THEN GREATEST(s.published_stream_seq, {})", name, o.mark.seq);
    fmt::format_to(std::back_inserter(guards), "{}(s.source = {} AND l.holder_id = {} AND l.lease_epoch = {}{})",
                   first ? "" : " OR ", name, conn.quote(o.guard.lease->holder), o.guard.lease->leaseEpoch,
                   o.guard.epoch != 0 ? fmt::format(" AND s.epoch = {}", o.guard.epoch) : "");
  }
  return fmt::format(
      "UPDATE outbox_source_state s FORCE INDEX (PRIMARY) JOIN outbox_bridge_lease l ON l.source = s.source AND "
      "l.expires_at > NOW(6) "
      "SET s.published_through = CASE s.source{} ELSE s.published_through END, "
      "s.published_stream_seq = CASE s.source{} ELSE s.published_stream_seq END "
      "WHERE s.source IN ({}) AND ({})",
      through, seq, names, guards);
}

}  // namespace outbox

#include "settle/settle_feed.h"

#include <iterator>
#include <utility>

namespace outbox {

void SettleFeed::begin() {
  std::lock_guard lock(mu_);
  session_ = ++sessions_;
  dropped_ += waiting_.size();
  waiting_.clear();
  cv_.notify_one();
}

void SettleFeed::end() {
  std::lock_guard lock(mu_);
  session_ = 0;
  waiting_.clear();
  cv_.notify_one();
}

void SettleFeed::hand(std::vector<Row>&& rows) {
  if (rows.empty()) return;
  {
    std::lock_guard lock(mu_);
    if (session_ == 0) return;
    const Clock::TimePoint now = clock_.now();
    for (Row& r : rows) r.ackedAt = now;
    if (waiting_.size() + rows.size() > bound_) {
      // The settle thread is behind (or recovering): it reads what it missed from the main
      // stream, which holds every row handed here.
      dropped_ += waiting_.size();
      waiting_.clear();
    }
    if (waiting_.empty()) {
      waiting_.swap(rows);
    } else {
      waiting_.insert(waiting_.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
    }
  }
  rows.clear();
  cv_.notify_one();
}

SettleFeed::Taken SettleFeed::take(std::chrono::nanoseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return woken_ || !waiting_.empty() || session_ != takenSession_; });
  woken_ = false;
  return takeWaiting();
}

SettleFeed::Taken SettleFeed::takeHanded() {
  std::lock_guard lock(mu_);
  return takeWaiting();
}

SettleFeed::Taken SettleFeed::takeWaiting() {
  Taken out;
  takenSession_ = session_;
  out.session = session_;
  out.rows.swap(waiting_);
  out.dropped = std::exchange(dropped_, 0);
  out.at = clock_.now();
  return out;
}

void SettleFeed::wake() {
  std::lock_guard lock(mu_);
  woken_ = true;
  cv_.notify_one();
}

}  // namespace outbox

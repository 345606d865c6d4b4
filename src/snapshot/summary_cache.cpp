#include "snapshot/summary_cache.h"

namespace outbox {

SummaryCache::SummaryCache(std::chrono::milliseconds interval, std::function<Clock::time_point()> now)
    : interval_(interval), now_(std::move(now)) {}

SummaryCache::Served SummaryCache::served(const Kept& kept, From from, Clock::time_point now) const {
  Served s;
  s.header = kept.header;
  s.from = from;
  s.age = now - kept.at;
  s.freshFor = std::max(Clock::duration::zero(), kept.at + interval_ - now);
  s.readAt = kept.readAt;
  return s;
}

Result<SummaryCache::Served> SummaryCache::get(const Read& read) {
  std::unique_lock lock(mu_);
  if (reading_) {
    // A read is under way: its result is this request's, whatever it is.
    const uint64_t awaited = reads_ + 1;
    readDone_.wait(lock, [&] { return reads_ >= awaited; });
    if (lastFailed_) return lastFailure_;
    return served(*kept_, From::kShared, now_());
  }
  Clock::time_point now = now_();
  if (kept_ && now - kept_->at < interval_) return served(*kept_, From::kCache, now);
  reading_ = true;
  lock.unlock();
  const Clock::time_point began = now_();
  const auto beganWall = std::chrono::system_clock::now();
  Result<SnapshotHeader> header = Status::transient("the summary read ended without an answer");
  try {
    header = read();
  } catch (...) {
    lock.lock();
    reading_ = false;
    lastFailed_ = true;
    lastFailure_ = Status::transient("the summary read failed");
    ++reads_;
    readDone_.notify_all();
    throw;
  }
  lock.lock();
  reading_ = false;
  ++reads_;
  lastFailed_ = !header.isOk();
  if (lastFailed_) {
    lastFailure_ = header.status();
  } else {
    kept_ = Kept{*header, began, beganWall};
  }
  readDone_.notify_all();
  if (lastFailed_) return lastFailure_;
  return served(*kept_, From::kRead, now_());
}

}  // namespace outbox

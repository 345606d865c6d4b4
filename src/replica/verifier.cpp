#include "replica/verifier.h"

#include <algorithm>
#include <random>

namespace outbox {

Verifier::Verifier(std::chrono::milliseconds interval, size_t historySize, std::function<double()> random)
    : interval_(interval), size_(std::max<size_t>(1, historySize)), random_(std::move(random)) {
  if (!random_) {
    random_ = [engine = std::mt19937_64(std::random_device{}())]() mutable {
      return std::uniform_real_distribution<double>(0, 1)(engine);
    };
  }
}

Verifier::Clock::duration Verifier::jittered() {
  return std::chrono::duration_cast<Clock::duration>(interval_ * (0.8 + 0.4 * random_()));
}

void Verifier::reset(const VersionState& state, Clock::time_point now) {
  history_.assign(1, state);
  pending_.reset();
  mismatchedReads_.clear();
  nextAt_ = now + jittered();
}

std::optional<VersionState> Verifier::at(uint64_t version) const {
  if (history_.empty() || version < history_.front().version) return std::nullopt;
  size_t i = version - history_.front().version;
  if (i >= history_.size() || history_[i].version != version) return std::nullopt;
  return history_[i];
}

std::optional<uint64_t> Verifier::match(const SnapshotHeader& summary) const {
  for (const auto& s : history_) {
    if (s.version >= summary.watermark && s.sum == summary.checksum && s.recordCount == summary.recordCount) {
      return s.version;
    }
  }
  return std::nullopt;
}

Verifier::Verdict Verifier::applied(const VersionState& state, Clock::time_point now) {
  if (!history_.empty() && state.version <= history_.back().version) return {};
  history_.push_back(state);
  if (history_.size() > size_) history_.pop_front();
  if (!pending_ || state.version < pending_->header.watermark) return {};
  if (state.sum == pending_->header.checksum && state.recordCount == pending_->header.recordCount) {
    pending_.reset();
    return verified(state.version, now);
  }
  if (state.version < pending_->header.watermark + size_ / 2) return {};
  ServedSummary p = std::move(*pending_);
  pending_.reset();
  return judge(p, now);
}

Verifier::Verdict Verifier::offer(const ServedSummary& summary, Clock::time_point now, bool idle) {
  if (summary.header.watermark < history_.front().version) {
    // Read before the oldest state kept: ask again once the bridge reads again.
    pending_.reset();
    soon(summary, now);
    return {Verdict::Kind::kLater};
  }
  pending_ = summary;
  // Ahead of the replica, or not matched while changes still arrive: compared as they do (a
  // replica that stops getting them asks again within 30 s, which shows it the stall).
  auto stallCheck = std::chrono::duration_cast<Clock::duration>(std::chrono::milliseconds(30'000) +
                                                                std::chrono::milliseconds(5'000) * random_());
  nextAt_ = now + std::min<Clock::duration>(jittered(), stallCheck);
  if (summary.header.watermark > history_.back().version) return {Verdict::Kind::kLater};
  if (auto at = match(summary.header)) {
    pending_.reset();
    return verified(*at, now);
  }
  return idle ? this->idle(now) : Verdict{Verdict::Kind::kLater};
}

Verifier::Verdict Verifier::idle(Clock::time_point now) {
  if (!pending_ || history_.back().version < pending_->header.watermark) return {};
  ServedSummary p = std::move(*pending_);
  pending_.reset();
  return judge(p, now);
}

Verifier::Verdict Verifier::judge(const ServedSummary& summary, Clock::time_point now) {
  if (auto version = match(summary.header)) return verified(*version, now);
  if (summary.readAt.empty() ||
      std::find(mismatchedReads_.begin(), mismatchedReads_.end(), summary.readAt) == mismatchedReads_.end()) {
    mismatchedReads_.push_back(summary.readAt);
  }
  soon(summary, now);
  Verdict v{Verdict::Kind::kMismatch};
  v.state = at(summary.header.watermark).value_or(history_.back());
  v.summary = summary.header;
  v.inARow = static_cast<int>(mismatchedReads_.size());
  return v;
}

Verifier::Verdict Verifier::verified(uint64_t version, Clock::time_point now) {
  mismatchedReads_.clear();
  nextAt_ = now + jittered();
  Verdict v{Verdict::Kind::kVerified};
  v.version = version;
  return v;
}

// Once the bridge reads the table again (a little after, so that pods asking at that moment share
// the read), but no later than the regular check.
void Verifier::soon(const ServedSummary& summary, Clock::time_point now) {
  auto after = std::chrono::duration_cast<Clock::duration>(summary.freshFor + std::chrono::milliseconds(100) +
                                                          std::chrono::milliseconds(1000) * random_());
  nextAt_ = now + std::min(after, jittered());
}

}  // namespace outbox

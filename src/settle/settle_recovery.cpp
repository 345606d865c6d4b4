#include "settle/settle_recovery.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace outbox {

namespace {

std::optional<uint64_t> headerValue(const nats::StoredMessage& m, const char* header) {
  auto it = m.headers.find(header);
  if (it == m.headers.end()) return std::nullopt;
  uint64_t v = 0;
  const std::string& text = it->second;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

Status notOurs(uint64_t seq, const char* what) {
  return Status::permanent(
      fmt::format("the message at sequence {} has no {}: the stream must have only this bridge "
                  "as writer",
                  seq, what));
}

Status tooManyDeleted(uint64_t from) {
  return Status::permanent(fmt::format("more than {} deleted messages in a row from sequence {}",
                                       kMaxDeletedWalk, from));
}

}  // namespace

Result<std::optional<SettledMark>> lastSettled(MessageReader& settled) {
  auto bounds = settled.bounds();
  if (!bounds.isOk()) return bounds.status();
  const uint64_t first = std::max<uint64_t>(bounds->first, 1);
  uint64_t walked = 0;
  for (uint64_t seq = bounds->last; seq >= first && seq > 0; --seq) {
    if (++walked > kMaxDeletedWalk) return tooManyDeleted(bounds->last);
    auto m = settled.at(seq);
    if (!m.isOk()) return m.status();
    if (!m->has_value()) continue;
    auto mark = settledMark((*m)->headers);
    if (!mark) return notOurs(seq, "Outbox-Settled-Through, -Seen or the key's headers");
    return std::optional<SettledMark>(std::move(*mark));
  }
  return std::optional<SettledMark>();
}

Result<uint64_t> firstSeqAbove(MessageReader& stream, const char* header, uint64_t value) {
  auto bounds = stream.bounds();
  if (!bounds.isOk()) return bounds.status();
  uint64_t lo = std::max<uint64_t>(bounds->first, 1);
  uint64_t hi = std::max(bounds->last + 1, lo);  // the answer is in [lo, hi]
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    // The first stored message at or after mid, below hi.
    std::optional<std::pair<uint64_t, uint64_t>> found;  // its sequence and header
    for (uint64_t seq = mid; seq < hi; ++seq) {
      if (seq - mid >= kMaxDeletedWalk) return tooManyDeleted(mid);
      auto m = stream.at(seq);
      if (!m.isOk()) return m.status();
      if (!m->has_value()) continue;
      auto v = headerValue(**m, header);
      if (!v) return notOurs(seq, header);
      found.emplace(seq, *v);
      break;
    }
    // None stored from mid on, or one above `value`: reading may start at mid; else after it.
    if (!found || found->second > value) {
      hi = mid;
    } else {
      lo = found->first + 1;
    }
  }
  return lo;
}

Clock::TimePoint steadyTimeOf(int64_t storedNanos, Clock::TimePoint now, int64_t nowWallNanos) {
  const auto age = std::chrono::nanoseconds(std::max<int64_t>(0, nowWallNanos - storedNanos));
  return now - std::chrono::duration_cast<Clock::TimePoint::duration>(age);
}

}  // namespace outbox

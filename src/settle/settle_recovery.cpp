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

Result<std::optional<nats::StoredMessage>> MessageReader::firstFrom(uint64_t seq, uint64_t end) {
  for (uint64_t at = seq; at < end; ++at) {
    if (at - seq >= kMaxDeletedWalk) return tooManyDeleted(seq);
    auto m = this->at(at);
    if (!m.isOk()) return m.status();
    if (m->has_value()) return std::move(*m);
  }
  return std::optional<nats::StoredMessage>();
}

Result<std::optional<nats::StoredMessage>> MessageReader::last() {
  auto bounds = this->bounds();
  if (!bounds.isOk()) return bounds.status();
  const uint64_t first = std::max<uint64_t>(bounds->first, 1);
  uint64_t walked = 0;
  for (uint64_t seq = bounds->last; seq >= first && seq > 0; --seq) {
    if (++walked > kMaxDeletedWalk) return tooManyDeleted(bounds->last);
    auto m = this->at(seq);
    if (!m.isOk()) return m.status();
    if (m->has_value()) return std::move(*m);
  }
  return std::optional<nats::StoredMessage>();
}

Result<std::optional<SettledMark>> lastSettled(MessageReader& settled) {
  auto last = lastStored(settled);
  if (!last.isOk()) return last.status();
  if (!last->has_value()) return std::optional<SettledMark>();
  auto mark = settledMark((*last)->headers);
  if (!mark) return notOurs((*last)->seq, "Outbox-Settled-Through, -Seen or the key's headers");
  mark->seq = (*last)->seq;
  return std::optional<SettledMark>(std::move(*mark));
}

namespace {

// The lowest sequence from which every stored message's `of` is above `value` (firstSeqAbove).
// `of` returns nullopt for a message that has no such value (`what` names it).
template <typename Of>
Result<uint64_t> firstSeqWhere(MessageReader& stream, const char* what, uint64_t value, Of of) {
  auto bounds = stream.bounds();
  if (!bounds.isOk()) return bounds.status();
  uint64_t lo = std::max<uint64_t>(bounds->first, 1);
  uint64_t hi = std::max(bounds->last + 1, lo);  // the answer is in [lo, hi]
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    // The first stored message at or after mid, below hi.
    std::optional<std::pair<uint64_t, uint64_t>> found;  // its sequence and header
    auto m = stream.firstFrom(mid, hi);
    if (!m.isOk()) return m.status();
    if (m->has_value()) {
      std::optional<uint64_t> v = of(**m);
      if (!v) return notOurs((*m)->seq, what);
      found.emplace((*m)->seq, *v);
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

}  // namespace

Result<uint64_t> firstSeqAbove(MessageReader& stream, const char* header, uint64_t value) {
  return firstSeqWhere(stream, header, value,
                       [header](const nats::StoredMessage& m) { return headerValue(m, header); });
}

Result<uint64_t> firstSeqStoredFrom(MessageReader& stream, int64_t nanos) {
  if (nanos <= 0) {
    return firstSeqWhere(stream, "time", 0, [](const nats::StoredMessage&) { return std::optional<uint64_t>(1); });
  }
  return firstSeqWhere(stream, "time stored", static_cast<uint64_t>(nanos - 1), [](const nats::StoredMessage& m) {
    return m.timestampNanos > 0 ? std::optional<uint64_t>(static_cast<uint64_t>(m.timestampNanos)) : std::nullopt;
  });
}

Clock::TimePoint steadyTimeOf(int64_t storedNanos, Clock::TimePoint now, int64_t nowWallNanos) {
  const auto age = std::chrono::nanoseconds(std::max<int64_t>(0, nowWallNanos - storedNanos));
  return now - std::chrono::duration_cast<Clock::TimePoint::duration>(age);
}

}  // namespace outbox

// The settle thread's reads (docs/design.md, "The settled stream (issue 36)", "Recovery"): where a
// settle session starts, the settled tail it leaves out, and the main stream's messages it replays.
#include <charconv>

#include <fmt/format.h>

#include "common/log.h"
#include "settle/jetstream_reader.h"
#include "settle/settle_recovery.h"
#include "settle/settle_thread.h"
#include "settle/settled_message.h"

namespace outbox {

using namespace std::chrono_literals;

namespace {

// How long a read waits for the next message of a range the stream holds.
constexpr std::chrono::milliseconds kReadIdle = 5s;

uint64_t headerU64(const nats::StoredMessage& m, const char* name) {
  auto it = m.headers.find(name);
  uint64_t v = 0;
  if (it != m.headers.end()) std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  return v;
}

int64_t wallNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Every message of `stream` (subjects `subject`) from `fromSeq` through `lastSeq`, which it holds,
// to `each`, in order, through an ordered consumer: memory for one message at a time.
template <typename Each>
Status readThrough(nats::JetStream& js, const std::string& stream, const std::string& subject, uint64_t fromSeq,
                   uint64_t lastSeq, Each each) {
  if (fromSeq > lastSeq) return Status::ok();
  auto sub = js.subscribe(stream, subject, fromSeq);
  if (!sub.isOk()) return sub.status();
  while (true) {
    auto m = (*sub)->next(kReadIdle);
    if (!m.isOk()) return m.status();
    if (!m->has_value()) {
      return Status::transient(fmt::format("no message of stream {} came for {} ms while reading sequences {} to {}",
                                           stream, kReadIdle.count(), fromSeq, lastSeq));
    }
    const uint64_t seq = (*m)->seq;
    OUTBOX_RETURN_IF_ERROR(each(**m));
    if (seq >= lastSeq) return Status::ok();
  }
}

}  // namespace

Status SettleThread::recover() {
  JetStreamReader settled(*js_, source_.settledStream), main(*js_, source_.stream);
  auto state = js_->streamState(source_.settledStream);
  if (!state.isOk()) return state.status();
  // The first publish is fenced on the stream's last sequence only: its last message may be one
  // whose id this session does not know (another leader's).
  expectedSeq_ = state->lastSeq;
  lastMsgId_.clear();
  duplicates_ = 0;
  auto last = lastSettled(settled);
  if (!last.isOk()) return last.status();
  uint64_t through = 0;
  if (last->has_value()) {
    through = (*last)->through;
  } else {
    // Nothing settled yet: the changes the main stream took from settle_max before the settled
    // stream's making on; purged by an operator: from settle_max before its last message. A key
    // pending then changed at most settle_max before (none is lost: a stream deleted and made
    // again, by this bridge or a standby's start, included); those settled then may settle twice.
    const int64_t settleMax = std::chrono::nanoseconds(source_.settleMax).count();
    const int64_t fromNanos = (state->lastSeq == 0 ? state->createdNanos : state->lastTimeNanos) - settleMax;
    auto from = firstSeqStoredFrom(main, fromNanos);
    if (!from.isOk()) return from.status();
    auto tip = lastStored(main);
    if (!tip.isOk()) return tip.status();
    if (tip->has_value()) {
      through = headerU64(**tip, "Outbox-Version");  // none stored since: everything before
      auto first = main.firstFrom(*from, (*tip)->seq + 1);
      if (!first.isOk()) return first.status();
      if (first->has_value()) through = headerU64(**first, "Outbox-Version") - 1;
    }
  }
  settler_.emplace(
      Settler::Options{source_.settle, source_.settleMax, static_cast<size_t>(source_.settleMaxKeys)});
  settler_->restart(through);
  // A gap right after `through` in the same epoch as the last settled message is versions the main
  // stream no longer holds (a purge, max_age): said and counted by take(). Some of them the tail
  // may stand for; the rest are lost to the settled stream.
  lastEpoch_ = last->has_value() ? (*last)->epoch : 0;
  uint64_t tail = 0;
  if (last->has_value()) {
    // The settled messages that may stand for versions above `through`: theirs are left out.
    auto tailFrom = firstSeqAbove(settled, kSettledSeenHeader, through);
    if (!tailFrom.isOk()) return tailFrom.status();
    OUTBOX_RETURN_IF_ERROR(readThrough(*js_, source_.settledStream, settledPrefix(source_.subjectPrefix) + ".>",
                                       *tailFrom, (*last)->seq, [&](const nats::StoredMessage& m) {
                                         auto mark = settledMark(m.headers);
                                         if (!mark) {
                                           return Status::permanent(fmt::format(
                                               "the message at sequence {} of stream {} has no settled marks: the "
                                               "stream must have only this bridge as writer",
                                               m.seq, source_.settledStream));
                                         }
                                         settler_->alreadySettled(mark->key, mark->version);
                                         ++tail;
                                         return Status::ok();
                                       }));
  }
  OUTBOX_RETURN_IF_ERROR(readMain("recovery"));
  log_->info("settled stream {}: settling after version {} ({} settled message(s) read back, {} key(s) pending, "
             "version {} seen)",
             source_.settledStream, through, tail, settler_->pendingKeys(), settler_->seen());
  return Status::ok();
}

Status SettleThread::readMain(const char* why) {
  JetStreamReader main(*js_, source_.stream);
  // The clocks first: every message read is then stamped no later than any the relay hands after
  // this read's range (each acknowledged after the tip below, handed later still), so a change
  // read back cannot settle a key that changed again before its due time (settle_feed.h).
  const auto now = clock_.now();
  const int64_t wall = wallNanos();
  // The range ends at the last message the stream holds: a read waits for its last sequence.
  auto tip = lastStored(main);
  if (!tip.isOk()) return tip.status();
  if (!tip->has_value()) return Status::ok();
  auto from = firstSeqAbove(main, "Outbox-Version", settler_->seen());
  if (!from.isOk()) return from.status();
  Status s = readThrough(*js_, source_.stream, source_.subjectPrefix + ".>", *from, (*tip)->seq,
                         [&](nats::StoredMessage& m) {
                           const uint64_t epoch = headerU64(m, "Outbox-Epoch");
                           auto change = mainChange(m.subject, m.data, m.headers);
                           if (!change) {
                             return Status::permanent(fmt::format(
                                 "the message at sequence {} of stream {} has no Outbox-Version or entity headers",
                                 m.seq, source_.stream));
                           }
                           take(change->key, change->version, epoch, std::move(change->message),
                                steadyTimeOf(m.timestampNanos, now, wall));
                           return Status::ok();
                         });
  if (s.isOk()) return s;
  std::string message = fmt::format("reading stream {} for {}: {}", source_.stream, why, s.message());
  return s.isPermanent() ? Status::permanent(std::move(message)) : Status::transient(std::move(message));
}

}  // namespace outbox

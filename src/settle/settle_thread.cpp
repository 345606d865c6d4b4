// The settle thread's loop: its sessions, the rows the relay hands over, the settled publishes and
// their acks (docs/design.md, "The settled stream (issue 36)", "Where it runs"). Recovery's reads
// are in settle_thread_reads.cpp.
#include "settle/settle_thread.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "common/backoff.h"
#include "common/log.h"
#include "relay/jetstream_publisher.h"
#include "settle/settled_message.h"

namespace outbox {

using namespace std::chrono_literals;

SettleThread::SettleThread(const SourceConfig& source, const NatsConfig& nats, nats::Connection& connection,
                           SettleFeed& feed, SourceMetrics& metrics, StopSignal& stop)
    : source_(source),
      nats_(nats),
      connection_(connection),
      feed_(feed),
      metrics_(metrics),
      stop_(stop),
      log_(sourceLogger(source.name)),
      subject_(SubjectTemplate::forSource(source.subject, source.subjectPrefix)) {}

void SettleThread::run() {
  Backoff backoff(100ms, 10'000ms);
  std::string lastProblem;
  bool failed = false;
  while (!stop_.stopped()) {
    // Waits for a relay session (after a failure, it may still be on); rows handed before this
    // settle session begins are left to its recovery, which reads them from the main stream.
    const SettleFeed::Taken waiting = feed_.take(failed ? 0s : 1s);
    failed = false;
    if (waiting.session == 0) continue;
    Status s = session(waiting.session);
    if (js_) js_->abandonPending();
    settler_.reset();
    toSend_.clear();
    inFlight_.clear();
    metrics_.settlePendingKeys = 0;
    if (stop_.stopped()) break;
    if (s.isOk()) {  // the relay's session ended: this one ends with it
      backoff.reset();
      lastProblem.clear();
      continue;
    }
    metrics_.settleErrors++;
    // One no retry mends (the streams are not as the bridge wrote them, say): the settled stream
    // stops until an operator acts, and says so.
    if (s.isPermanent()) metrics_.settleStuck = 1;
    failed = true;
    auto delay = backoff.next();
    if (s.isPermanent() && s.message() != lastProblem) {
      log_->error("settled stream {}: {}; the settled stream is stuck (outbox_settle_stuck) until that is mended, "
                  "retrying every {} ms at most",
                  source_.settledStream, s.message(), 10'000);
    } else if (s.message() != lastProblem || backoff.attempts() <= 1) {
      log_->warn("settled stream {}: {}; recovering in {} ms", source_.settledStream, s.message(), delay.count());
    }
    lastProblem = s.message();
    stop_.waitFor(delay);
  }
}

Status SettleThread::session(uint64_t relaySession) {
  OUTBOX_RETURN_IF_ERROR(prepare());
  OUTBOX_RETURN_IF_ERROR(recover());
  metrics_.settleStuck = 0;
  while (!stop_.stopped()) {
    OUTBOX_RETURN_IF_ERROR(takeAcks(clock_.now()));
    // What the relay handed goes in before what is due comes out, and due is asked at the take's
    // time: every row the take left behind was stamped later, so a change handed before its key's
    // due time keeps the key pending, also when this thread comes here late (descheduled, or busy
    // with acks or a read of the main stream).
    SettleFeed::Taken handed = feed_.takeHanded();
    if (handed.session != relaySession) return Status::ok();
    OUTBOX_RETURN_IF_ERROR(takeFed(handed.rows));
    OUTBOX_RETURN_IF_ERROR(publishDue(handed.at));
    publishGauges();
    SettleFeed::Taken taken = waitForWork(clock_.now());
    if (taken.session != relaySession) return Status::ok();
    OUTBOX_RETURN_IF_ERROR(takeFed(taken.rows));
  }
  return Status::ok();
}

Status SettleThread::prepare() {
  if (!js_) {
    auto js = nats::JetStream::create(connection_, nats_.ackTimeout, nats_.maxPending + 16, nats_.jsDomain);
    if (!js.isOk()) return js.status();
    js_ = std::move(js).value();
  }
  return ensureSourceStream(*js_, source_, source_.settledStream, settledPrefix(source_.subjectPrefix) + ".>",
                            warnedReplicas_);
}

void SettleThread::take(const SettleKey& key, uint64_t version, uint64_t epoch, MainMessage message,
                        Clock::TimePoint at) {
  const uint64_t expected = settler_->seen() + 1;
  // Versions are dense within an epoch: a gap between two changes of one epoch is versions the
  // main stream no longer holds (a bump's gap lies between two epochs).
  if (version > expected && epoch != 0 && epoch == lastEpoch_) {
    metrics_.settleMissing += version - expected;
    log_->warn("versions {} to {} are not in stream {} (purged or expired): those not yet settled are lost to the "
               "settled stream, their keys settle again when they next change",
               expected, version - 1, source_.stream);
  }
  if (version >= expected) lastEpoch_ = epoch;
  settler_->changed(key, version, std::move(message), at);
}

Status SettleThread::takeFed(std::vector<SettleFeed::Row>& rows) {
  for (SettleFeed::Row& fed : rows) {
    const uint64_t version = fed.row.version;
    if (version <= settler_->seen()) continue;
    if (version > settler_->seen() + 1) {
      // Dropped from the feed (behind, or recovering), or a bump's gap: the main stream says.
      OUTBOX_RETURN_IF_ERROR(readMain("the versions the feed skipped"));
      if (version <= settler_->seen()) continue;
    }
    // The main message as the relay sent it, the bridge's Nats-* headers left out.
    const nats::OutgoingMessage m = toMessage(source_, subject_, fed.row, fed.epoch, 0, false);
    MainMessage message{m.subject, std::string(m.data), {}};
    for (const auto& [name, value] : m.headers) appendHeader(message.headers, name, value);
    for (const auto& [name, value] : m.moreHeaders) appendHeader(message.headers, name, value);
    take(SettleKey{std::move(fed.row.entityType), std::move(fed.row.entityKey)}, version, fed.epoch,
         std::move(message), fed.ackedAt);
  }
  return Status::ok();
}

Status SettleThread::publishDue(Clock::TimePoint dueAt) {
  for (Settled& s : settler_->due(dueAt)) toSend_.push_back(std::move(s));
  const auto now = clock_.now();
  while (!toSend_.empty() && inFlight_.size() < static_cast<size_t>(nats_.maxPending)) {
    const Settled& s = toSend_.front();
    // Fenced as the main stream's publishes are: stored only as the continuation of what this
    // session read (docs/design.md, "Recovery").
    const nats::OutgoingMessage m = settledPublish(source_.name, source_.subjectPrefix, s, expectedSeq_, lastMsgId_);
    // Its main message fit, with less: one key that cannot settle must not stop the others.
    if (const int64_t max = connection_.maxPayload(); max > 0 && payloadBytes(m) > static_cast<size_t>(max)) {
      metrics_.settleTooLarge++;
      log_->warn("settled stream {}: key {}/{} not settled at version {}: its settled message of {} bytes is over "
                 "the server's max_payload of {} bytes (the settled headers are added to its main message); it "
                 "settles again when it next changes",
                 source_.settledStream, s.key.entityType, s.key.entityKey, s.version, payloadBytes(m), max);
      (void)settler_->published(s.version, now);
      toSend_.pop_front();
      continue;
    }
    OUTBOX_RETURN_IF_ERROR(js_->publishAsync(m));
    inFlight_.push_back(InFlight{std::move(toSend_.front()), now, expectedSeq_, lastMsgId_});
    toSend_.pop_front();
    ++expectedSeq_;
    lastMsgId_ = settledMsgId(source_.name, inFlight_.back().settled.version);
  }
  return Status::ok();
}

Status SettleThread::takeAcks(Clock::TimePoint now) {
  acks_.clear();
  js_->takeAcks(acks_);
  const std::string prefix = source_.name + ":settled:";
  for (const nats::AckEvent& ack : acks_) {
    uint64_t version = 0;
    const char* begin = ack.msgId.data() + std::min(prefix.size(), ack.msgId.size());
    const char* end = ack.msgId.data() + ack.msgId.size();
    if (!ack.msgId.starts_with(prefix) || std::from_chars(begin, end, version).ptr != end) continue;  // abandoned
    if (!ack.ok) {
      return Status::transient(fmt::format("the settled publish of version {} failed ({}){}", version, ack.error,
                                           ack.wrongLastSeq ? ": another writer, or the stream changed" : ""));
    }
    auto it = std::find_if(inFlight_.begin(), inFlight_.end(),
                           [&](const InFlight& f) { return f.settled.version == version; });
    if (it == inFlight_.end()) continue;
    if (ack.duplicate) {
      // Acks come in the order of the publishes: one still in flight before it is not this case.
      if (it != inFlight_.begin()) {
        return Status::transient(fmt::format(
            "the settled publish of version {} was a duplicate while earlier ones were unacknowledged", version));
      }
      takeDuplicate(now);
      return Status::ok();  // the acks after it in acks_ are of publishes sent again
    }
    metrics_.settledMessages++;
    metrics_.settleSquashed += it->settled.count - 1;
    if (it->settled.early) metrics_.settledEarly++;
    inFlight_.erase(it);
    if (auto delay = settler_->published(version, now)) {
      metrics_.observeSettleDelay(std::chrono::duration<double>(*delay).count());
    }
  }
  if (!inFlight_.empty() && now - inFlight_.front().sentAt > nats_.ackTimeout) {
    return Status::transient(fmt::format("the settled stream has not acknowledged version {} within {} ms",
                                         inFlight_.front().settled.version, nats_.ackTimeout.count()));
  }
  return Status::ok();
}

void SettleThread::takeDuplicate(Clock::TimePoint now) {
  InFlight& it = inFlight_.front();
  const uint64_t version = it.settled.version;
  // The server answers a Nats-Msg-Id it holds in its duplicate window with the first copy's
  // sequence, whether or not the stream still holds that copy; the id names the version, so the
  // message is the same. The stream did not move: each later publish, fenced on a sequence one
  // past what it holds, is refused; they are abandoned and sent again on the duplicate's fence.
  if (++duplicates_ == 1) {
    log_->info("settled stream {}: version {} was settled before (the server still holds its message id, the stream "
               "was purged?): not settled twice",
               source_.settledStream, version);
  }
  (void)settler_->published(version, now);
  expectedSeq_ = it.fenceSeq;
  lastMsgId_ = std::move(it.fenceMsgId);
  js_->abandonPending();
  for (auto later = inFlight_.end(); later != std::next(inFlight_.begin());) {
    --later;
    toSend_.push_front(std::move(later->settled));
  }
  inFlight_.clear();
}

SettleFeed::Taken SettleThread::waitForWork(Clock::TimePoint now) {
  std::chrono::nanoseconds wait = 1s;  // the relay's session ending wakes the feed
  if (!toSend_.empty()) wait = 0ns;
  if (auto due = settler_->nextDue()) wait = std::clamp<std::chrono::nanoseconds>(*due - now, 0ns, wait);
  if (inFlight_.empty()) return feed_.take(wait);
  // Acks come through the JetStream context, rows through the feed: wait on the first, briefly.
  js_->waitForAcks(std::chrono::ceil<std::chrono::milliseconds>(std::clamp<std::chrono::nanoseconds>(wait, 1ms, 5ms)));
  return feed_.take(0ns);
}

void SettleThread::publishGauges() { metrics_.settlePendingKeys = settler_ ? settler_->pendingKeys() : 0; }

}  // namespace outbox

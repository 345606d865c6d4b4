#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/logger.h>

#include "common/clock.h"
#include "common/status.h"
#include "common/stop_token.h"
#include "config/config.h"
#include "config/subject_template.h"
#include "metrics/source_metrics.h"
#include "nats/jetstream.h"
#include "settle/settle_feed.h"
#include "settle/settler.h"

namespace outbox {

// The settle thread of one source that settles (docs/design.md, "The settled stream (issue 36)"):
// while the relay leads a session (the feed says so), it recovers the pending keys from the two
// streams, then takes the rows the relay hands over, publishes each key's latest change once due,
// fenced on the settled stream's last message, and takes their acks. A failure ends its session
// (the next one recovers again, after a backoff); so does the end of the relay's session. Its
// own JetStream context on the shared connection: its reads and publishes never hold the relay
// back. `source`, `nats`, `connection`, `feed`, `metrics` and `stop` must outlive it; `stop`
// must wake the feed (SettleFeed::wake) when requested.
class SettleThread {
 public:
  SettleThread(const SourceConfig& source, const NatsConfig& nats, nats::Connection& connection, SettleFeed& feed,
               SourceMetrics& metrics, StopSignal& stop);
  // The JetStream context and the settled stream, made or checked as the main stream is (each
  // session begins with it; `run` calls it at start too, refusing a stream with other subjects).
  Status prepare();
  // Settles until stop is requested.
  void run();

 private:
  // One settle session, until the relay's session `relaySession` ends, stop, or a failure.
  Status session(uint64_t relaySession);
  // Rebuilds the settler from the settled stream's last Through and tail and the main stream
  // after that Through (docs/design.md, "Recovery").
  Status recover();
  // Every main-stream message with a version above the settler's seen(), through the last
  // stored one, into the settler (at the time the server stored it). `why` names the read in
  // errors and warnings.
  Status readMain(const char* why);
  // A change the main stream holds, into the settler; a gap of versions the stream does not hold
  // (a purge or an expiry: not an epoch bump's) is counted and said.
  void take(const SettleKey& key, uint64_t version, uint64_t epoch, MainMessage message, Clock::TimePoint at);
  // The rows the relay handed over: a version past the next the settler awaits reads the gap from
  // the main stream first.
  Status takeFed(std::vector<SettleFeed::Row>& rows);
  // Publishes what is due at `dueAt` (at most nats.max_pending in flight), fenced.
  Status publishDue(Clock::TimePoint dueAt);
  // Takes the settled stream's acks: a failed or overdue one ends the session; a duplicate is
  // takeDuplicate's.
  Status takeAcks(Clock::TimePoint now);
  // The server already took the settled message of the oldest in flight (a version settled before
  // a purge of the settled stream, within its duplicate window): it counts as settled, and what
  // was sent after it, fenced on a sequence the duplicate did not take, is sent again.
  void takeDuplicate(Clock::TimePoint now);
  // Waits for the next due time, the feed, or acks (at most 50 ms while publishes are in flight).
  SettleFeed::Taken waitForWork(Clock::TimePoint now);
  void publishGauges();

  const SourceConfig& source_;
  const NatsConfig& nats_;
  nats::Connection& connection_;
  SettleFeed& feed_;
  SourceMetrics& metrics_;
  StopSignal& stop_;
  SteadyClock clock_;
  std::shared_ptr<spdlog::logger> log_;
  SubjectTemplate subject_;
  std::unique_ptr<nats::JetStream> js_;
  bool warnedReplicas_ = false;

  // This session's.
  std::optional<Settler> settler_;
  uint64_t lastEpoch_ = 0;             // the epoch of the last change taken (0: unknown)
  std::deque<Settled> toSend_;         // due, in the order to publish them
  struct InFlight {
    Settled settled;  // kept to publish again after a duplicate (takeDuplicate)
    Clock::TimePoint sentAt;
    uint64_t fenceSeq = 0;   // the Nats-Expected-Last-Sequence it was sent with
    std::string fenceMsgId;  // and its Nats-Expected-Last-Msg-Id ("": none)
  };
  std::deque<InFlight> inFlight_;      // sent, oldest first
  uint64_t expectedSeq_ = 0;           // the settled stream's last sequence once all sent is stored
  std::string lastMsgId_;              // the last settled message's id ("" at a session's first)
  std::vector<nats::AckEvent> acks_;   // takeAcks' scratch
  uint64_t duplicates_ = 0;            // this session's duplicate acks (takeDuplicate)
};

}  // namespace outbox

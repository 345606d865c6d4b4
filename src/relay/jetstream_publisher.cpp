#include "relay/jetstream_publisher.h"

#include <charconv>
#include <utility>

#include <fmt/format.h>

#include "common/log.h"
#include "relay/poison.h"
#include "relay/row_headers.h"

namespace outbox {

namespace {

std::optional<uint64_t> parseU64(std::string_view text) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// Walking back over deleted messages to find the newest stored one stops after this many.
constexpr int kMaxTipProbe = 10'000;

}  // namespace

std::vector<std::pair<const char*, std::string>> bridgeHeaders(const SourceConfig& source, const OutboxRow& row,
                                                               uint64_t version, uint64_t epoch,
                                                               uint64_t expectedLastSeq, bool fenceOnPreviousVersion) {
  // The server's own headers first, before any value that comes from a row: nats-server before
  // 2.14 finds a header by the first occurrence of its name in the whole block, and gives up when
  // that is not at a line's start — an entity key holding "Nats-Expected-Last-Msg-Id" ahead of
  // the fence's line would switch the fence off (docs/design.md, "Headers, encoded once").
  std::vector<std::pair<const char*, std::string>> headers;
  headers.reserve(10);
  headers.emplace_back("Nats-Msg-Id", fmt::format("{}:{}", source.name, version));
  headers.emplace_back("Nats-Expected-Last-Sequence", std::to_string(expectedLastSeq));
  if (fenceOnPreviousVersion) {
    headers.emplace_back("Nats-Expected-Last-Msg-Id", fmt::format("{}:{}", source.name, version - 1));
  }
  headers.insert(headers.end(), {
      {"Outbox-Source", source.name},
      {"Outbox-Epoch", std::to_string(epoch)},
      {"Outbox-Version", std::to_string(version)},
      {"Outbox-Entity-Type", row.entityType},
      {"Outbox-Entity-Key", row.entityKey},
      {"Outbox-Op", row.op},
  });
  if (row.op == "upsert") headers.emplace_back("Content-Type", "application/json");
  return headers;
}

nats::OutgoingMessage toMessage(const SourceConfig& source, const SubjectTemplate& subject, const OutboxRow& row,
                                uint64_t epoch, uint64_t expectedLastSeq, bool fenceOnPreviousVersion) {
  nats::OutgoingMessage m;
  if (row.payload) m.data = *row.payload;
  m.headers = bridgeHeaders(source, row, row.version, epoch, expectedLastSeq, fenceOnPreviousVersion);
  if (!row.subject.empty()) {  // checked by findPoison
    m.subject = row.subject;
    m.moreHeaders = row.moreHeaders;
    return m;
  }
  m.subject = subject.render(SubjectFields{source.name, row.entityType, row.entityKey, row.op});
  // A row whose headers cannot travel is poison (findPoison): what parses is sent.
  if (row.headers) (void)parseRowHeaders(*row.headers, m.moreHeaders);
  return m;
}

Status ensureSourceStream(nats::JetStream& js, const SourceConfig& source, const std::string& name,
                          const std::string& subject, bool& warnedReplicas) {
  nats::StreamSettings settings;
  settings.name = name;
  settings.subject = subject;
  settings.duplicateWindow = source.duplicateWindow;
  settings.replicas = source.replicas;
  settings.maxAge = source.maxAge;
  int replicas = 0;
  OUTBOX_RETURN_IF_ERROR(js.ensureStream(settings, &replicas));
  if (replicas != source.replicas && !std::exchange(warnedReplicas, true)) {
    // Changing a stream's replicas is the operator's decision (it moves data between servers):
    // the bridge publishes into the stream as it is.
    sourceLogger(source.name)
        ->warn("stream {} exists with {} replica(s), this source's config says replicas = {}; leaving it as it is "
               "(change it on the server if it should have {})",
               name, replicas, source.replicas, source.replicas);
  }
  return Status::ok();
}

JetStreamPublisher::JetStreamPublisher(const SourceConfig& source, const NatsConfig& nats,
                                       nats::Connection& connection)
    : source_(source),
      subject_(SubjectTemplate::forSource(source.subject, source.subjectPrefix)),
      nats_(nats),
      connection_(connection) {}

Status JetStreamPublisher::prepare() {
  if (!js_) {
    auto js = nats::JetStream::create(connection_, nats_.ackTimeout, nats_.maxPending + 16, nats_.jsDomain);
    if (!js.isOk()) return js.status();
    js_ = std::move(js).value();
  }
  OUTBOX_RETURN_IF_ERROR(ensureSourceStream(*js_, source_, source_.stream, source_.subjectPrefix + ".>",
                                            warnedReplicas_));
  if (!source_.latestStream.empty()) {
    // nats-server fills it from the main stream; the bridge only sees that it is there. Neither
    // a failure here nor a stream set up otherwise stops the main stream's publishing.
    auto latest = js_->ensureLatestStream(source_.latestStream, source_.stream, source_.replicas);
    if (latest.isOk() && latest->lag == 0) warnedLag_ = false;
    if (!latest.isOk()) {
      sourceLogger(source_.name)->warn("latest stream {}: {} (tried again at the next session)", source_.latestStream,
                                       latest.status().message());
    } else if (!latest->differs.empty() && !std::exchange(warnedLatest_, true)) {
      sourceLogger(source_.name)
          ->warn("latest stream {} exists, but {}; leaving it as it is (it should source {} with "
                 "max_msgs_per_subject = 1 and no subjects or limits of its own)",
                 source_.latestStream, latest->differs, source_.stream);
    } else if (latest->lag > 0 && !std::exchange(warnedLag_, true)) {
      // nats-server before 2.10.14 checks the fence headers of what a stream sources against the
      // sourcing stream's own sequence: the latest stream fills only while it keeps step with the
      // main one (README, "Latest value per key").
      sourceLogger(source_.name)
          ->warn("latest stream {} is {} message(s) behind {}; if it stays behind, nats-server is older than 2.10.14 "
                 "and the two streams' sequences differ (the main one lost messages before the latest one took "
                 "them): upgrade nats-server (a latest stream made while the main one still starts at sequence 1 "
                 "keeps step on any version)",
                 source_.latestStream, latest->lag, source_.stream);
    }
  }
  return Status::ok();
}

Result<StreamTip> JetStreamPublisher::tip() {
  auto state = js_->streamState(source_.stream);
  if (!state.isOk()) return state.status();
  StreamTip tip;
  tip.lastSeq = state->lastSeq;
  if (state->messages == 0) return tip;
  uint64_t floor = std::max<uint64_t>(state->firstSeq, 1);
  int probes = 0;
  for (uint64_t seq = state->lastSeq; seq >= floor && probes < kMaxTipProbe; --seq, ++probes) {
    auto msg = js_->getMessage(source_.stream, seq);
    if (!msg.isOk()) return msg.status();
    if (!msg->has_value()) continue;  // deleted: look further back
    const auto& headers = (*msg)->headers;
    auto version = headers.count("Outbox-Version") ? parseU64(headers.at("Outbox-Version")) : std::nullopt;
    auto epoch = headers.count("Outbox-Epoch") ? parseU64(headers.at("Outbox-Epoch")) : std::nullopt;
    if (!version || !epoch) {
      return Status::permanent(fmt::format(
          "stream {} holds a message at sequence {} that the bridge did not write (no Outbox-Version/Outbox-Epoch); "
          "the stream must have only this bridge as writer",
          source_.stream, seq));
    }
    tip.version = *version;
    tip.epoch = *epoch;
    tip.seq = seq;
    return tip;
  }
  return tip;
}

Status JetStreamPublisher::publish(const OutboxRow& row, uint64_t epoch, uint64_t expectedLastSeq,
                                   bool fenceOnPreviousVersion) {
  return js_->publishAsync(toMessage(source_, subject_, row, epoch, expectedLastSeq, fenceOnPreviousVersion));
}

void JetStreamPublisher::takeAcks(std::vector<VersionAck>& out) {
  scratch_.clear();
  js_->takeAcks(scratch_);
  const size_t prefix = source_.name.size() + 1;
  for (auto& event : scratch_) {
    VersionAck ack;
    auto version = event.msgId.size() > prefix ? parseU64(std::string_view(event.msgId).substr(prefix)) : std::nullopt;
    if (!version) continue;  // abandoned while its ack came (JetStream::onAck): that session is over
    ack.version = *version;
    ack.seq = event.seq;
    ack.ok = event.ok;
    ack.fenced = event.wrongLastSeq;
    ack.error = std::move(event.error);
    if (ack.ok && event.duplicate) checkDuplicate(event.msgId, ack);
    out.push_back(std::move(ack));
  }
}

void JetStreamPublisher::checkDuplicate(const std::string& msgId, VersionAck& ack) {
  // The server deduplicated by Nats-Msg-Id and named the first copy's sequence; that copy may
  // since have been deleted, purged or expired. Only a stream that holds it there counts.
  auto stored = js_->getMessage(source_.stream, ack.seq);
  if (stored.isOk() && stored->has_value()) {
    auto it = (*stored)->headers.find("Nats-Msg-Id");
    if (it != (*stored)->headers.end() && it->second == msgId) return;
  }
  ack.ok = false;
  ack.error = stored.isOk()
                  ? fmt::format("acknowledged as a duplicate of sequence {}, which no longer holds it (deleted or "
                                "expired inside the duplicate window of {}); it is published again once that "
                                "window has passed",
                                ack.seq, formatDuration(source_.duplicateWindow))
                  : fmt::format("acknowledged as a duplicate of sequence {}, which could not be checked: {}", ack.seq,
                                stored.status().message());
}

void JetStreamPublisher::waitForAcks(std::chrono::milliseconds timeout) { js_->waitForAcks(timeout); }

void JetStreamPublisher::abandon() {
  if (js_) js_->abandonPending();
}

std::optional<std::string> JetStreamPublisher::poisonReason(OutboxRow& row) {
  return findPoison(source_, subject_, row, static_cast<size_t>(connection_.maxPayload()));
}

}  // namespace outbox

#include "settle/jetstream_reader.h"

namespace outbox {

Result<MessageReader::Bounds> JetStreamReader::bounds() {
  auto state = js_.streamState(stream_);
  if (!state.isOk()) return state.status();
  // Never written: 0 and 0; purged: the next sequence and the last.
  direct_ = state->allowDirect;
  return Bounds{state->firstSeq, state->lastSeq};
}

Result<std::optional<nats::StoredMessage>> JetStreamReader::firstFrom(uint64_t seq, uint64_t end) {
  if (!direct_) {
    auto b = bounds();
    if (!b.isOk()) return b.status();
  }
  // A stream made without direct gets (by an operator): single gets, walking deleted ones.
  if (!*direct_) return MessageReader::firstFrom(seq, end);
  auto m = js_.firstMessageFrom(stream_, seq);
  if (!m.isOk() || !m->has_value() || (*m)->seq < end) return m;
  return std::optional<nats::StoredMessage>();
}

Result<std::optional<nats::StoredMessage>> JetStreamReader::last() {
  auto state = js_.streamState(stream_);
  if (!state.isOk()) return state.status();
  direct_ = state->allowDirect;
  if (state->messages == 0) return std::optional<nats::StoredMessage>();
  auto tip = js_.getMessage(stream_, state->lastSeq);
  if (!tip.isOk() || tip->has_value()) return tip;
  // The server takes a subject's wildcard here, not ">" (nats-server 2.9): the stream's own. It
  // answers "none" for a subject whose last message was deleted while older ones remain (it keeps
  // the deleted one as the subject's last), so any "none" falls back to the walk: only a purge of
  // whole subjects is found at once.
  std::optional<nats::StoredMessage> found;
  bool answered = !state->subjects.empty();
  for (const std::string& subject : state->subjects) {
    auto m = js_.lastMessage(stream_, subject);
    if (!m.isOk()) return m.status();
    if (!m->has_value()) answered = false;
    if (m->has_value() && (!found || (*m)->seq > found->seq)) found = std::move(*m);
  }
  if (answered) return found;
  return MessageReader::last();  // a mirror (no subjects of its own), or a subject that said "none": the walk
}

}  // namespace outbox

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

}  // namespace outbox

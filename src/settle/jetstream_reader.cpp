#include "settle/jetstream_reader.h"

namespace outbox {

Result<MessageReader::Bounds> JetStreamReader::bounds() {
  auto state = js_.streamState(stream_);
  if (!state.isOk()) return state.status();
  // Never written: 0 and 0; purged: the next sequence and the last.
  return Bounds{state->firstSeq, state->lastSeq};
}

}  // namespace outbox

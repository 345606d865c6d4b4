#pragma once

// A stream held in a vector, for the settle tests: sequences from 1 (or after a purge, from
// `first`), messages that can be deleted, and the reads counted.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "settle/settle_recovery.h"

namespace outbox::test {

class FakeStream final : public MessageReader {
 public:
  // Appends a message with `headers`; returns its sequence.
  uint64_t append(std::map<std::string, std::string> headers) {
    nats::StoredMessage m;
    m.seq = messages_.size() + 1;
    m.headers = std::move(headers);
    messages_.push_back(std::move(m));
    return messages_.back()->seq;
  }
  void remove(uint64_t seq) { messages_.at(seq - 1).reset(); }
  // Removes every message before `seq` (the stream's first sequence is then `seq`).
  void purgeBefore(uint64_t seq) {
    for (uint64_t s = first_; s < seq && s <= messages_.size(); ++s) remove(s);
    first_ = seq;
  }
  size_t size() const { return messages_.size(); }
  const std::optional<nats::StoredMessage>& message(uint64_t seq) const {
    return messages_.at(seq - 1);
  }

  Result<Bounds> bounds() override { return Bounds{first_, messages_.size()}; }
  Result<std::optional<nats::StoredMessage>> at(uint64_t seq) override {
    ++reads;
    if (seq < first_ || seq == 0 || seq > messages_.size())
      return std::optional<nats::StoredMessage>();
    return messages_[seq - 1];
  }

  size_t reads = 0;

 private:
  uint64_t first_ = 1;
  std::vector<std::optional<nats::StoredMessage>> messages_;
};

}  // namespace outbox::test

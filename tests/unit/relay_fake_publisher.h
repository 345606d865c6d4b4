#pragma once

// The relay tests' stream: JetStream's dedup-then-fence semantics in memory, behind the relay's
// Publisher (thread-safe: every member is read and written under `mu`); acks come back shuffled,
// and can be lost, held back or fenced. Used by tests/unit/relay_*.cpp.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/stop_token.h"
#include "config/config.h"
#include "config/subject_template.h"
#include "relay/poison.h"
#include "relay/ports.h"

namespace outbox::test {

// A stream with JetStream's dedup-then-fence semantics; acks come back shuffled.
class FakePublisher final : public Publisher {
 public:
  struct Message {
    uint64_t version, epoch;
    bool deleted = false;  // purged or expired: the sequence stays used
  };
  std::mutex mu;
  std::vector<Message> stream;  // seq = index + 1
  std::map<uint64_t, uint64_t> dedup;  // version -> seq
  std::vector<VersionAck> queue;
  std::mt19937 rng{7};
  int dropNextAcks = 0;  // stored but the ack is lost (a timeout from the relay's view)
  std::atomic<bool> holdAcks{false};  // acks wait (in flight) until released
  std::set<uint64_t> loseAckOf;  // versions whose first ack is lost while others arrive
  int failNextTips = 0;
  std::atomic<size_t> maxPayload{1024 * 1024};  // the server's; a reconnect may bring a smaller one
  // Another writer's messages (a stale leader's pipeline flushed in between): called under the
  // lock before each publish is processed, and after each one is stored.
  std::function<void()> beforePublish;
  std::function<void()> afterStore;
  bool fencesOnIds = false;  // some publish of the relay carried the Msg-Id fence
  int fenceNextPublishes = 0;  // refused by a fence, nothing stored (as if the stream moved)
  // Stores a message as another writer would (its Msg-Id joins the duplicate window).
  void storeForeign(uint64_t version, uint64_t epoch, bool expired = false) {
    stream.push_back({version, epoch, expired});
    dedup[version] = stream.size();
  }

  // Versions 1..n stored, in order, with none deleted: the longest such n.
  uint64_t holdsThrough() {
    std::lock_guard lock(mu);
    uint64_t n = 0;
    for (const auto& m : stream) {
      if (m.deleted || m.version != n + 1) break;
      ++n;
    }
    return n;
  }
  // Every message deleted, as a purge or max_age would; the sequences stay used. Past the
  // duplicate window the server has forgotten their Msg-Ids too.
  void purge(bool forgetMsgIds) {
    std::lock_guard lock(mu);
    for (auto& m : stream) m.deleted = true;
    if (forgetMsgIds) dedup.clear();
  }

  std::vector<Message> copy() {
    std::lock_guard lock(mu);
    return stream;
  }

  Status prepare() override { return Status::ok(); }
  Result<StreamTip> tip() override {
    std::lock_guard lock(mu);
    if (failNextTips > 0) {
      --failNextTips;
      return Status::transient("injected stream info failure");
    }
    StreamTip t;
    t.lastSeq = stream.size();
    for (size_t i = stream.size(); i > 0; --i) {
      if (stream[i - 1].deleted) continue;
      t.version = stream[i - 1].version;
      t.epoch = stream[i - 1].epoch;
      t.seq = i;
      break;
    }
    return t;
  }
  Status publish(const OutboxRow& row, uint64_t epoch, uint64_t expectedLastSeq,
                 bool fenceOnPreviousVersion) override {
    std::lock_guard lock(mu);
    if (row.payload && row.payload->size() > maxPayload) return Status::transient("nats: Maximum Payload Exceeded");
    fencesOnIds = fencesOnIds || fenceOnPreviousVersion;
    if (beforePublish) beforePublish();
    VersionAck ack;
    ack.version = row.version;
    // The server's last Msg-Id: of the last message stored, even when since deleted.
    const uint64_t lastId = stream.empty() ? 0 : stream.back().version;
    if (fenceNextPublishes > 0) {
      --fenceNextPublishes;
      ack.fenced = true;
      ack.error = "injected fence error";
    } else if (auto it = dedup.find(row.version); it != dedup.end()) {
      ack.ok = true;
      ack.seq = it->second;
    } else if (expectedLastSeq != stream.size()) {
      ack.fenced = true;
      ack.error = "wrong last sequence";
    } else if (fenceOnPreviousVersion && lastId != row.version - 1) {
      ack.fenced = true;
      ack.error = "wrong last msg ID";
    } else {
      stream.push_back({row.version, epoch});
      dedup[row.version] = stream.size();
      ack.ok = true;
      ack.seq = stream.size();
      if (afterStore) afterStore();
    }
    if (dropNextAcks > 0) {
      --dropNextAcks;
      return Status::ok();
    }
    if (loseAckOf.erase(row.version) > 0) return Status::ok();
    queue.push_back(ack);
    return Status::ok();
  }
  void takeAcks(std::vector<VersionAck>& out) override {
    std::lock_guard lock(mu);
    if (holdAcks) return;
    std::shuffle(queue.begin(), queue.end(), rng);
    out.insert(out.end(), queue.begin(), queue.end());
    queue.clear();
  }
  // Acks come with the publish: waiting only lets the clock run (the relay's ack deadline).
  const Clock* clock = nullptr;
  StopSignal* stop = nullptr;
  void waitForAcks(std::chrono::milliseconds timeout) override {
    {
      std::lock_guard lock(mu);
      if (!queue.empty() && !holdAcks) return;
    }
    clock->waitFor(*stop, timeout);
  }
  void abandon() override {
    std::lock_guard lock(mu);
    queue.clear();
  }
  std::optional<std::string> poisonReason(OutboxRow& row) override {
    SourceConfig source;
    source.name = "s";
    source.subjectPrefix = "control.s";
    return findPoison(source, SubjectTemplate::byEntityType(source.subjectPrefix), row, maxPayload);
  }
};

}  // namespace outbox::test

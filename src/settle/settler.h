#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/clock.h"

namespace outbox {

// What settles together: one entity (docs/design.md, "The settled stream (issue 36)").
struct SettleKey {
  std::string entityType;
  std::string entityKey;
  bool operator==(const SettleKey&) const = default;
};

struct SettleKeyHash {
  size_t operator()(const SettleKey& k) const {
    const size_t a = std::hash<std::string>{}(k.entityType);
    return a ^
           (std::hash<std::string>{}(k.entityKey) + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));
  }
};

// A main-stream message as the settled stream repeats it: its subject, body and headers, the
// bridge's Nats-* ones left out (the settled publish sets its own). The headers are one block of
// "Name: value\r\n" lines (appendHeader() in settle/settled_message.h): a pending key costs one
// allocation for them, not two strings a header. The settler never looks inside.
struct MainMessage {
  std::string subject;
  std::string data;
  std::string headers;
};

// A key's latest change, due on the settled stream.
struct Settled {
  SettleKey key;
  uint64_t version = 0;  // the latest change, whose message this is
  uint64_t from = 0;     // the first version it stands for (Outbox-Settled-From)
  uint64_t count = 0;    // the key's changes it stands for, from `from` through `version`
  // Every version at or below it is stood for by this message or one before it on the settled
  // stream (Outbox-Settled-Through).
  uint64_t through = 0;
  // The newest main-stream version the settler had taken in when it made this message
  // (Outbox-Settled-Seen): a new leader reads the settled stream back to the first message whose
  // `seen` is above the last `through` (Settler::restart).
  uint64_t seen = 0;
  bool early = false;           // settled before its time: the pending keys were at their bound
  Clock::TimePoint lastChange;  // when its latest change came (the settle delay counts from it)
  MainMessage message;
};

// Debounce per key, with no I/O (docs/design.md, "The settled stream (issue 36)"). Fed the changes
// the main stream holds, in version order (changed()); asked which keys are due (due()), each
// once quiet for `settle` or `settle_max` after its first unsettled change, or at once when the
// pending keys pass `maxKeys` (the oldest first); told what the settled stream acknowledged
// (published()). A new leader rebuilds it from the streams: restart() at the last settled
// message's `through`, alreadySettled() for each message of the settled tail, then changed() for
// each main-stream message after `through`. Times are the caller's steady clock. Not thread-safe.
class Settler {
 public:
  struct Options {
    std::chrono::milliseconds settle{2000};
    std::chrono::milliseconds settleMax{30'000};
    size_t maxKeys = 100'000;
  };
  struct Counters {
    uint64_t settled = 0;         // messages made (due() returned them)
    uint64_t squashed = 0;        // changes a later change of its key stood for
    uint64_t settledEarly = 0;    // keys settled early because of maxKeys
    uint64_t alreadySettled = 0;  // changes a restart found settled on the settled stream
  };

  explicit Settler(Options options);

  // Forgets every pending key and starts over after `through`: every version at or below it is
  // settled. Changes at or below it are ignored from now on.
  void restart(uint64_t through);
  // The settled stream holds `key` settled at `version` (a message of its tail after a restart):
  // the key's changes at or below it are stood for. Call before the changes are replayed.
  void alreadySettled(const SettleKey& key, uint64_t version);
  // The main stream holds `version`, a change of `key`, since `at`. Versions must rise; one at or
  // below the newest taken (seen()) is ignored (a republished version: the same change). The keys
  // due by `at` are settled first, as due(at) would have (the next due() returns them).
  void changed(const SettleKey& key, uint64_t version, MainMessage message, Clock::TimePoint at);
  // The keys to publish now, in the order to publish them: first those changed() took out (settled
  // early, or due before a change), then those due by `now`, each with its `through` as of its
  // turn.
  std::vector<Settled> due(Clock::TimePoint now);
  // When the next pending key falls due (nullopt: none pending).
  std::optional<Clock::TimePoint> nextDue() const;
  // The settled stream stored the message of `version`; returns how long after its key's last
  // change (its settle delay), or nullopt for a version not in flight.
  std::optional<std::chrono::nanoseconds> published(uint64_t version, Clock::TimePoint now);

  // What a message made now would carry as Outbox-Settled-Through: the lowest first version of a
  // pending key, less one; with none pending, seen().
  uint64_t through() const;
  uint64_t seen() const { return seen_; }
  size_t pendingKeys() const { return pending_.size(); }
  size_t inFlight() const { return inFlight_.size(); }
  const Counters& counters() const { return counters_; }

 private:
  struct Pending {
    uint64_t from = 0;
    uint64_t latest = 0;
    uint64_t count = 0;
    Clock::TimePoint first;  // when the change `from` came: settle_max counts from it
    Clock::TimePoint last;   // when the latest came: settle counts from it
    Clock::TimePoint due;
    MainMessage message;
  };
  using Map = std::unordered_map<SettleKey, Pending, SettleKeyHash>;

  Clock::TimePoint dueOf(const Pending& p) const;
  // Takes `entry` out of the pending keys as the next message to publish.
  Settled take(Map::value_type* entry, bool early);

  Options options_;
  uint64_t seen_ = 0;
  Map pending_;
  // The pending keys by first version (the oldest first: what settles early, and through()), and
  // by due time. A key's first version is unique, so it names the key in both. (Pointers, not
  // iterators: a rehash moves no element but invalidates iterators.)
  std::map<uint64_t, Map::value_type*> byFrom_;
  std::set<std::pair<Clock::TimePoint, uint64_t>> byDue_;
  // Taken out by changed() (settled early, or due before the change), for the next due(); they
  // are due since readyAt_, the time of the change.
  std::vector<Settled> ready_;
  Clock::TimePoint readyAt_;
  // After restart(): the highest version of each key the settled tail holds.
  std::unordered_map<SettleKey, uint64_t, SettleKeyHash> settledAbove_;
  uint64_t settledAboveMax_ = 0;
  std::map<uint64_t, Clock::TimePoint> inFlight_;  // version -> its key's last change
  Counters counters_;
};

}  // namespace outbox

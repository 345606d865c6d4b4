#pragma once

// What the settled stream's messages say, both ways (docs/design.md, "The settled stream (issue
// 36)"): a main-stream message read as a change for the Settler, a Settled made into the
// headers it is published with, and a settled message read back by a new leader. No I/O.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nats/jetstream.h"
#include "settle/settler.h"

namespace outbox {

inline constexpr const char* kSettledFromHeader = "Outbox-Settled-From";
inline constexpr const char* kSettledCountHeader = "Outbox-Settled-Count";
inline constexpr const char* kSettledThroughHeader = "Outbox-Settled-Through";
inline constexpr const char* kSettledSeenHeader = "Outbox-Settled-Seen";

// `<subject_prefix>_settled`: the prefix of a source's settled subjects.
std::string settledPrefix(const std::string& subjectPrefix);
// The settled subject of a main-stream subject (which starts with `subjectPrefix`): the same
// subject under settledPrefix().
std::string settledSubject(const std::string& mainSubject, const std::string& subjectPrefix);
// `<source>:settled:<version>`.
std::string settledMsgId(const std::string& source, uint64_t version);

// A main-stream message as the Settler takes it.
struct MainChange {
  SettleKey key;
  uint64_t version = 0;
  MainMessage message;
};
// The change a message of the main stream records (its Outbox-Version, -Entity-Type and
// -Entity-Key), its Nats-* headers left out; nullopt when those headers are missing or bad.
std::optional<MainChange> mainChange(const std::string& subject, const std::string& data,
                                     const std::map<std::string, std::string>& headers);
// Adds a header to a MainMessage's block, unless it is one of the bridge's Nats-* headers (the
// main stream's dedup id and fences, which must not travel to the settled stream). A line break
// in the value becomes a space, as on the wire (src/nats/outgoing.cpp).
void appendHeader(std::string& block, std::string_view name, std::string_view value);
// The block's headers, in order.
std::vector<std::pair<std::string, std::string>> headerPairs(std::string_view block);

// The headers `settled` is published with, apart from the settled publish's own Nats-* ones: its
// main message's, then From, Count, Through and Seen.
std::vector<std::pair<std::string, std::string>> settledHeaders(const Settled& settled);

// The settled publish of `settled` for source `source`: its settled subject, its main message's
// data, Nats-Msg-Id settledMsgId(), fenced on `expectedSeq` and `expectedMsgId` (none when empty),
// then settledHeaders().
nats::OutgoingMessage settledPublish(const std::string& source, const std::string& subjectPrefix,
                                     const Settled& settled, uint64_t expectedSeq, const std::string& expectedMsgId);
// The bytes `m` counts against the server's max_payload: its data and its header block.
size_t payloadBytes(const nats::OutgoingMessage& m);

// What a new leader needs of a settled message it reads back.
struct SettledMark {
  SettleKey key;
  uint64_t version = 0;
  uint64_t through = 0;
  uint64_t seen = 0;
  uint64_t epoch = 0;  // its Outbox-Epoch (0: none)
  uint64_t seq = 0;    // where the settled stream holds it (set by lastSettled)
};
// nullopt when a header is missing or bad (a message the bridge did not write).
std::optional<SettledMark> settledMark(const std::map<std::string, std::string>& headers);

}  // namespace outbox

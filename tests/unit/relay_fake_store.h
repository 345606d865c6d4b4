#pragma once

// The relay tests' outbox table and its state row, in memory, behind the relay's OutboxStore
// (thread-safe: every member is read and written under `mu`): failures to inject, the writes
// counted, and the marks checked against what the stream holds. Used by tests/unit/relay_*.cpp.

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "relay/ports.h"
#include "relay/resume_point.h"

namespace outbox::test {

class FakeStore final : public OutboxStore {
 public:
  std::mutex mu;
  std::vector<OutboxRow> rows;  // in id order
  SourceState state;
  std::set<uint64_t> quarantined;
  int failNextAssigns = 0;
  // Reads (new rows; the state row) that throw, as a bug would (a column a result lacks).
  std::atomic<int> throwingReads{0};
  std::atomic<int> throwingLoads{0};
  int failAssignNumber = 0;  // the assign (counting from 1) that fails, once; 0: none
  int assigns = 0;
  // What the stream holds contiguously from version 1 (set by the test): a mark past it is a lie
  // the snapshot would serve and prune would act on.
  std::function<uint64_t()> streamHolds;
  std::vector<std::string> violations;

  void add(int n, const std::string& type = "item") {
    std::lock_guard lock(mu);
    for (int i = 0; i < n; ++i) {
      OutboxRow r;
      r.id = rows.size() + 1;
      r.entityType = type;
      r.entityKey = std::to_string(r.id);
      r.op = "upsert";
      r.payload = fmt::format("{{\"n\":{}}}", r.id);
      rows.push_back(r);
    }
  }
  SourceState snapshot() {
    std::lock_guard lock(mu);
    return state;
  }

  uint64_t guardEpoch = 0;  // the relay's write guard: writes of another epoch are refused
  bool refused() const { return guardEpoch != 0 && guardEpoch != state.epoch; }

  void setWriteGuard(WriteGuard guard) override {
    std::lock_guard lock(mu);
    guardEpoch = guard.epoch;
    quarantinedAtSessionStart.reset();  // a session begins: its first read looks again
  }
  Status connect() override { return Status::ok(); }
  std::atomic<int> loads{0};  // state reads: one per session (a halted relay's recheck)
  Result<SourceState> loadState() override {
    ++loads;
    if (throwingLoads > 0 && throwingLoads-- > 0) throw std::logic_error("no column 'epoch' in the result");
    std::lock_guard lock(mu);
    return state;
  }
  std::atomic<int> polls{0};  // new-row reads

  // Every row is committed and no transaction is open: the scan's holes are only ids never used.
  ScannedRow scanned(const OutboxRow& r) { return ScannedRow{r, r.version != 0, quarantined.count(r.id) > 0}; }
  // Whether readNew leaves the quarantine out, as MysqlOutboxStore's does above the source's
  // highest quarantined id when the session's first read looked: every new row shows as not
  // quarantined then (NewRows::quarantineUnread).
  bool newRowsLeaveQuarantineOut = false;
  std::optional<uint64_t> quarantinedAtSessionStart;
  Result<NewRows> readNew(uint64_t cursor, int limit, bool withConnections) override {
    ++polls;
    if (throwingReads > 0 && throwingReads-- > 0) throw std::logic_error("no column 'created_micros' in the result");
    std::lock_guard lock(mu);
    NewRows out;
    if (newRowsLeaveQuarantineOut) {
      if (!quarantinedAtSessionStart) quarantinedAtSessionStart = quarantined.empty() ? 0 : *quarantined.rbegin();
      out.quarantineUnread = cursor >= *quarantinedAtSessionStart;
    }
    for (const auto& r : rows) {
      if (r.id <= cursor || static_cast<int>(out.rows.size()) >= limit) continue;
      out.rows.push_back(scanned(r));
      if (out.quarantineUnread) out.rows.back().quarantined = false;
    }
    if (withConnections) out.busy = ConnectionReading{};
    out.epoch = state.epoch;
    return out;
  }
  Result<std::vector<ScannedRow>> readRanges(const std::vector<IdRange>& ranges, int limit) override {
    std::lock_guard lock(mu);
    std::vector<ScannedRow> out;
    for (const IdRange& r : ranges) {
      for (uint64_t id = r.first; id <= std::min<uint64_t>(r.last, rows.size()); ++id) {
        ScannedRow row = scanned(rows[id - 1]);
        if (r.span && (row.versioned || row.quarantined)) continue;  // a span's resolved rows
        if (static_cast<int>(out.size()) < limit) out.push_back(std::move(row));
      }
    }
    return out;
  }
  Result<std::vector<IdRange>> unheld(const std::vector<IdRange>& ranges) override {
    std::lock_guard lock(mu);
    std::vector<IdRange> out;
    for (const IdRange& r : ranges) {
      if (r.last > rows.size()) out.push_back(IdRange{std::max<uint64_t>(r.first, rows.size() + 1), r.last});
    }
    return out;
  }
  Result<bool> applierWorkLeft() override { return false; }
  Result<std::vector<IdRange>> unresolved(uint64_t floor, uint64_t cursor) override {
    std::lock_guard lock(mu);
    std::vector<IdRange> out;
    for (uint64_t id = floor + 1; id <= cursor; ++id) {
      if (id <= rows.size() && (rows[id - 1].version != 0 || quarantined.count(id))) continue;
      if (!out.empty() && out.back().last == id - 1) {
        out.back().last = id;
      } else {
        out.push_back(IdRange{id, id});
      }
    }
    return out;
  }
  Result<std::optional<uint64_t>> nextAutoId() override {
    std::lock_guard lock(mu);
    return std::optional<uint64_t>{rows.size() + 1};
  }
  Result<uint64_t> initialFloor() override {
    std::lock_guard lock(mu);
    for (const auto& r : rows) {
      if (r.version == 0 && !quarantined.count(r.id)) return r.id - 1;
    }
    return static_cast<uint64_t>(rows.size());
  }
  Result<std::string> openTransactionsOlderThan(std::chrono::seconds) override { return std::string(); }
  Result<std::vector<IdRange>> pinnedHoles() override { return std::vector<IdRange>{}; }
  Status saveScan(const ScanMark& mark) override {
    std::lock_guard lock(mu);
    if (refused()) return Status::transient("refused");
    state.scanCursor = mark.cursor;
    state.scanFloor = mark.floor;
    carry(mark.published);
    return Status::ok();
  }
  Result<std::vector<OutboxRow>> readAssigned(uint64_t from, uint64_t through, int limit) override {
    std::lock_guard lock(mu);
    std::vector<OutboxRow> out;
    for (const auto& r : rows) {
      if (r.version >= from && r.version <= through) out.push_back(r);
    }
    std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.version < b.version; });
    if (static_cast<int>(out.size()) > limit) out.resize(static_cast<size_t>(limit));
    return out;
  }
  Status assign(std::vector<OutboxRow>& batch, uint64_t expected, const ScanMark& mark) override {
    std::lock_guard lock(mu);
    if (failNextAssigns > 0) {
      --failNextAssigns;
      return Status::transient("injected assign failure");
    }
    if (++assigns == failAssignNumber) return Status::transient("injected assign failure");
    if (state.assignedThrough != expected || !state.haltedReason.empty() || refused()) return Status::transient("moved");
    for (const auto& b : batch) {
      if (quarantined.count(b.id)) return Status::transient("quarantined while its batch was being assigned");
    }
    uint64_t v = expected;
    for (auto& b : batch) {
      if (rows[b.id - 1].version != 0) violations.push_back(fmt::format("row {} versioned twice", b.id));
      b.version = ++v;
      rows[b.id - 1].version = v;
    }
    state.assignedThrough = v;
    state.scanCursor = mark.cursor;
    state.scanFloor = mark.floor;
    carry(mark.published);
    return Status::ok();
  }
  // The published marks an assign or scan record carries (mysql_store.cpp: each moved forward).
  void carry(const PublishedMark& published) {
    if (published.version == 0) return;
    ++carried;
    checkStreamHolds(published.version);
    state.publishedThrough = std::max(state.publishedThrough, published.version);
    state.publishedStreamSeq = std::max(state.publishedStreamSeq, published.seq);
  }
  void checkStreamHolds(uint64_t version) {
    if (streamHolds && version > streamHolds()) {
      violations.push_back(fmt::format("published_through {} marked while the stream holds through {}", version,
                                       streamHolds()));
    }
  }
  std::atomic<int> carried{0};  // writes that carried published marks
  std::atomic<int> marks{0};    // marks written on their own
  Status markPublished(uint64_t version, uint64_t seq) override {
    std::lock_guard lock(mu);
    ++marks;
    checkStreamHolds(version);
    if (version > state.publishedThrough && !refused()) {
      state.publishedThrough = version;
      state.publishedStreamSeq = seq;
    }
    return Status::ok();
  }
  Status setPublished(uint64_t version, uint64_t seq) override {
    std::lock_guard lock(mu);
    if (refused()) return Status::transient("refused");
    state.publishedThrough = version;
    state.publishedStreamSeq = seq;
    return Status::ok();
  }
  // outbox_bump_removed: version -> row id, the versions a finish took from their rows.
  std::map<uint64_t, uint64_t> bumpRemoved;
  int staleTailsAdopted = 0;
  Result<uint64_t> adoptStaleTail(const StaleTail& tail) override {
    std::lock_guard lock(mu);
    if (refused()) return Status::transient("refused");
    if (state.publishedThrough != state.epochVersionsAfter || state.publishedStreamSeq != tail.afterSeq ||
        state.epochStreamSeq != tail.afterSeq) {
      return Status::transient("moved");
    }
    std::optional<uint64_t> lowest;
    for (auto& r : rows) {
      if (r.version > state.epochVersionsAfter) {
        if (!lowest) lowest = r.id;
        r.version = 0;
      }
    }
    const uint64_t restored = giveBack(tail);
    if (lowest && state.scanFloor) state.scanFloor = std::min(*state.scanFloor, *lowest - 1);
    state.assignedThrough = state.epochVersionsAfter;
    state.publishedStreamSeq = state.epochStreamSeq = tail.throughSeq;
    ++staleTailsAdopted;
    return restored;
  }
  uint64_t giveBack(const StaleTail& tail) {
    uint64_t restored = 0;
    for (auto it = bumpRemoved.lower_bound(tail.firstVersion);
         it != bumpRemoved.end() && it->first <= tail.lastVersion; it = bumpRemoved.erase(it)) {
      if (rows[it->second - 1].version != 0) violations.push_back(fmt::format("row {} given back twice", it->second));
      rows[it->second - 1].version = it->first;
      ++restored;
    }
    return restored;
  }
  // The operator's `epoch bump` (MysqlOutboxStore::epochBump): the new epoch at once, the move
  // left to the leader. The state's epoch start stays the old epoch's until then.
  void bump() {
    std::lock_guard lock(mu);
    if (!state.bumpFromEpoch) state.bumpFromEpoch = state.epoch;
    ++state.epoch;
    state.haltedReason.clear();
    state.haltedRow.reset();
  }
  int bumpsCompleted = 0;
  std::string finishFails;  // completeEpochBump fails for good with this (a missing table or grant)
  Status completeEpochBump(const StreamTip& tip) override {
    std::lock_guard lock(mu);
    if (refused()) return Status::transient("refused");
    if (!finishFails.empty()) return Status::permanent(finishFails);
    if (!state.bumpFromEpoch) return Status::ok();
    SourceState old = state;
    old.epoch = *state.bumpFromEpoch;
    uint64_t maxInTable = 0;
    for (const auto& r : rows) maxInTable = std::max(maxInTable, r.version);
    const BumpPlan plan = planEpochBump(old, tip, maxInTable);
    if (old.publishedThrough > old.epochVersionsAfter ||
        (tip.version && tip.epoch == old.epoch && tip.seq > old.epochStreamSeq)) {
      bumpRemoved.clear();
    }
    std::optional<uint64_t> lowest;
    for (auto& r : rows) {
      if (r.version > plan.kept) {
        if (!lowest) lowest = r.id;
        bumpRemoved[r.version] = r.id;
        r.version = 0;
      }
    }
    if (auto resume = findResumePoint(old, tip, ""); resume.isOk() && resume->staleTail) giveBack(*resume->staleTail);
    if (lowest && state.scanFloor) state.scanFloor = std::min(*state.scanFloor, *lowest - 1);
    state.assignedThrough = state.publishedThrough = state.epochVersionsAfter = plan.highest;
    state.publishedStreamSeq = state.epochStreamSeq = tip.lastSeq;
    state.bumpFromEpoch.reset();
    ++bumpsCompleted;
    return Status::ok();
  }
  std::vector<std::string> halts;  // every halt's reason, in turn
  Status halt(const std::string& reason, std::optional<HaltedRow> row) override {
    std::lock_guard lock(mu);
    if (refused()) return Status::transient("refused");
    halts.push_back(reason);
    state.haltedReason = reason;
    state.haltedRow = row;
    return Status::ok();
  }
  Status clearHalt() override {
    std::lock_guard lock(mu);
    if (refused()) return Status::transient("refused");
    state.haltedReason.clear();
    state.haltedRow.reset();
    return Status::ok();
  }
  std::vector<uint64_t> quarantinesAsked;  // the ids quarantine() was asked for, in turn
  Status quarantine(uint64_t id, const std::string&) override {
    std::lock_guard lock(mu);
    quarantinesAsked.push_back(id);
    quarantined.insert(id);
    return Status::ok();
  }
};

}  // namespace outbox::test

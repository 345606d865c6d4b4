#pragma once

// The Scanner's one fake store: an outbox table in memory whose rows can be uncommitted
// (invisible, locked by their connection), and connections that are inside a statement or
// between statements. Used by scanner_test.cpp and scanner_spans_test.cpp.

#include <boost/test/unit_test.hpp>

#include <map>
#include <set>

#include "manual_clock.h"
#include "relay/scanner.h"

namespace outbox::test {

using namespace std::chrono_literals;

class TableStore final : public OutboxStore {
 public:
  struct Row {
    bool committed = false;
    uint64_t connection = 0;  // who inserted it (holds its lock until committed or rolled back)
    uint64_t version = 0;
  };
  std::map<uint64_t, Row> rows;     // id -> row; an id absent was never used or rolled back
  std::set<uint64_t> busy;          // connections inside a statement
  // How long a busy connection has held its writer's lock on the table (unknown when absent).
  std::map<uint64_t, std::chrono::milliseconds> writingFor;
  std::optional<ConnectionReading::ServerClock> serverClock;  // the reader's user lock
  std::set<uint64_t> quarantined;
  uint64_t epoch = 1;
  int unheldCalls = 0;
  int rangeReads = 0;
  bool applierBusy = false;  // a replication applier has work left (it may hold any id)
  // MariaDB's statements (ConnectionReading::statements), shown when `statementsShown`: each busy
  // connection's QUERY_ID (1 unless set), and whether it is past its statement's execution.
  bool statementsShown = false;
  std::map<uint64_t, uint64_t> queryOf;
  std::set<uint64_t> ending;
  bool applierThread = false;  // a replication applier thread shows in PROCESSLIST
  std::optional<std::string> applied;  // what appliers have applied (gtid_slave_pos)
  int readings = 0;

  void insert(uint64_t id, uint64_t connection, bool committed) { rows[id] = Row{committed, connection, 0}; }
  void commit(uint64_t connection) {
    for (auto& [id, r] : rows) {
      if (r.connection == connection) r.committed = true;
    }
  }
  // The connection's next statement begins.
  void nextStatement(uint64_t connection) {
    ++queryOf.try_emplace(connection, 1).first->second;
    ending.erase(connection);
  }
  void rollback(uint64_t connection) {
    std::erase_if(rows, [&](const auto& e) { return e.second.connection == connection && !e.second.committed; });
  }
  ScannedRow scanned(uint64_t id, const Row& r) {
    OutboxRow o;
    o.id = id;
    o.entityType = "item";
    o.entityKey = std::to_string(id);
    o.op = "upsert";
    o.payload = "{}";
    return ScannedRow{o, r.version != 0, quarantined.count(id) > 0};
  }

  void setWriteGuard(WriteGuard) override {}
  Status connect() override { return Status::ok(); }
  Result<SourceState> loadState() override { return SourceState{}; }
  Result<NewRows> readNew(uint64_t cursor, int limit, bool withConnections) override {
    NewRows out;
    for (auto it = rows.upper_bound(cursor); it != rows.end() && static_cast<int>(out.rows.size()) < limit; ++it) {
      if (it->second.committed) out.rows.push_back(scanned(it->first, it->second));
    }
    if (withConnections) {
      out.busy = ConnectionReading{std::vector<uint64_t>(busy.begin(), busy.end()), {}, serverClock};
      ++readings;
      for (uint64_t id : busy) {
        auto it = writingFor.find(id);
        out.busy->writingFor.push_back(it == writingFor.end() ? ConnectionReading::kUnknown : it->second);
        if (!statementsShown) continue;
        auto query = queryOf.find(id);
        out.busy->statements.push_back(
            ConnectionReading::Statement{query == queryOf.end() ? 1 : query->second, ending.count(id) == 0});
      }
      out.busy->applier = applierThread;
      out.busy->numbered = statementsShown;
      out.busy->applied = applied;
    }
    out.epoch = epoch;
    return out;
  }
  // Of a span, only its rows without a version and not quarantined (ports.h).
  bool resolved(uint64_t id, const Row& r) const { return r.committed && (r.version != 0 || quarantined.count(id)); }
  uint64_t spanRowsRead = 0;  // the rows the last readRanges() went through in spans: the server's work
  Result<std::vector<ScannedRow>> readRanges(const std::vector<IdRange>& ranges, int limit) override {
    ++rangeReads;
    spanRowsRead = 0;
    std::vector<ScannedRow> out;
    for (const IdRange& r : ranges) {
      for (auto it = rows.lower_bound(r.first); it != rows.end() && it->first <= r.last; ++it) {
        if (r.span) ++spanRowsRead;
        if (r.span && resolved(it->first, it->second)) continue;
        if (it->second.committed && static_cast<int>(out.size()) < limit) out.push_back(scanned(it->first, it->second));
      }
    }
    return out;
  }
  // A row present is committed (visible) or locked; in a span, one versioned or quarantined is
  // resolved. (The real store halves a span that meets a row: this one finds the parts at once.)
  Result<std::vector<IdRange>> unheld(const std::vector<IdRange>& ranges) override {
    ++unheldCalls;
    std::vector<IdRange> out;
    for (IdRange r : ranges) {
      for (auto it = rows.lower_bound(r.first); it != rows.end() && it->first <= r.last; ++it) {
        if (r.span && resolved(it->first, it->second)) continue;
        if (it->first > r.first) out.push_back(IdRange{r.first, it->first - 1, r.span});
        r.first = it->first + 1;
      }
      if (r.first <= r.last) out.push_back(r);
    }
    return out;
  }
  Result<bool> applierWorkLeft() override { return applierBusy; }
  uint64_t unresolvedSpan = 0;  // ids unresolved() was asked about: a restart's cost
  Result<std::vector<IdRange>> unresolved(uint64_t floor, uint64_t cursor) override {
    if (cursor > floor) unresolvedSpan += cursor - floor;
    std::vector<IdRange> out;
    for (uint64_t id = floor + 1; id <= cursor; ++id) {
      auto it = rows.find(id);
      if ((it != rows.end() && it->second.version != 0) || quarantined.count(id)) continue;
      if (!out.empty() && out.back().last == id - 1) {
        out.back().last = id;
      } else {
        out.push_back(IdRange{id, id});
      }
    }
    return out;
  }
  uint64_t autoIncrement = 0;  // 0: one past the highest id
  int autoIncrementReads = 0;
  Result<std::optional<uint64_t>> nextAutoId() override {
    ++autoIncrementReads;
    if (autoIncrement != 0) return std::optional<uint64_t>{autoIncrement};
    return std::optional<uint64_t>{rows.empty() ? 1 : rows.rbegin()->first + 1};
  }
  // outbox_scan_holes: first -> last.
  std::map<uint64_t, uint64_t> pinnedTable;
  Result<std::string> openTransactionsOlderThan(std::chrono::seconds) override { return std::string(); }
  Result<std::vector<IdRange>> pinnedHoles() override {
    std::vector<IdRange> out;
    for (const auto& [first, last] : pinnedTable) out.push_back(IdRange{first, last});
    return out;
  }
  void record(const ScanMark& mark) {
    for (uint64_t first : mark.unpin) pinnedTable.erase(first);
    for (const IdRange& r : mark.pin) pinnedTable[r.first] = std::max(pinnedTable[r.first], r.last);
  }
  Result<uint64_t> initialFloor() override { return uint64_t{0}; }
  Status saveScan(const ScanMark& mark) override {
    record(mark);
    return Status::ok();
  }
  Result<std::vector<OutboxRow>> readAssigned(uint64_t, uint64_t, int) override { return std::vector<OutboxRow>{}; }
  Status assign(std::vector<OutboxRow>&, uint64_t, const ScanMark& mark) override {
    record(mark);
    return Status::ok();
  }
  Status markPublished(uint64_t, uint64_t) override { return Status::ok(); }
  Status setPublished(uint64_t, uint64_t) override { return Status::ok(); }
  Result<uint64_t> adoptStaleTail(const StaleTail&) override { return uint64_t{0}; }
  Status completeEpochBump(const StreamTip&) override { return Status::ok(); }
  Status halt(const std::string&, std::optional<HaltedRow>) override { return Status::ok(); }
  Status clearHalt() override { return Status::ok(); }
  Status quarantine(uint64_t, const std::string&) override { return Status::ok(); }
};

struct Fixture {
  TableStore store;
  ManualClock clock;
  Scanner scanner{store, clock};
  uint64_t nextVersion = 1;

  Fixture() { BOOST_REQUIRE(scanner.reset(SourceState{}).isOk()); }
  // One poll, its rows versioned; returns their ids in version order.
  std::vector<uint64_t> poll(int limit = 100) {
    clock.advance(Scanner::kBusyReadSpacing);
    auto batch = scanner.next(limit);
    BOOST_REQUIRE_MESSAGE(batch.isOk(), batch.status().message());
    std::vector<uint64_t> ids;
    for (const auto& r : batch->rows) {
      ids.push_back(r.id);
      store.rows[r.id].version = nextVersion++;
    }
    store.record(batch->mark);
    scanner.committed(*batch);
    return ids;
  }
};

using Ids = std::vector<uint64_t>;


}  // namespace outbox::test

#pragma once

// What the scan reads of the outbox table and the server (the poll of docs/design.md,
// "Contract v2: finding late commits"): rows with their flags, which connections are inside a
// statement, and the id ranges the open holes are kept and read as. Part of the relay's seams
// (relay/ports.h).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "relay/outbox_row.h"

namespace outbox {

// An outbox row as the scan reads it: whether it already has a version (after an epoch bump or
// a v1 migration, rows above the cursor may) or was quarantined.
struct ScannedRow {
  OutboxRow row;
  bool versioned = false;
  bool quarantined = false;
};

// Which client connections are inside a statement, read just after a read of new rows
// (information_schema.PROCESSLIST: every connection not between statements, but the server's own
// threads and the reader), and where the server shows metadata locks (MariaDB's
// metadata_lock_info) only those holding one on the outbox table that a writer takes. An outbox id
// is taken inside a statement that holds such a lock until its transaction ends, so a connection
// seen between statements, without that lock, or gone, after a hole was found, cannot be about to
// insert it. (Not by statement id or start: MariaDB gives each instruction of a trigger or
// stored function a new QUERY_ID and TIME_MS while the INSERT that fired it, holding ids it
// reserved, still runs.) Both are read live; INNODB_TRX, the obvious place to look, is served
// from a cache InnoDB refreshes only when nobody read it for 100 ms, so a reading of it can
// predate the read it follows, and a statement takes its id before its InnoDB transaction
// starts (docs/design.md).
//
// Where the server shows metadata locks, also how long each has held its oldest such lock, and a
// clock to hold it against, both the server's: the age of a user lock the reading connection took
// when it connected, read before the writers. A connection whose every writer's lock is younger
// than the time since the reading that tagged a hole began writing after the hole's ids were
// taken, so holds none of them — suspects retired by when they began writing, by the
// one clock no trigger resets. (Not against this process's clock: a slewed or paused clock on
// either side would retire a holder.)
struct ConnectionReading {
  std::vector<uint64_t> busy;  // connection ids, ascending
  // Parallel to `busy`, or empty (all unknown): how long the connection has held its oldest
  // writer's metadata lock on the outbox table, rounded down to the millisecond.
  std::vector<std::chrono::milliseconds> writingFor;
  static constexpr std::chrono::milliseconds kUnknown = std::chrono::milliseconds::max();
  // The reading connection's user lock: its connection id, and its age when read (rounded down).
  struct ServerClock {
    uint64_t connection = 0;
    std::chrono::milliseconds age{0};
    bool operator==(const ServerClock&) const = default;
  };
  std::optional<ServerClock> clock;
  // Parallel to `busy`, or empty (unknown: MySQL, or where the server shows metadata locks): the
  // statement each runs, as MariaDB numbers them (QUERY_ID: a new one for every statement of a
  // connection, every statement of a multi-statement packet and every instruction of a stored
  // procedure; a trigger's instructions show their own while they run), and whether it is still
  // executing it (a STATE of its execution, before `query end`: a statement commits after that,
  // or, implicitly, before its execution began). A connection seen in the same statement,
  // executing, at two readings committed nothing between them (docs/design.md, "Quiet spans").
  struct Statement {
    uint64_t query = 0;
    bool executing = false;
    bool operator==(const Statement&) const = default;
  };
  std::vector<Statement> statements;
  bool numbered = false;  // `statements` is read (MariaDB without metadata locks shown)
  // A replication applier runs on the server: it commits rows with ids another server gave out,
  // and shows in no `busy`. And what appliers have applied (MariaDB's gtid_slave_pos, read with
  // `statements`): one that started and stopped between two readings moved it.
  bool applier = false;
  std::optional<std::string> applied;
};

struct NewRows {
  std::vector<ScannedRow> rows;             // ids above the cursor, in id order
  std::optional<ConnectionReading> busy;    // when asked for
  // The source's epoch, read when no row of `rows` is to be assigned (a batch to assign learns of an
  // epoch bump from the assign's epoch guard instead).
  std::optional<uint64_t> epoch;
  // Read without the versions' join (MysqlOutboxStore::readNew): a row above the cursor that has
  // a version after all is found by the assign's duplicate key, and that is "scan again".
  bool lean = false;
  // Read without the quarantine's join too: every row shows as not quarantined. One an operator
  // quarantined ahead of the scan since the session began is refused by the assign, which reads
  // the quarantine under the state row's lock, and the next session's reads join it; a poison row
  // is looked up alone before it halts the source or is quarantined (readBatch).
  bool quarantineUnread = false;
};

// Outbox ids first..last, both included. Holes come in runs (a rolled-back multi-row INSERT, an
// id jump, auto_increment_increment > 1): the scan keeps and probes them as ranges, so neither
// its memory nor its statements grow with the ids in a run.
//
// A `span` stands for only those of its ids that have no version and are not quarantined: holes
// the scan has folded together with the rows between them (docs/design.md, "Holes that cannot be
// proven closed"). Reading one returns only such rows; it is dead when a locking read of those
// finds no row and no lock.
struct IdRange {
  uint64_t first = 0;
  uint64_t last = 0;
  bool span = false;
  uint64_t size() const { return last - first + 1; }
  bool operator==(const IdRange&) const = default;
};

// The scan's statements name at most this many ranges: holes are read back and probed in pieces.
inline constexpr size_t kRangesPerStatement = 1000;

// `ranges` cut, in order, into pieces of at most kRangesPerStatement.
inline std::vector<std::vector<IdRange>> statementChunks(const std::vector<IdRange>& ranges) {
  std::vector<std::vector<IdRange>> out;
  for (size_t i = 0; i < ranges.size(); i += kRangesPerStatement) {
    out.emplace_back(ranges.begin() + static_cast<long>(i),
                     ranges.begin() + static_cast<long>(std::min(ranges.size(), i + kRangesPerStatement)));
  }
  return out;
}

}  // namespace outbox

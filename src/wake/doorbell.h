#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "common/stop_token.h"
#include "db/binlog.h"
#include "metrics/doorbell_metrics.h"
#include "wake/watched.h"

namespace outbox {

// The binlog doorbell of one database server (docs/design.md, "Waking up"): one replication connection,
// from the end of the binary log when it connects, that rings a source's Wakeup when a
// transaction that wrote its outbox table commits (the table its row events name, or the table a
// statement logged as text inserts into, in STATEMENT and MIXED format); what the log does not tie
// to a table's new rows — an XA COMMIT, DDL, a statement it cannot read — is a look once, for the
// sources of its database or, with none, of the server. It only says when to look: the rows still come from the
// table, so a ring lost, late or wrong costs latency, never a row. While it watches, each source's
// Wakeup::doorbell is set; on every (re)connect and every loss it rings them all, so what
// committed while it did not watch is looked for. Without log_bin or the grants it needs, or
// while its connection is broken, it says once what is missing and tries again with backoff (the
// sources poll meanwhile). It reads as the server's [[doorbell]] account, or without one as a
// source's (the config checked that every source it watches asks for the same TLS).
class BinlogDoorbell {
 public:
  // How often a quiet server sends a heartbeat: the longest the thread takes to see stop.
  static constexpr std::chrono::milliseconds kHeartbeat{1000};
  // How often a doorbell that lacks a setting or a grant tries again: an operator may fix it.
  static constexpr std::chrono::milliseconds kRetryMissing{10'000};

  // `sources` share the server, which `dsn` reaches; they, `dsn` and `stop` outlive the doorbell.
  // The thread sees a stop within kHeartbeat.
  BinlogDoorbell(std::vector<WatchedSource> sources, const Dsn& dsn, StopSignal& stop);
  ~BinlogDoorbell();

  void start();
  // Returns once the thread has ended (after stop, within about kHeartbeat).
  void join();

 private:
  void run();
  // Reads `reader` until the dump ends or stop; returns why it ended and whether the next dump
  // should start at once (`jump`: it fell behind, or an event was too large: the sources stay
  // watched, and the next connect rings each once).
  Status read(db::BinlogReader& reader, bool& jump);
  // "" when the dump comes from the server the sources' connections reach (asked only when the
  // doorbell has a DSN of its own); else what differs.
  std::string otherServer(const db::BinlogReader& reader);
  // Sets every source's Wakeup::doorbell to `on` (only those whose database `reader`'s log
  // carries) and rings them all; /metrics shows whether the doorbell watches (no lag while not).
  void setWatching(bool on, const db::BinlogReader* reader = nullptr);
  // Rings the sources whose outbox table is `table` ("db.table"), and every source of a database
  // whose outbox_epoch_history it is (an `epoch bump` writes a row there, and the leader must
  // finish the bump; rare, so the other sources of the database look once for nothing).
  void ringTable(const std::string& table);
  // Rings for one committed transaction: its tables, then a look for what it does not tie to one.
  void ring(const db::BinlogCommit& commit);

  std::vector<WatchedSource> sources_;
  const Dsn& dsn_;
  std::vector<std::string> tables_;     // parallel to sources_: "db.table", lower-case
  std::vector<std::string> histories_;  // parallel to sources_: "db.outbox_epoch_history", lower-case
  std::vector<std::string> databases_;  // parallel to sources_: "db", lower-case
  StopSignal& stop_;
  std::string where_;  // for logs: the server and the sources
  uint32_t serverId_;  // as a replica of the server: random, 1,073,741,824 and up
  bool insists_ = false;  // a source says wake = "binlog": a doorbell that cannot work is an error
  std::string unloggedReported_;  // the sources last warned of whose database the log leaves out
  std::shared_ptr<DoorbellMetrics> metrics_;
  // For tests only: OUTBOX_TEST_DOORBELL_READ_DELAY_MS, a pause after each transaction read, so that a
  // test can make the doorbell fall behind (DEVELOPERS.md). Unset: none.
  std::chrono::milliseconds readDelay_{0};
  std::thread thread_;
};

}  // namespace outbox

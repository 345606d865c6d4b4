#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "db/connection.h"

typedef struct st_mariadb_rpl MARIADB_RPL;
typedef struct st_mariadb_rpl_event MARIADB_RPL_EVENT;

namespace outbox::db {

// What one event group of the binary log says a committed transaction wrote (docs/design.md, "Waking up"):
// the tables it added or changed rows of ("db.table"; from row events, or read from a statement
// the log carries as text, db/binlog_statement.h; a group that only deleted rows, as prune's do,
// names none); the databases of DDL it carries as text (their sources look once); and `unknown`
// when the log does not say what changed at all (an XA COMMIT, a statement it cannot read, which
// may have written any database's tables, DDL or GRANT with no database): every source looks once.
struct BinlogCommit {
  std::vector<std::string> tables;
  std::vector<std::string> databases;
  bool unknown = false;

  bool empty() const { return tables.empty() && databases.empty() && !unknown; }
};

// Whether a server whose SHOW MASTER STATUS says `doDb` (Binlog_Do_DB) and `ignoreDb`
// (Binlog_Ignore_DB), each a comma-separated list or empty, writes to its binary log what changes
// tables of `database`.
bool binlogCarries(std::string_view doDb, std::string_view ignoreDb, std::string_view database);

// Reads the binary log from the server's position when it connected, as a replica's dump does
// (MariaDB Connector/C's mariadb_rpl API, the only other file that includes the C API's headers),
// and reports each committed transaction — nothing for one rolled back, which writes nothing
// there. The doorbell's connection: one thread at a time.
class BinlogReader {
 public:
  // The largest event the dump reads (the connection's max_allowed_packet): a larger one (a big
  // row or statement elsewhere) ends the dump instead of growing the buffer to its size; see
  // tooLarge().
  static constexpr unsigned long kMaxEventBytes = 4ul << 20;

  ~BinlogReader();

  // Connects with `params` and starts a dump at the current end of the log, as replica
  // `serverId` (unique among the server's replicas: the server drops an older dump of the same
  // id). The server sends a heartbeat every `heartbeat` while the log is quiet. Fails
  // permanently, saying what to do, when the server keeps no binary log or the user lacks a grant
  // it needs (REPLICATION SLAVE to read the log; BINLOG MONITOR, which REPLICATION CLIENT names
  // too, for its position).
  static Result<std::unique_ptr<BinlogReader>> open(const ConnectParams& params, uint32_t serverId,
                                                    std::chrono::milliseconds heartbeat);

  // Waits for the next committed transaction (one that wrote nothing to look for, such as
  // prune's deletes, or a heartbeat: an empty commit). A transient failure ends the dump (a
  // connection lost, the server restarted or its logs purged): open another.
  Result<BinlogCommit> next();

  // The server's binlog format (ROW, STATEMENT or MIXED) when the dump started.
  const std::string& format() const { return format_; }
  // Who serves the dump: "server_id N, hostname H", to compare with what a source's connection
  // reaches (the same query: serverIdentityQuery).
  const std::string& serverIdentity() const { return identity_; }
  static constexpr const char* kServerIdentityQuery = "SELECT @@server_id AS server_id, @@hostname AS hostname";
  // Where the dump has read to: the file and the position after the last event.
  const std::string& file() const { return file_; }
  uint64_t position() const { return position_; }
  // When the last event read was written (seconds since the epoch, the server's clock); 0 after
  // a heartbeat, which the server sends only once the dump has read all there is.
  uint32_t eventTime() const { return eventTime_; }
  // Whether the dump ended on an event over kMaxEventBytes.
  bool tooLarge() const { return tooLarge_; }
  // Whether the log carries writes to tables of `database`: not when the server filters it out
  // (binlog_do_db names others, or binlog_ignore_db names it; SHOW MASTER STATUS says which).
  bool logs(const std::string& database) const;

 private:
  explicit BinlogReader(std::unique_ptr<Connection> conn) : conn_(std::move(conn)) {}

  std::unique_ptr<Connection> conn_;
  MARIADB_RPL* rpl_ = nullptr;
  MARIADB_RPL_EVENT* event_ = nullptr;  // reused by each fetch
  std::string format_;
  std::string doDb_, ignoreDb_;  // SHOW MASTER STATUS's Binlog_Do_DB, Binlog_Ignore_DB
  // The event group being read: what it has named so far, and the tables its TABLE_MAP events
  // numbered (a row event names its table by that number).
  BinlogCommit group_;
  // Notes what a statement the log carries as text writes, run in `database`.
  void noteStatement(std::string_view statement, std::string_view database);
  // By table id: a transaction of a million statements on one table maps one id a million times.
  std::unordered_map<uint64_t, std::string> mapped_;
  bool inGroup_ = false;
  bool insertId_ = false;  // an Intvar event set INSERT_ID for the next statement
  std::string identity_;
  std::string file_;
  uint64_t position_ = 0;
  uint32_t eventTime_ = 0;
  bool tooLarge_ = false;
  bool checksum_ = true;  // the log's events end in a CRC32 (binlog_checksum, which the dump asks for)
};

}  // namespace outbox::db

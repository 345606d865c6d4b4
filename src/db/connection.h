#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "config/config.h"

typedef struct st_mysql MYSQL;
typedef struct st_mysql_res MYSQL_RES;

namespace outbox::db {

// Owns the MySQL C API's handles (CHandle's pattern; the calls are in src/db's .cpp files, the
// only ones that include mysql.h): closes a connection, frees a result.
struct MysqlDeleter {
  void operator()(MYSQL* mysql) const;
  void operator()(MYSQL_RES* res) const;
};
template <typename T>
using MysqlHandle = std::unique_ptr<T, MysqlDeleter>;

struct ConnectParams {
  std::string host = "127.0.0.1";
  unsigned port = 3306;
  std::string user;
  std::string password;  // secret: never logged
  std::string database;
  std::string socket;
  SslMode sslMode = SslMode::kPreferred;  // see Dsn
  std::string sslCa;
  std::string sslCert;
  std::string sslKey;
  std::chrono::seconds connectTimeout{5};
  std::chrono::seconds readTimeout{30};
  // The largest packet the connection reads (an event of the binary log is one); a larger one ends
  // the read with CR_NET_PACKET_TOO_LARGE. 0: the library's default (1 GiB).
  unsigned long maxAllowedPacket = 0;
};

// Converts the state of a MySQL handle after a failed call into a Status with its Cause: lost
// connections and lock conflicts (lock wait timeouts, deadlocks, NOWAIT conflicts, snapshot
// isolation conflicts) are transient; everything else is permanent. The text keeps the server's
// error number and message, which never contain credentials.
Status fromMysql(MYSQL* mysql, std::string_view what);
// The same from an error number and text (what a failed call on `mysql` reports).
Status fromMysql(unsigned code, std::string_view error, std::string_view what);

// Call once in main() before any thread opens a connection.
void initLibrary();

// A column type as the snapshot and the relay need to know it.
enum class ColumnKind { kNumber, kText, kOther };

struct Column {
  std::string name;
  ColumnKind kind;
};

// A buffered or streamed result set. Owns its MYSQL_RES; move-only.
class Rows {
 public:
  Rows() = default;
  explicit Rows(MYSQL_RES* res);
  Rows(Rows&&) noexcept = default;
  Rows& operator=(Rows&&) noexcept = default;

  const std::vector<Column>& columns() const { return columns_; }
  size_t columnCount() const { return columns_.size(); }
  // Moves to the next row; false at the end (or on a read error in a streamed result: see the
  // connection's error). Field views stay valid until the next call.
  bool next();
  // The position of the column `name` (the SELECT's alias, or the column's own name; ASCII case
  // ignored, as SQL compares column names). Where rows are many, look it up once per result set,
  // before the first next(). A name the result has not, or has twice, is the caller's bug: throws
  // std::logic_error that names it.
  size_t index(std::string_view name) const;
  // Whether the result has a column `name` (compared as index() does): for a statement whose
  // columns the server decides (a SHOW), where a server may leave one out.
  bool has(std::string_view name) const;
  // A field of the current row, by position or by name (each by-name read looks the name up: for
  // a row or two; a loop over many rows reads by the positions index() gave).
  bool isNull(size_t i) const { return row_[i] == nullptr; }
  std::string_view text(size_t i) const;
  std::optional<std::string_view> optText(size_t i) const;
  uint64_t u64(size_t i) const;
  std::optional<uint64_t> optU64(size_t i) const;
  int64_t i64(size_t i) const;
  bool isNull(std::string_view name) const { return isNull(index(name)); }
  std::string_view text(std::string_view name) const { return text(index(name)); }
  std::optional<std::string_view> optText(std::string_view name) const { return optText(index(name)); }
  uint64_t u64(std::string_view name) const { return u64(index(name)); }
  std::optional<uint64_t> optU64(std::string_view name) const { return optU64(index(name)); }
  int64_t i64(std::string_view name) const { return i64(index(name)); }
  uint64_t rowCount() const;

 private:
  MysqlHandle<MYSQL_RES> res_;
  std::vector<Column> columns_;
  char** row_ = nullptr;
  unsigned long* lengths_ = nullptr;
};

// One MySQL connection. Not thread-safe: one per thread. Every call returns a Status; after a
// transient failure the connection is unusable and must be replaced.
class Connection {
 public:
  static Result<std::unique_ptr<Connection>> open(const ConnectParams& params);

  Status exec(std::string_view sql);
  // Runs a statement and returns how many rows it matched (connections set CLIENT_FOUND_ROWS: an
  // UPDATE that finds its row already as it would set it counts it).
  Result<uint64_t> execCount(std::string_view sql);
  // Runs statements sent as one (`;` between them), in order, until one fails: how many rows each
  // that ran matched, and the failure that stopped the rest (ok when none did). One round trip
  // where each statement would take one of its own: the server's reading, answering and waking
  // for each is a tenth of a trickle's assign (docs/design.md, "Cost per row"). No statement may
  // return rows. The connection accepts several statements in one from its first call of this on
  // (one command to the server, once).
  struct Counts {
    std::vector<uint64_t> matched;
    Status status;
  };
  Counts execCounts(std::string_view sql);
  // How a query's rows reach the client: kBuffered reads the whole result at once; kStreamed
  // reads rows from the server as next() asks for them, and the connection can run nothing else
  // until the Rows is gone (a snapshot of any size in bounded memory).
  enum class Fetch { kBuffered, kStreamed };
  Result<Rows> query(std::string_view sql, Fetch fetch = Fetch::kBuffered);
  // The first column of the first row as an integer, or nullopt for no row / NULL.
  Result<std::optional<uint64_t>> queryU64(std::string_view sql);

  Status begin() { return exec("START TRANSACTION"); }
  Status commit() { return exec("COMMIT"); }
  // autocommit, on from open(). Off, the first statement after a COMMIT or ROLLBACK begins a
  // transaction by itself: a pool lends such connections for transactions only, which then need
  // no START TRANSACTION of their own (docs/design.md, "Connections"). One statement when it
  // changes, none when it is already so.
  Status setAutocommit(bool on);
  bool autocommit() const { return autocommit_; }
  // How long the server lets this connection sit idle before it closes it (its wait_timeout, as
  // set by whoever set it; zero: not said). A pool does not lend one that rested about that long.
  void setIdleLimit(std::chrono::seconds limit) { idleLimit_ = limit; }
  std::chrono::seconds idleLimit() const { return idleLimit_; }
  // Rolls back, ignoring failure (the connection may already be gone).
  void rollback();

  // 'text' with quotes and escapes, for splicing a value into SQL.
  std::string quote(std::string_view text);
  Status lastError(std::string_view what);
  // Whether the last call failed (e.g. a streamed result that ended on a read error).
  bool failed() const;
  // Cuts the connection off the server at once (its socket shut down both ways), for a streamed
  // result given up before its end: the Rows then ends without reading what is left (freeing it
  // would otherwise read every remaining row), and the server ends the statement, and rolls back
  // its transaction, when it next writes. Nothing can run on the connection afterwards.
  void abandon();

  // The default database (what unqualified table names mean), and a change of it (no statement:
  // the protocol's own command, and nothing when it is already that one).
  const std::string& database() const { return database_; }
  Status useDatabase(const std::string& database);
  // Whether the server said the last call left a transaction open.
  bool inTransaction() const;

 private:
  friend class BinlogReader;  // starts a binlog dump on its own connection
  explicit Connection(MYSQL* mysql) : mysql_(mysql) {}
  MysqlHandle<MYSQL> mysql_;
  std::string database_;
  bool multiStatements_ = false;  // MYSQL_OPTION_MULTI_STATEMENTS_ON was set (execCounts)
  bool autocommit_ = true;        // as set by open() and setAutocommit()
  std::chrono::seconds idleLimit_{0};
};

ConnectParams paramsFrom(const Dsn& dsn);

}  // namespace outbox::db

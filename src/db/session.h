#pragma once

#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

#include "common/status.h"
#include "db/connection.h"
#include "db/pool.h"

namespace outbox::db {

// One connection kept for a component (the relay's stores, the lease, the probe), opened when
// first needed and again after it broke: the one place that decides when a connection is dropped.
// A call given to run() that fails transiently (the server went away, a lock wait timed out)
// drops it, so the next call reconnects; a permanent error keeps it (on a pool's session, any
// failure drops it). transaction() drops it on any transient failure, also one of the caller's
// own making (a guarded write that matched no row), but for a batch refused for a new scan. A
// call the server rolled back to settle a conflict (Cause::kRolledBack: a deadlock, a
// snapshot-isolation conflict) runs again at once on the same connection, up to kRolledBackTries
// times in all, so two writers of one row (the relay's assign and mark) do not end a session over
// it: the calls given to run() and transaction() must be safe to run again. Not thread-safe, like
// Connection.
class Session {
 public:
  // Runs on every new connection before it is used (session variables, checks); its failure
  // drops the connection and is what the call that needed it returns.
  using Setup = std::function<Status(Connection&)>;

  explicit Session(ConnectParams params, Setup setup = {});
  // A session over `pool` (docs/design.md, "Connections"): each call borrows a connection on
  // `database` and gives it back when done, unless a Hold keeps one for a while. `prepare` runs
  // on the first call, and again on the call after one that dropped the connection (on whichever
  // connection the call has): what the session needs of the server once, not of each connection.
  // The pool must outlive the session.
  Session(ConnectionPool& pool, std::string database, Setup prepare = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  static constexpr int kRolledBackTries = 3;

  // The connection, opened (and set up) first when there is none. On a pool's session, one
  // borrowed until the call or Hold that uses it ends, set for `use` (ConnectionPool::Use); one a
  // Hold keeps already is used as it is, but that statements on it commit each.
  using Use = ConnectionPool::Use;
  Result<Connection*> connection(Use use = Use::kStatements);
  bool connected() const { return conn_ != nullptr || loan_; }
  // Drops the connection (a pool's closes, not given back) and prepares again on the next call.
  void drop();

  // Keeps one connection for the calls made while it lives (a pool's session: borrowed on the
  // first of them, given back at the end), for reads that must share one.
  class Hold {
   public:
    explicit Hold(Session& session) : session_(session) { ++session_.holds_; }
    ~Hold() {
      if (--session_.holds_ == 0) session_.giveBack();
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    Session& session_;
  };

  // fn(Connection&) -> Status or Result<T>, on the connection; its failure drops the connection as
  // above.
  template <typename Fn>
  std::invoke_result_t<Fn&, Connection&> run(Fn&& fn) {
    Hold hold(*this);
    for (int attempt = 1;; ++attempt) {
      auto conn = connection();
      if (!conn.isOk()) return conn.status();
      auto result = fn(**conn);
      const Status& s = statusOf(result);
      if (s.cause() == Cause::kRolledBack && attempt < kRolledBackTries) continue;
      dropIfBroken(s);
      return result;
    }
  }

  // fn(Connection&) -> Status in a transaction, then COMMIT; on failure, rolls back, and a
  // transient failure (also one of fn's own, such as a compare-and-set that lost) drops the
  // connection, but for a refusal that asks for a new scan (Cause::kScanAgain) whose rollback
  // went through. A pool's session lends a connection with autocommit off (Use::kTransactions):
  // fn's first statement begins the transaction, no START TRANSACTION is sent. kBySession: the
  // session sends START TRANSACTION when the connection has autocommit on; kByFn: fn begins the
  // transaction itself (on such a connection, START TRANSACTION with its first statements in one
  // round trip: Connection::execCounts).
  enum class Begin { kBySession, kByFn };
  Status transaction(const std::function<Status(Connection&)>& fn, Begin begin = Begin::kBySession);

 private:
  static const Status& statusOf(const Status& s) { return s; }
  template <typename T>
  static const Status& statusOf(const Result<T>& r) {
    return r.status();
  }
  void dropIfBroken(const Status& s);
  // A pool's session gives its connection back (none held any more).
  void giveBack();

  ConnectParams params_;
  Setup setup_;
  std::unique_ptr<Connection> conn_;
  // A pool's session: the pool, its database, the loan while a call or Hold runs, which
  // connection it had last for each use (asked for again: a server clock read on it stays
  // comparable), and whether `setup_` (the prepare) has run since the last drop.
  ConnectionPool* pool_ = nullptr;
  std::string database_;
  ConnectionPool::Loan loan_;
  uint64_t lastSerial_[2] = {0, 0};  // by Use
  bool prepared_ = false;
  int holds_ = 0;
  bool inTransactionCall_ = false;  // transaction() runs (its connection is not set again)
};

}  // namespace outbox::db

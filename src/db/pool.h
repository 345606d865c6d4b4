#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "db/connection.h"

namespace outbox::db {

// A bounded set of connections to one database server with one account, shared by the sources
// that reach it that way (docs/design.md, "Connections"): a bridge's connections to a server do
// not grow with its sources. A caller borrows a connection for one call (or a few that must share
// it) and gives it back; while all are lent, the next borrower waits for one. Connections are
// opened when needed, up to the capacity, and each runs the pool's setup once. A connection given
// back inside a transaction, or whose last statement failed, is rolled back, and closed rather
// than lent again if that does not clear it.
// Thread-safe.
class ConnectionPool {
 public:
  using Setup = std::function<Status(Connection&)>;

  // `params.database` is only where a new connection starts: each borrow names its own.
  ConnectionPool(ConnectParams params, size_t capacity, Setup setup = {});
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;
  ~ConnectionPool();

  // A lent connection; gives it back when destroyed.
  class Loan {
   public:
    Loan() = default;
    Loan(Loan&& other) noexcept;
    Loan& operator=(Loan&& other) noexcept;
    ~Loan();
    Connection& operator*() const { return *conn_; }
    Connection* operator->() const { return conn_.get(); }
    explicit operator bool() const { return conn_ != nullptr; }
    // Which connection this is: unique for the pool's life (a reopened one gets a new serial).
    uint64_t serial() const { return serial_; }
    // Closes the connection instead of giving it back (it broke, or holds state it must not pass on).
    void discard();

   private:
    friend class ConnectionPool;
    Loan(ConnectionPool* pool, std::unique_ptr<Connection> conn, uint64_t serial)
        : pool_(pool), conn_(std::move(conn)), serial_(serial) {}
    void giveBack();
    ConnectionPool* pool_ = nullptr;
    std::unique_ptr<Connection> conn_;
    uint64_t serial_ = 0;
  };

  // What a borrower runs: statements that each commit (autocommit on), or transactions, lent with
  // autocommit off so that they need no START TRANSACTION (a statement of every trickle batch's
  // assign: docs/design.md, "Connections"). Each such transaction ends in COMMIT or ROLLBACK.
  enum class Use { kStatements, kTransactions };

  // A connection whose default database is `database`, set for `use`: an idle one set so (the
  // one numbered `preferred` if it is idle, then one already on that database), else a new one
  // while fewer than the capacity are open, else an idle one set the other way (set again: one
  // statement), else the first given back. Fails when a new connection cannot be opened or set
  // up, and for a second after one could not be, with that failure. Never one that rested about as
  // long as its server lets a connection rest (MySQL's wait_timeout): that one is closed instead.
  Result<Loan> borrow(const std::string& database, uint64_t preferred = 0, Use use = Use::kStatements);

  size_t capacity() const { return capacity_; }
  // How many connections are open now (lent or idle), and how many borrowers wait.
  size_t openConnections() const;
  uint64_t waits() const;

 private:
  struct Idle {
    std::unique_ptr<Connection> conn;
    uint64_t serial;
    std::chrono::steady_clock::time_point since;  // given back
  };
  // Takes out of idle_ the connections that rested long enough for their server to have closed
  // them (Connection::idleLimit, less a quarter for the clocks' difference): closed, not lent.
  std::vector<Idle> takeExpired(std::chrono::steady_clock::time_point now);  // REQUIRES(mu_)
  void giveBack(std::unique_ptr<Connection> conn, uint64_t serial);
  // A connection being opened failed with `failure`: its place frees.
  void closed(const Status& failure);
  static constexpr std::chrono::seconds kOpenFailureHeld{1};

  const ConnectParams params_;
  const size_t capacity_;
  const Setup setup_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Idle> idle_;  // GUARDED_BY(mu_)
  size_t open_ = 0;         // GUARDED_BY(mu_): lent, idle, or being opened
  uint64_t nextSerial_ = 1;  // GUARDED_BY(mu_)
  uint64_t waits_ = 0;       // GUARDED_BY(mu_)
  // The last failed open, and when: the borrowers that come within kOpenFailureHeld get it too.
  Status openFailure_;                                            // GUARDED_BY(mu_)
  std::optional<std::chrono::steady_clock::time_point> openFailedAt_;  // GUARDED_BY(mu_)
};

// The pools of a process for one purpose, one per server and account (host, port, socket, user,
// password, TLS settings: sources that differ in any of these cannot share a connection).
class ConnectionPools {
 public:
  using Setup = ConnectionPool::Setup;
  ConnectionPools(size_t capacity, Setup setup = {}) : capacity_(capacity), setup_(std::move(setup)) {}
  // The pool for `params` (made on first use). Lives as long as this object.
  ConnectionPool& forServer(const ConnectParams& params);
  size_t capacity() const { return capacity_; }
  size_t openConnections() const;
  // Over all its pools: connections open now, the most they may open, borrowers that had to wait.
  struct Usage {
    size_t open = 0;
    size_t limit = 0;
    uint64_t waits = 0;
  };
  Usage usage() const;

 private:
  const size_t capacity_;
  const Setup setup_;
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<ConnectionPool>> pools_;  // GUARDED_BY(mu_)
};

}  // namespace outbox::db

#pragma once

#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

#include "common/status.h"
#include "db/connection.h"

namespace outbox::db {

// One connection kept for a component (the relay's stores, the lease, the probe), opened when
// first needed and again after it broke: the one place that decides when a connection is dropped.
// A call on it that fails transiently (the server went away, a lock wait timed out) drops it, so
// the next call reconnects; a permanent error, or a transient one of the caller's own making (a
// guarded write that matched no row), keeps it. A call the server rolled back to settle a conflict
// (Cause::kRolledBack: a deadlock, a snapshot-isolation conflict) runs again at once on the same
// connection, up to kRolledBackTries times in all, so two writers of one row (the relay's assign
// and mark) do not end a session over it: the calls given to run() and transaction() must be
// safe to run again. Not thread-safe, like Connection.
class Session {
 public:
  // Runs on every new connection before it is used (session variables, checks); its failure
  // drops the connection and is what the call that needed it returns.
  using Setup = std::function<Status(Connection&)>;

  explicit Session(ConnectParams params, Setup setup = {});

  static constexpr int kRolledBackTries = 3;

  // The connection, opened (and set up) first when there is none.
  Result<Connection*> connection();
  bool connected() const { return conn_ != nullptr; }
  void drop() { conn_.reset(); }

  // fn(Connection&) -> Status or Result<T>, on the connection; its failure drops the connection as
  // above.
  template <typename Fn>
  std::invoke_result_t<Fn&, Connection&> run(Fn&& fn) {
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

  // fn(Connection&) -> Status between START TRANSACTION and COMMIT; on failure, rolls back, and a
  // transient failure (also one of fn's own, such as a compare-and-set that lost) drops the
  // connection.
  Status transaction(const std::function<Status(Connection&)>& fn);

 private:
  static const Status& statusOf(const Status& s) { return s; }
  template <typename T>
  static const Status& statusOf(const Result<T>& r) {
    return r.status();
  }
  void dropIfBroken(const Status& s);

  ConnectParams params_;
  Setup setup_;
  std::unique_ptr<Connection> conn_;
};

}  // namespace outbox::db

#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "db/connection.h"

namespace outbox::db {

// A transaction open on the server, for an operator who must end it: which connection holds it
// and for how long.
struct OpenTransaction {
  uint64_t connection = 0;  // 0: none (an XA transaction left PREPARED, or one recovered at restart)
  std::string user;
  std::string host;
  std::string command;      // PROCESSLIST's: Sleep, Query, ...
  uint64_t seconds = 0;     // since it began
};

struct OpenTransactions {
  std::vector<OpenTransaction> transactions;  // oldest first
  std::vector<std::string> preparedXids;      // XA RECOVER's, printable (empty: none, or not allowed)
  // One line for a log or a status page: "connection 42 (app@10.0.0.5:5123, Sleep) open 312 s;
  // XA transaction 'x' left PREPARED (XA COMMIT or XA ROLLBACK it)". Empty when there is none.
  std::string describe() const;
};

// The transactions open at least `olderThan` but the caller's own (information_schema.INNODB_TRX,
// which needs PROCESS, joined with PROCESSLIST), at most `limit`, and the xids XA RECOVER lists
// (skipped when the account may not ask). INNODB_TRX is a cache InnoDB refreshes at most every
// 100 ms: for people, not for decisions.
Result<OpenTransactions> openTransactions(Connection& conn, std::chrono::seconds olderThan, size_t limit);

}  // namespace outbox::db

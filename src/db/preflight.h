#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "db/connection.h"

namespace outbox::db {

// What the bridge needs of a source's database server (README, "Which server a source reads"),
// checked on every connect of a relay and once at `run` start:
// - the PROCESS privilege, to see every connection in information_schema.PROCESSLIST (any may
//   hold an outbox id);
// - a primary: a server with read_only on is a replica, where a transaction of the primary that
//   holds an id does not show, so a row could be lost.
// A permanent Status says what is missing and the exact statement that fixes it. `notes` gets
// what the operator must know but that does not stop the bridge (a Galera node, replica threads
// applying writes from another server).
Status checkServer(Connection& conn, std::vector<std::string>& notes);

}  // namespace outbox::db

#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/stop_token.h"
#include "wake/watched.h"

namespace outbox::db {
class Connection;
}

namespace outbox {

// One idle poll for the sources that share a database (and account; docs/design.md, Waking up):
// every poll_interval (the shortest of theirs), one statement reads each outbox table's highest
// id, and a source whose table holds an id above what its scan has read (Wakeup::readThrough)
// is rung, as is one whose `epoch bump` waits for its leader to finish it; the others stay
// asleep. So a quiet database costs one statement per poll_interval, however many sources it
// has, and a source need not poll on its own to find new rows (open holes, which no new id
// shows, keep their own probes). A source the binlog doorbell watches (it rings for its new rows
// and for an `epoch bump`) is checked only every Wakeup::kWatchedCheck (or poll_interval, when
// longer), the net under writes the binary log does not carry (a producer with sql_log_bin = 0),
// unless its relay gave up waiting for the rows of its rings (Wakeup::ringsUnanswered): while the
// doorbell watches them all, the check costs a statement a kWatchedCheck. While its checks
// succeed, each source's
// Wakeup::idleChecked is set. The credentials are the first source's (source names are SQL
// identifiers: safe to splice). A source whose part fails — its table missing or not granted, or
// its table's metadata lock not given within a second (an ALTER queued behind a long
// transaction) — is checked alone from then on, after the others, and polls on its own until its
// part works again: one source's table never fails or holds up the check of the others. When
// the connection fails, every source polls on its own until it is made again.
class IdleCheck {
 public:

  IdleCheck(std::vector<WatchedSource> sources, StopSignal& stop);
  ~IdleCheck();

  void start();
  void join();

 private:
  void run();
  // One statement for the sources `which`: rings those with new ids (or an `epoch bump` waiting)
  // and marks them checked; on failure, changes nothing.
  Status check(db::Connection& conn, const std::vector<size_t>& which);
  // Sets Wakeup::idleChecked of the sources `which` (indexes into sources_); rings those it clears.
  void setChecked(const std::vector<size_t>& which, bool on);
  // The sources a round checks: those no doorbell watches or whose rings went unanswered, or
  // (`all`) every one.
  std::vector<size_t> due(bool all) const;

  std::vector<WatchedSource> sources_;
  StopSignal& stop_;
  std::vector<std::string> parts_;  // parallel to sources_: each one's SELECT
  std::chrono::milliseconds interval_;
  std::string where_;  // for logs
  std::thread thread_;
};

}  // namespace outbox

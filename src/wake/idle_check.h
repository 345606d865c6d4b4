#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/stop_token.h"
#include "wake/watched.h"

namespace outbox {

// One idle poll for the sources that share a database (and account; ARCHITECTURE.md 3b):
// every poll_interval (the shortest of theirs), one statement reads each outbox table's highest
// id, and a source whose table holds an id above what its scan has read (Wakeup::readThrough)
// is rung, as is one whose `epoch bump` waits for its leader to finish it; the others stay
// asleep. So a quiet database costs one statement per poll_interval, however many sources it
// has, and a source need not poll on its own to find new rows (open holes, which no new id
// shows, keep their own probes). A source the binlog doorbell watches (it rings for its new rows
// and for an `epoch bump`) is checked only every kWatchedCheck, the net under a doorbell that
// cannot see some writes (a producer with sql_log_bin = 0, a binlog_ignore_db filter): while the
// doorbell watches them all, the check costs a statement a kWatchedCheck. While its checks
// succeed, each source's
// Wakeup::idleChecked is set. The credentials are the first source's (source names are SQL
// identifiers: safe to splice); a table it may not read makes the check fail, and the sources
// poll on their own.
class IdleCheck {
 public:
  // How often the sources the doorbell watches are checked too.
  static constexpr std::chrono::seconds kWatchedCheck{5};

  IdleCheck(std::vector<WatchedSource> sources, StopSignal& stop);
  ~IdleCheck();

  void start();
  void join();

 private:
  void run();
  void setChecked(bool on);
  // The check of the sources no doorbell watches now, or (`watchedToo`) of every source ("" when
  // there is none to check).
  std::string statement(bool watchedToo) const;

  std::vector<WatchedSource> sources_;
  StopSignal& stop_;
  std::vector<std::string> parts_;  // parallel to sources_: each one's SELECT
  std::chrono::milliseconds interval_;
  std::string where_;  // for logs
  std::thread thread_;
};

}  // namespace outbox

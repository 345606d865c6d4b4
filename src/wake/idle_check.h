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
// shows, keep their own probes). A source the binlog doorbell watches is left out (the doorbell
// rings for its new rows and for an `epoch bump`): while it watches them all, the check costs
// nothing. While its checks succeed, each source's
// Wakeup::idleChecked is set. The credentials are the first source's (source names are SQL
// identifiers: safe to splice); a table it may not read makes the check fail, and the sources
// poll on their own.
class IdleCheck {
 public:
  IdleCheck(std::vector<WatchedSource> sources, StopSignal& stop);
  ~IdleCheck();

  void start();
  void join();

 private:
  void run();
  void setChecked(bool on);
  // The check of the sources no doorbell watches now ("" when it watches them all).
  std::string statement() const;

  std::vector<WatchedSource> sources_;
  StopSignal& stop_;
  std::vector<std::string> parts_;  // parallel to sources_: each one's SELECT
  std::chrono::milliseconds interval_;
  std::string where_;  // for logs
  std::thread thread_;
};

}  // namespace outbox

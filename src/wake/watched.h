#pragma once

#include <string>
#include <vector>

#include "common/wakeup.h"
#include "config/config.h"

namespace outbox {

// A source as the doorbell and the idle check of its database see it: its outbox table and the
// Wakeup its relay waits on. `config` and `wakeup` outlive the watcher.
struct WatchedSource {
  const SourceConfig* config = nullptr;
  Wakeup* wakeup = nullptr;
};

// The sources that share one doorbell (those reached at one server address that may use it,
// wake != poll) and those that share one idle check (one database, reached at one address as one
// account), in the order of `sources`.
std::vector<std::vector<WatchedSource>> doorbellGroups(const std::vector<WatchedSource>& sources);
std::vector<std::vector<WatchedSource>> idleCheckGroups(const std::vector<WatchedSource>& sources);

// "name1, name2, ..." of a group, for logs.
std::string sourceNames(const std::vector<WatchedSource>& group);

}  // namespace outbox

#pragma once

// Which of a test's bridges holds a source's lease now, read from outbox_bridge_lease (its
// holder id names the process: "host:pid:start"). For the fault tests that kill the leader.

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness.h"

namespace outbox::test {

// The running bridge whose pid the lease's unexpired holder names, waited for up to 10 s; throws
// when none takes it (`why` is added to the error: the bridges' logs).
inline BridgeProcess* leaseHolder(TestDatabase& database, const std::string& source,
                                  const std::vector<std::unique_ptr<BridgeProcess>>& bridges,
                                  const std::string& why = "") {
  BridgeProcess* found = nullptr;
  waitUntil([&] {
    auto holder = database.sql().query(
        fmt::format("SELECT holder_id FROM outbox_bridge_lease WHERE source = '{}' AND expires_at > NOW(6)", source));
    if (!holder.isOk() || !holder->next()) return false;
    for (const auto& b : bridges) {
      if (b->running() && std::string(holder->text(0)).find(fmt::format(":{}:", b->pid())) != std::string::npos) {
        found = b.get();
      }
    }
    return found != nullptr;
  }, std::chrono::seconds(10));
  if (found == nullptr) throw std::runtime_error("no bridge took the lease\n" + why);
  return found;
}

}  // namespace outbox::test

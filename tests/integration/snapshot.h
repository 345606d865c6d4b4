#pragma once

// What the snapshot_integration cases share (snapshot_test.cpp, snapshot_replica_test.cpp): a
// replica of a bridge's source, stepped until a condition holds, and its table.

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness.h"
#include "replica/replica.h"

namespace outbox::test {

using namespace std::chrono_literals;

inline std::map<std::string, std::optional<std::string>> replicaTable(const Replica& replica) {
  std::map<std::string, std::optional<std::string>> out;
  for (const auto& [key, values] : replica.records()) out[key] = values.at(1);
  return out;
}

inline Replica::Options replicaOptions(int port, const std::string& source, std::vector<std::string>* lines = nullptr) {
  Replica::Options o;
  o.baseUrl = fmt::format("http://127.0.0.1:{}", port);
  o.source = source;
  o.nats.url = stack().natsUrl;
  o.verifyInterval = 100ms;
  if (lines) o.report = [lines](const std::string& l) { lines->push_back(l); };
  return o;
}

// Steps the replica until `done` or the deadline.
inline bool stepUntil(Replica& replica, const std::function<bool()>& done, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    (void)replica.step(50ms);
    if (done()) return true;
  }
  return false;
}

}  // namespace outbox::test

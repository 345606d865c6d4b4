#include "wake/watched.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

namespace outbox {

namespace {

template <typename Key>
std::vector<std::vector<WatchedSource>> groupBy(const std::vector<WatchedSource>& sources, Key key, bool doorbell) {
  std::map<decltype(key(*sources.front().config)), size_t> index;
  std::vector<std::vector<WatchedSource>> groups;
  for (const auto& s : sources) {
    if (doorbell && s.config->wake == Wake::kPoll) continue;
    auto [it, added] = index.try_emplace(key(*s.config), groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(s);
  }
  return groups;
}

}  // namespace

std::vector<std::vector<WatchedSource>> doorbellGroups(const std::vector<WatchedSource>& sources) {
  if (sources.empty()) return {};
  return groupBy(
      sources,
      [](const SourceConfig& c) {
        // One server address as the config matches a [[doorbell]] to it: the host without case.
        std::string host = c.dsn.host;
        std::transform(host.begin(), host.end(), host.begin(), [](unsigned char ch) { return std::tolower(ch); });
        return std::make_tuple(host, c.dsn.port, c.dsn.socket);
      },
      true);
}

std::vector<std::vector<WatchedSource>> idleCheckGroups(const std::vector<WatchedSource>& sources) {
  if (sources.empty()) return {};
  return groupBy(
      sources,
      [](const SourceConfig& c) {
        return std::make_tuple(c.dsn.host, c.dsn.port, c.dsn.socket, c.dsn.user, c.dsn.database);
      },
      false);
}

std::string sourceNames(const std::vector<WatchedSource>& group) {
  std::string out;
  for (const auto& s : group) out += (out.empty() ? "" : ", ") + s.config->name;
  return out;
}

}  // namespace outbox

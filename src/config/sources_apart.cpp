// What two sources must not share. The database compares names without case (a state row per
// source name, table names on a case-insensitive file system), so names are compared that way too.
#include <algorithm>
#include <cctype>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "config/section.h"
#include "settle/settled_message.h"

namespace outbox::config_detail {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The bridge's own tables, beside the outbox tables in each source's database (sql/bridge/).
constexpr const char* kBridgeTables[] = {"outbox_source_state",  "outbox_bridge_lease",     "outbox_quarantine",
                                         "outbox_epoch_history", "outbox_bridge_candidate", "outbox_schema_migrations",
                                         "outbox_scan_holes",    "outbox_bump_removed"};

// The same database: same server address and schema (two addresses of one server are not seen).
std::string databaseOf(const Dsn& dsn) {
  return fmt::format("{}\n{}\n{}\n{}", lower(dsn.host), dsn.port, dsn.socket, lower(dsn.database));
}

// The first source (in file order) that claimed each name of one kind.
using Claims = std::unordered_map<std::string, const SourceConfig*>;
// The subject prefixes claimed: the source, and its prefix the claim comes from (its
// subject_prefix, or its settled prefix).
using PrefixClaims = std::unordered_map<std::string, std::pair<const SourceConfig*, std::string>>;

}  // namespace

// One pass over the sources, each checked against what the earlier ones claimed in hash maps: near
// linear (22,800 sources compared pair by pair took more than 10 s).
void checkSourcesApart(const std::vector<SourceConfig>& sources) {
  for (const auto& s : sources) {
    const std::string table = lower(s.outboxTable);
    for (const char* own : kBridgeTables) {
      if (table == own || table == std::string(own) + "_versions") {
        throw ConfigError("source." + s.name + ".outbox_table",
                          fmt::format("'{}' is one of the bridge's own tables", s.outboxTable));
      }
    }
  }
  Claims names, tables, paths;
  PrefixClaims prefixes, outerPrefixes;
  // Every stream an earlier source uses (its stream, latest_stream, settled_stream), and which
  // key of that source names it.
  std::unordered_map<std::string, std::pair<const SourceConfig*, const char*>> streams;
  for (const SourceConfig& b : sources) {
    const std::string key = "source." + b.name + ".";
    if (auto [it, fresh] = names.try_emplace(lower(b.name), &b); !fresh) {
      throw ConfigError("source." + b.name, fmt::format("differs from source {} only in case: the database compares "
                                                        "names without case, and both would share one state row",
                                                        it->second->name));
    }
    const std::string database = databaseOf(b.dsn) + "\n", table = lower(b.outboxTable);
    if (auto it = tables.find(database + table); it != tables.end()) {
      throw ConfigError(key + "outbox_table", fmt::format("'{}' is source {}'s outbox table too, in the same "
                                                          "database: two relays would version one table",
                                                          b.outboxTable, it->second->name));
    }
    constexpr std::string_view kVersions = "_versions";
    auto versionsPair = tables.find(database + table + std::string(kVersions));
    if (versionsPair == tables.end() && table.ends_with(kVersions)) {
      versionsPair = tables.find(database + table.substr(0, table.size() - kVersions.size()));
    }
    if (versionsPair != tables.end()) {
      throw ConfigError(key + "outbox_table",
                        fmt::format("'{}' and source {}'s '{}': one is the other's versions table", b.outboxTable,
                                    versionsPair->second->name, versionsPair->second->outboxTable));
    }
    tables.emplace(database + table, &b);

    // Subject spaces overlap when one prefix is the other or a token prefix of it (a.b and a.b.c):
    // b's own prefixes against earlier prefixes, and b against the token prefixes of earlier ones.
    // A settling source's settled subjects (`<subject_prefix>_settled.>`) are a prefix of its own.
    auto claimPrefix = [&](const std::string& prefix, const char* keyOfB) {
      const std::pair<const SourceConfig*, std::string>* overlapping = nullptr;
      for (size_t dot = 0; overlapping == nullptr && dot != std::string::npos;) {
        dot = prefix.find('.', dot + 1);
        if (auto it = prefixes.find(prefix.substr(0, dot)); it != prefixes.end()) overlapping = &it->second;
      }
      if (auto it = outerPrefixes.find(prefix); overlapping == nullptr && it != outerPrefixes.end()) {
        overlapping = &it->second;
      }
      if (overlapping != nullptr) {
        const auto& [other, theirs] = *overlapping;
        auto what = [](const SourceConfig& source, const std::string& p) {
          return p == source.subjectPrefix ? "subjects" : "settled subjects";
        };
        throw ConfigError(key + keyOfB, fmt::format("its {} {}.> and source {}'s {} {}.> overlap: their streams would "
                                                    "collide",
                                                    what(b, prefix), shownValue(prefix), other->name,
                                                    what(*other, theirs), shownValue(theirs)));
      }
      prefixes.emplace(prefix, std::make_pair(&b, prefix));
      for (size_t dot = prefix.find('.'); dot != std::string::npos; dot = prefix.find('.', dot + 1)) {
        outerPrefixes.try_emplace(prefix.substr(0, dot), std::make_pair(&b, prefix));
      }
    };
    claimPrefix(b.subjectPrefix, "subject_prefix");
    if (b.settles()) claimPrefix(settledPrefix(b.subjectPrefix), "settle");

    if (!b.snapshotPath.empty()) {
      if (auto [it, fresh] = paths.try_emplace(b.snapshotPath, &b); !fresh) {
        throw ConfigError(key + "snapshot_path", fmt::format("'{}' is source {}'s snapshot_path too",
                                                             shownValue(b.snapshotPath), it->second->name));
      }
    }
    // b's streams against every stream of the earlier sources (b's own are apart: source.cpp).
    for (auto [name, keyOfB] : {std::pair<const std::string*, const char*>{&b.stream, "stream"},
                                {&b.latestStream, "latest_stream"}, {&b.settledStream, "settled_stream"}}) {
      if (name->empty()) continue;
      if (auto it = streams.find(*name); it != streams.end()) {
        const auto& [user, theirKey] = it->second;
        throw ConfigError(key + keyOfB, fmt::format("stream '{}' is used by source {} (its {})", shownValue(*name),
                                                    user->name, theirKey));
      }
    }
    for (auto [name, keyOfB] : {std::pair<const std::string*, const char*>{&b.stream, "stream"},
                                {&b.latestStream, "latest_stream"}, {&b.settledStream, "settled_stream"}}) {
      if (!name->empty()) streams.emplace(*name, std::make_pair(&b, keyOfB));
    }
  }
}

}  // namespace outbox::config_detail

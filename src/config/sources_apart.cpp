// What two sources must not share. The database compares names without case (a state row per
// source name, table names on a case-insensitive file system), so names are compared that way too.
#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "config/section.h"

namespace outbox::config_detail {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The bridge's own tables, beside the outbox tables in each source's database (sql/bridge/).
constexpr const char* kBridgeTables[] = {"outbox_source_state",     "outbox_bridge_lease",     "outbox_quarantine",
                                         "outbox_epoch_history",    "outbox_bridge_candidate", "outbox_schema_migrations",
                                         "outbox_scan_holes",       "outbox_bump_removed"};

// The same database: same server address and schema (two addresses of one server are not seen).
bool sameDatabase(const Dsn& a, const Dsn& b) {
  return lower(a.host) == lower(b.host) && a.port == b.port && a.socket == b.socket &&
         lower(a.database) == lower(b.database);
}

// One subject space is inside the other's: equal, or a token prefix (a.b and a.b.c).
bool subjectsOverlap(const std::string& a, const std::string& b) {
  auto inside = [](const std::string& outer, const std::string& inner) {
    return inner == outer || inner.rfind(outer + ".", 0) == 0;
  };
  return inside(a, b) || inside(b, a);
}

}  // namespace

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
  for (size_t i = 0; i < sources.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      const SourceConfig& a = sources[j];  // the earlier one
      const SourceConfig& b = sources[i];
      const std::string key = "source." + b.name + ".";
      if (lower(a.name) == lower(b.name)) {
        throw ConfigError("source." + b.name, fmt::format("differs from source {} only in case: the database compares "
                                                          "names without case, and both would share one state row",
                                                          a.name));
      }
      if (sameDatabase(a.dsn, b.dsn)) {
        const std::string ta = lower(a.outboxTable), tb = lower(b.outboxTable);
        if (ta == tb) {
          throw ConfigError(key + "outbox_table", fmt::format("'{}' is source {}'s outbox table too, in the same "
                                                              "database: two relays would version one table",
                                                              b.outboxTable, a.name));
        }
        if (tb == ta + "_versions" || ta == tb + "_versions") {
          throw ConfigError(key + "outbox_table", fmt::format("'{}' and source {}'s '{}': one is the other's "
                                                              "versions table",
                                                              b.outboxTable, a.name, a.outboxTable));
        }
      }
      if (subjectsOverlap(a.subjectPrefix, b.subjectPrefix)) {
        throw ConfigError(key + "subject_prefix", fmt::format("'{}' overlaps source {}'s '{}': their streams' subjects "
                                                              "({}.> and {}.>) would collide",
                                                              shownValue(b.subjectPrefix), a.name, shownValue(a.subjectPrefix),
                                                              shownValue(b.subjectPrefix), shownValue(a.subjectPrefix)));
      }
      if (!b.snapshotPath.empty() && a.snapshotPath == b.snapshotPath) {
        throw ConfigError(key + "snapshot_path",
                          fmt::format("'{}' is source {}'s snapshot_path too", shownValue(b.snapshotPath), a.name));
      }
      if (a.stream == b.stream) {
        throw ConfigError(key + "stream", fmt::format("stream '{}' is used by source {}", shownValue(b.stream), a.name));
      }
      if (!b.latestStream.empty() && (b.latestStream == a.stream || b.latestStream == a.latestStream)) {
        throw ConfigError(key + "latest_stream",
                          fmt::format("stream '{}' is used by source {}", shownValue(b.latestStream), a.name));
      }
      if (!a.latestStream.empty() && a.latestStream == b.stream) {
        throw ConfigError(key + "stream", fmt::format("stream '{}' is source {}'s latest_stream", shownValue(b.stream),
                                                      a.name));
      }
    }
  }
}

}  // namespace outbox::config_detail

// One [[source]] table: its keys, their defaults and the rules each value must follow on its own
// (the rules between sources are in sources_apart.cpp).
#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "config/section.h"
#include "config/subject_template.h"

namespace outbox::config_detail {

namespace {

// Why nats-server would refuse `name` for a stream (it becomes a subject token of the API and a
// directory name), or "".
std::string streamNameProblem(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name.size() > 255) return fmt::format("is {} characters long: at most 255", name.size());
  const bool plain = std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return c > 32 && c < 127 && c != '.' && c != '*' && c != '>' && c != '/' && c != '\\';
  });
  return plain ? "" : "is not a valid stream name: printable ASCII without spaces, '.', '*', '>', '/' or '\\'";
}

void checkStreamName(const std::string& key, const std::string& name) {
  if (std::string problem = streamNameProblem(name); !problem.empty()) {
    throw ConfigError(key, fmt::format("'{}' {}", shownValue(name), problem));
  }
}

bool isSubject(const std::string& subject) {
  if (subject.empty()) return false;
  size_t start = 0;
  while (true) {
    size_t dot = subject.find('.', start);
    std::string token = subject.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!isSubjectToken(token)) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

// The HTTP server's own routes, which an alias must not shadow.
std::string snapshotPathProblem(const std::string& path) {
  if (path.front() != '/') return "must start with '/'";
  if (path.size() > 1024) return "is longer than 1024 characters";
  const bool plain = std::all_of(path.begin(), path.end(), [](unsigned char c) {
    return c < 128 && (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~');
  });
  if (!plain) return "may hold only letters, digits and / - _ . ~";
  if (path.find("//") != std::string::npos || path.find("/./") != std::string::npos ||
      path.find("/../") != std::string::npos || path.ends_with("/.") || path.ends_with("/..")) {
    return "must not hold an empty, '.' or '..' segment";
  }
  for (const char* route : {"/", "/metrics", "/healthz", "/readyz", "/v1"}) {
    if (path == route) return fmt::format("would shadow the bridge's own route {}", route);
  }
  if (path.rfind("/v1/", 0) == 0) return "would shadow the bridge's own routes under /v1/";
  return "";
}

}  // namespace

SourceConfig parseSource(const toml::table& table, size_t index, const Environment& env,
                         std::set<std::string>& consulted) {
  SourceConfig s;
  // The name decides the environment prefix, so it is read from TOML first.
  std::set<std::string> none;  // the name is never taken from the environment
  Section nameOnly(&table, fmt::format("source[{}].", index), "\x01", env, none);
  auto name = nameOnly.str("name");
  if (!name) throw ConfigError(fmt::format("source[{}].name", index), "is required");
  if (!isSqlIdentifier(*name)) {
    throw ConfigError(fmt::format("source[{}].name", index),
                      fmt::format("'{}' must match ^[A-Za-z_][A-Za-z0-9_]{{0,63}}$", shownValue(*name)));
  }
  s.name = *name;
  Section sec(&table, fmt::format("source.{}.", s.name),
              "OUTBOX_BRIDGE_SOURCE_" + upper(s.name) + "_", env, consulted);
  sec.markRead("name");  // in the file only: OUTBOX_BRIDGE_SOURCE_<S>_NAME is no key

  auto dsn = sec.str("dsn");
  if (!dsn) throw ConfigError(sec.keyName("dsn"), "is required");
  s.dsn = Dsn::parse(sec.keyName("dsn"), *dsn);
  readDsnCredentials(sec, s.dsn);

  auto table_name = sec.str("outbox_table");
  s.outboxTable = table_name.value_or(s.name + "_control_outbox");
  // Its versions table, `<outbox_table>_versions`, must fit MySQL's 64-character identifiers.
  if (!isSqlIdentifier(s.outboxTable) || s.outboxTable.size() > kMaxOutboxTableLength) {
    throw ConfigError(sec.keyName("outbox_table"),
                      fmt::format("'{}' must match ^[A-Za-z_][A-Za-z0-9_]{{0,54}}$ (at most 55 characters: the "
                                  "bridge keeps a '<outbox_table>_versions' table beside it){}",
                                  shownValue(s.outboxTable),
                                  table_name ? "" : "; it defaults to '<name>_control_outbox': set outbox_table"));
  }
  s.snapshotQuery = sec.str("snapshot_query").value_or("");
  if (std::string problem = snapshotQueryProblem(s.snapshotQuery); !problem.empty()) {
    throw ConfigError(sec.keyName("snapshot_query"), problem);
  }
  s.stream = sec.str("stream").value_or("CONTROL_" + upper(s.name));
  checkStreamName(sec.keyName("stream"), s.stream);
  s.subjectPrefix = sec.str("subject_prefix").value_or("control." + s.name);
  if (!isSubject(s.subjectPrefix)) {
    throw ConfigError(sec.keyName("subject_prefix"), fmt::format("'{}' is not a valid subject without wildcards",
                                                                 shownValue(s.subjectPrefix)));
  }
  // nats-server keeps $JS, $JSC, $NRG and $SYS for itself (its API, clustering, system events).
  if (s.subjectPrefix.front() == '$') {
    throw ConfigError(sec.keyName("subject_prefix"), fmt::format("'{}': subjects starting with '$' belong to "
                                                                 "nats-server ($JS.API, $SYS, ...)",
                                                                 shownValue(s.subjectPrefix)));
  }
  subjectAndLatest(sec, s);
  if (auto v = sec.integer("batch_size")) s.batchSize = positiveInt(sec.keyName("batch_size"), *v, 100000);
  if (auto v = sec.duration("poll_interval")) {
    if (v->count() < 1 || *v > std::chrono::hours(1)) {
      throw ConfigError(sec.keyName("poll_interval"), "must be from 1ms to 1h");
    }
    s.pollInterval = *v;
  }
  if (auto v = sec.duration("summary_interval")) {
    if (v->count() != 0 && (*v < std::chrono::seconds(1) || *v > std::chrono::hours(24))) {
      throw ConfigError(sec.keyName("summary_interval"), fmt::format("{} must be 0 (a read per request) or from 1s to 24h",
                                                                     formatDuration(*v)));
    }
    s.summaryInterval = *v;
  }
  s.snapshotKey = sec.str("snapshot_key").value_or("");
  s.snapshotPath = sec.str("snapshot_path").value_or("");
  if (std::string problem = s.snapshotPath.empty() ? "" : snapshotPathProblem(s.snapshotPath); !problem.empty()) {
    throw ConfigError(sec.keyName("snapshot_path"), fmt::format("'{}' {}", shownValue(s.snapshotPath), problem));
  }
  if (auto v = sec.oneOf<OnPoison>("on_poison", {{"halt", OnPoison::kHalt}, {"quarantine", OnPoison::kQuarantine}})) {
    s.onPoison = *v;
  }
  if (auto v = sec.oneOf<Wake>("wake", {{"auto", Wake::kAuto}, {"binlog", Wake::kBinlog}, {"poll", Wake::kPoll}})) {
    s.wake = *v;
  }
  if (auto v = sec.integer("replicas")) s.replicas = positiveInt(sec.keyName("replicas"), *v, 5);
  streamLimits(sec, s);
  settleKeys(sec, s);
  sec.finish();
  return s;
}

// `subject` (a template under subject_prefix) and `latest_stream`, which keeps one message per
// subject: the subject must name the key, and not the op (a delete would not replace the upsert).
void subjectAndLatest(Section& sec, SourceConfig& s) {
  if (auto text = sec.str("subject")) {
    std::string problem;
    if (!SubjectTemplate::parse(*text, s.subjectPrefix, problem)) {
      throw ConfigError(sec.keyName("subject"), fmt::format("'{}' {}", shownValue(*text), problem));
    }
    s.subject = *text;
  }
  // A template whose every subject is too long would make every row poison (or, with on_poison =
  // "quarantine", set every row aside): refused here instead.
  const size_t shortest = SubjectTemplate::forSource(s.subject, s.subjectPrefix).shortestLength(s.name);
  if (shortest > kMaxSubjectBytes) {
    throw ConfigError(sec.keyName(s.subject.empty() ? "subject_prefix" : "subject"),
                      fmt::format("renders no subject shorter than {} bytes, over the {}-byte limit (every row would "
                                  "be poison)",
                                  shortest, kMaxSubjectBytes));
  }
  auto latest = sec.str("latest_stream");
  if (!latest) return;
  checkStreamName(sec.keyName("latest_stream"), *latest);
  if (*latest == s.stream) throw ConfigError(sec.keyName("latest_stream"), "must differ from the source's stream");
  const SubjectTemplate subject = SubjectTemplate::forSource(s.subject, s.subjectPrefix);
  if (!subject.uses("entity_key") || !subject.uses("entity_type") || subject.uses("op")) {
    throw ConfigError(sec.keyName("latest_stream"),
                      fmt::format("keeps the last message of each subject, so the subject must name the entity "
                                  "type and key, and not the op: set subject = \"{}.{{entity_type}}.{{entity_key}}\" "
                                  "(it is '{}')",
                                  shownValue(s.subjectPrefix), shownValue(subject.text())));
  }
  s.latestStream = *latest;
}

// nats-server's rules for a stream (server/stream.go, checkStreamCfg): max_age 0 (for ever) or at
// least 100ms; the duplicate window at least 100ms (ours: 1s) and, with a max_age, not above it.
// A duplicate window left unset follows a shorter max_age down, as nats-server's default does.
void streamLimits(Section& sec, SourceConfig& s) {
  auto window = sec.duration("duplicate_window");
  if (auto v = sec.duration("max_age")) s.maxAge = *v;
  if (s.maxAge.count() != 0 && s.maxAge < std::chrono::seconds(1)) {
    throw ConfigError(sec.keyName("max_age"), fmt::format("{} is too short: 0 (keep for ever) or at least 1s (nats-server "
                                                          "wants 100ms, and the duplicate_window, at least 1s, within it)",
                                                          formatDuration(s.maxAge)));
  }
  if (window) {
    if (window->count() < 1000) throw ConfigError(sec.keyName("duplicate_window"), "must be at least 1s");
    if (s.maxAge.count() != 0 && *window > s.maxAge) {
      throw ConfigError(sec.keyName("duplicate_window"),
                        fmt::format("{} is longer than max_age ({}): nats-server refuses such a stream",
                                    formatDuration(*window), formatDuration(s.maxAge)));
    }
    s.duplicateWindow = *window;
  } else if (s.maxAge.count() != 0) {
    s.duplicateWindow = std::min(s.duplicateWindow, s.maxAge);
  }
}

// The settled stream's keys. The other keys need `settle`: given without it they would do nothing,
// which is more likely a mistake than a wish. settle_max bounds what a new leader replays of the
// main stream (docs/design.md, "Recovery"), so a main stream that expires its messages must keep
// them well past it: at least twice settle_max.
void settleKeys(Section& sec, SourceConfig& s) {
  auto settle = sec.duration("settle");
  auto settleMax = sec.duration("settle_max");
  auto stream = sec.str("settled_stream");
  auto maxKeys = sec.integer("settle_max_keys");
  if (!settle) {
    const char* given = settleMax ? "settle_max" : stream ? "settled_stream" : maxKeys ? "settle_max_keys" : nullptr;
    if (given != nullptr) {
      throw ConfigError(sec.keyName(given), "is set without settle: set settle (the quiet window) to have a settled "
                                            "stream, or leave the key out");
    }
    return;
  }
  if (settle->count() < 1) throw ConfigError(sec.keyName("settle"), "must be at least 1ms (leave it out: no settled stream)");
  if (settleMax && settleMax->count() < 1) {
    throw ConfigError(sec.keyName("settle_max"), "must be at least settle: a key settles at the latest settle_max after "
                                                 "its first change (leave it out for its default)");
  }
  if (settleMax) s.settleMax = *settleMax;
  if (s.settleMax > std::chrono::hours(1)) {
    throw ConfigError(sec.keyName("settle_max"), fmt::format("{} is longer than 1h: a new leader replays up to "
                                                             "settle_max of the main stream",
                                                             formatDuration(s.settleMax)));
  }
  if (*settle > s.settleMax) {
    throw ConfigError(sec.keyName("settle"), fmt::format("{} is longer than settle_max ({}{}): a key would settle "
                                                         "before it had been quiet for settle",
                                                         formatDuration(*settle), formatDuration(s.settleMax),
                                                         settleMax ? "" : ", its default"));
  }
  if (s.maxAge.count() != 0 && s.settleMax * 2 > s.maxAge) {
    throw ConfigError(sec.keyName(settleMax ? "settle_max" : "settle"),
                      fmt::format("settle_max ({}) must be at most half of max_age ({}): a new leader rebuilds the "
                                  "pending keys from up to settle_max of the main stream, which must still hold it",
                                  formatDuration(s.settleMax), formatDuration(s.maxAge)));
  }
  s.settle = *settle;
  if (maxKeys) s.settleMaxKeys = positiveInt(sec.keyName("settle_max_keys"), *maxKeys, 10'000'000);
  s.settledStream = stream.value_or(s.stream + "_SETTLED");
  if (std::string problem = streamNameProblem(s.settledStream); !problem.empty()) {
    throw ConfigError(sec.keyName("settled_stream"),
                      fmt::format("'{}' {}{}", shownValue(s.settledStream), problem,
                                  stream ? "" : " (it defaults to '<stream>_SETTLED': set settled_stream)"));
  }
  if (s.settledStream == s.stream || s.settledStream == s.latestStream) {
    throw ConfigError(sec.keyName("settled_stream"),
                      fmt::format("'{}' is the source's {} too", shownValue(s.settledStream),
                                  s.settledStream == s.stream ? "stream" : "latest_stream"));
  }
}

}  // namespace outbox::config_detail

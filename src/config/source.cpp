// One [[source]] table: the declaration of its keys (config/keys.h), their defaults and the rules
// each value must follow on its own (the rules between sources are in sources_apart.cpp). A new
// key is one entry in sourceKeys(): the parser, check-config and the round-trip test follow it.
#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "config/keys.h"
#include "config/subject_template.h"

namespace outbox::config_detail {

namespace {

using S = SourceConfig;

Key<S> nameKey() {
  // Read before the section exists (it decides the environment prefix), from the file only:
  // OUTBOX_BRIDGE_SOURCE_<S>_NAME is no key.
  return {"name", [](Section& sec, S&) { sec.markRead("name"); },
          [](const S& s) { return keyLine("name", tomlString(s.name)); }, "\"account\"", sameMember(&S::name)};
}

Key<S> dsnKey() {
  auto read = [](Section& sec, S& s) {
    auto dsn = sec.str("dsn");
    if (!dsn) throw ConfigError(sec.keyName("dsn"), "is required");
    s.dsn = Dsn::parse(sec.keyName("dsn"), *dsn);
    checkDsnFiles(sec, s.dsn);
  };
  return {"dsn", read, writeDsn(&S::dsn), "\"mysql://bridge@db.internal:3307/app?ssl-mode=REQUIRED\"",
          sameDsn(&S::dsn)};
}

// Its versions table, `<outbox_table>_versions`, must fit MySQL's 64-character identifiers.
Key<S> outboxTableKey() {
  Key<S> key = textKey<S>("outbox_table", &S::outboxTable, "\"acct_outbox\"");
  key.read = [](Section& sec, S& s) {
    auto table_name = sec.str("outbox_table");
    s.outboxTable = table_name.value_or(s.name + "_control_outbox");
    if (!isSqlIdentifier(s.outboxTable) || s.outboxTable.size() > kMaxOutboxTableLength) {
      throw ConfigError(sec.keyName("outbox_table"),
                        fmt::format("'{}' must match ^[A-Za-z_][A-Za-z0-9_]{{0,54}}$ (at most 55 characters: the "
                                    "bridge keeps a '<outbox_table>_versions' table beside it){}",
                                    shownValue(s.outboxTable),
                                    table_name ? "" : "; it defaults to '<name>_control_outbox': set outbox_table"));
    }
  };
  return key;
}

void checkSubjectPrefix(const std::string& key, const std::string& prefix, const S&) {
  if (!isSubject(prefix)) {
    throw ConfigError(key, fmt::format("'{}' is not a valid subject without wildcards", shownValue(prefix)));
  }
  // nats-server keeps $JS, $JSC, $NRG and $SYS for itself (its API, clustering, system events).
  if (prefix.front() == '$') {
    throw ConfigError(key, fmt::format("'{}': subjects starting with '$' belong to nats-server ($JS.API, $SYS, ...)",
                                       shownValue(prefix)));
  }
}

// `subject`, a template under subject_prefix. One whose every subject is too long would make every
// row poison (or, with on_poison = "quarantine", set every row aside): refused here instead.
Key<S> subjectKey() {
  auto read = [](Section& sec, S& s) {
    if (auto text = sec.str("subject")) {
      std::string problem;
      if (!SubjectTemplate::parse(*text, s.subjectPrefix, problem)) {
        throw ConfigError(sec.keyName("subject"), fmt::format("'{}' {}", shownValue(*text), problem));
      }
      s.subject = *text;
    }
    const size_t shortest = SubjectTemplate::forSource(s.subject, s.subjectPrefix).shortestLength(s.name);
    if (shortest > kMaxSubjectBytes) {
      throw ConfigError(sec.keyName(s.subject.empty() ? "subject_prefix" : "subject"),
                        fmt::format("renders no subject shorter than {} bytes, over the {}-byte limit (every row "
                                    "would be poison)",
                                    shortest, kMaxSubjectBytes));
    }
  };
  // Written out even when left to its default, which the output then shows.
  auto text = [](const S& s) { return SubjectTemplate::forSource(s.subject, s.subjectPrefix).text(); };
  return {"subject", read, [text](const S& s) { return keyLine("subject", tomlString(text(s))); },
          "\"ctl.acct.{entity_type}.{entity_key}\"", [text](const S& a, const S& b) { return text(a) == text(b); }};
}

// `latest_stream` keeps one message per subject: the subject must name the key, and not the op (a
// delete would not replace the upsert).
Key<S> latestStreamKey() {
  auto read = [](Section& sec, S& s) {
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
  };
  auto write = [](const S& s) {
    return s.latestStream.empty() ? "" : keyLine("latest_stream", tomlString(s.latestStream));
  };
  return {"latest_stream", read, write, "\"ACCT_LATEST\"", sameMember(&S::latestStream)};
}

// nats-server's rules for a stream (server/stream.go, checkStreamCfg): max_age 0 (for ever) or at
// least 100ms; the duplicate window at least 100ms (ours: 1s) and, with a max_age, not above it.
void checkMaxAge(const std::string& key, Duration maxAge, const S&) {
  if (maxAge.count() != 0 && maxAge < std::chrono::seconds(1)) {
    throw ConfigError(key, fmt::format("{} is too short: 0 (keep for ever) or at least 1s (nats-server wants 100ms, "
                                       "and the duplicate_window, at least 1s, within it)",
                                       formatDuration(maxAge)));
  }
}

// A duplicate window left unset follows a shorter max_age down, as nats-server's default does.
Key<S> duplicateWindowKey() {
  Key<S> key = durationKey<S>("duplicate_window", &S::duplicateWindow, "\"30s\"");
  key.read = [](Section& sec, S& s) {
    auto window = sec.duration("duplicate_window");
    if (!window) {
      if (s.maxAge.count() != 0) s.duplicateWindow = std::min(s.duplicateWindow, s.maxAge);
      return;
    }
    if (window->count() < 1000) throw ConfigError(sec.keyName("duplicate_window"), "must be at least 1s");
    if (s.maxAge.count() != 0 && *window > s.maxAge) {
      throw ConfigError(sec.keyName("duplicate_window"),
                        fmt::format("{} is longer than max_age ({}): nats-server refuses such a stream",
                                    formatDuration(*window), formatDuration(s.maxAge)));
    }
    s.duplicateWindow = *window;
  };
  return key;
}

// The settled stream's keys, read together by settle's: the other keys need `settle`: given without
// it they would do nothing, which is more likely a mistake than a wish. settle_max bounds what a
// new leader replays of the main stream (docs/design.md, "Recovery"), so a main stream that expires
// its messages must keep them well past it: at least twice settle_max.
void readSettleKeys(Section& sec, S& s) {
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
  if (settle->count() < 1) {
    throw ConfigError(sec.keyName("settle"), "must be at least 1ms (leave it out: no settled stream)");
  }
  if (settleMax && settleMax->count() < 1) {
    throw ConfigError(sec.keyName("settle_max"),
                      "must be at least settle: a key settles at the latest settle_max after "
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

// A key of the settle group: read by settle's hook, written only when settling (a settled stream's
// keys without settle are refused, so the output would not parse back).
Key<S> settling(Key<S> key, std::function<void(Section&, S&)> read = {}) {
  key.read = std::move(read);
  auto write = key.write;
  const bool first = key.name == "settle";
  key.write = [write, first](const S& s) {
    if (s.settles()) return write(s);
    return std::string(first ? "# settle is not set: no settled stream\n" : "");
  };
  return key;
}

}  // namespace

const std::vector<Key<SourceConfig>>& sourceKeys() {
  static const std::vector<Key<S>> keys{
      nameKey(),
      dsnKey(),
      dsnPasswordKey<S>(&S::dsn, "\"pw-example-1\""),
      outboxTableKey(),
      textKey<S>("snapshot_query", &S::snapshotQuery, "\"SELECT id, name FROM accounts\"",
                 [](const std::string& key, const std::string& query, const S&) {
                   if (std::string problem = snapshotQueryProblem(query); !problem.empty()) {
                     throw ConfigError(key, problem);
                   }
                 }),
      textKey<S>(
          "stream", &S::stream, "\"ACCT\"",
          [](const std::string& key, const std::string& v, const S&) { checkStreamName(key, v); },
          [](const S& s) { return "CONTROL_" + upper(s.name); }),
      textKey<S>("subject_prefix", &S::subjectPrefix, "\"ctl.acct\"", checkSubjectPrefix,
                 [](const S& s) { return "control." + s.name; }),
      subjectKey(),
      latestStreamKey(),
      countKey<S>("batch_size", &S::batchSize, 100000, "50"),
      durationKey<S>("poll_interval", &S::pollInterval, "\"90s\"", [](const std::string& key, Duration v, const S&) {
        if (v.count() < 1 || v > std::chrono::hours(1)) throw ConfigError(key, "must be from 1ms to 1h");
      }),
      durationKey<S>("summary_interval", &S::summaryInterval, "\"5m\"",
                     [](const std::string& key, Duration v, const S&) {
                       if (v.count() != 0 && (v < std::chrono::seconds(1) || v > std::chrono::hours(24))) {
                         throw ConfigError(key, fmt::format("{} must be 0 (a read per request) or from 1s to 24h",
                                                            formatDuration(v)));
                       }
                     }),
      textKey<S>("snapshot_key", &S::snapshotKey, "\"id\""),
      textKey<S>("snapshot_path", &S::snapshotPath, "\"/account/control-snapshot\"",
                 [](const std::string& key, const std::string& path, const S&) {
                   if (std::string problem = path.empty() ? "" : snapshotPathProblem(path); !problem.empty()) {
                     throw ConfigError(key, fmt::format("'{}' {}", shownValue(path), problem));
                   }
                 }),
      choiceKey<S, OnPoison>("on_poison", &S::onPoison,
                             {{"halt", OnPoison::kHalt}, {"quarantine", OnPoison::kQuarantine}}, "\"quarantine\""),
      choiceKey<S, Wake>("wake", &S::wake, {{"auto", Wake::kAuto}, {"binlog", Wake::kBinlog}, {"poll", Wake::kPoll}},
                         "\"binlog\""),
      countKey<S>("replicas", &S::replicas, 5, "3"),
      durationKey<S>("max_age", &S::maxAge, "\"7d\"", checkMaxAge),
      duplicateWindowKey(),
      settling(durationKey<S>("settle", &S::settle, "\"1500ms\""), readSettleKeys),
      settling(durationKey<S>("settle_max", &S::settleMax, "\"1m\"")),
      settling(textKey<S>("settled_stream", &S::settledStream, "\"ACCT_QUIET\"")),
      settling(countKey<S>("settle_max_keys", &S::settleMaxKeys, 10'000'000, "5000")),
  };
  return keys;
}

SourceConfig parseSource(const toml::table& table, size_t index, const Environment& env,
                         std::set<std::string>& consulted) {
  SourceConfig s;
  s.name = tableName(table, "source", index, env, "is required");
  Section sec(&table, fmt::format("source.{}.", s.name), "OUTBOX_BRIDGE_SOURCE_" + upper(s.name) + "_", env, consulted);
  readKeys(sec, sourceKeys(), s);
  return s;
}

}  // namespace outbox::config_detail

#pragma once

// One declaration per config key (issue 37): a table's keys in one list that the parser reads (each
// with its environment override and its checks), check-config renders and the round-trip test walks
// (tests/unit/config_roundtrip_test.cpp). Internal to src/config and its tests.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "config/config.h"
#include "config/section.h"

namespace outbox::config_detail {

// A TOML basic string: quotes, backslashes and control characters escaped, so that no value can
// end its line early or forge another (a newline in a value, a multi-line snapshot_query).
std::string tomlString(const std::string& s);
// A set secret as asterisks, as many as the shortest admin_token takes, so the output parses back.
std::string maskedSecret(const std::string& secret);

// One key of a table whose values land in a `T` (SourceConfig, DoorbellConfig).
template <typename T>
struct Key {
  std::string name;
  // Reads the key (from the file or its environment variable), checks it and stores it in the
  // target. Keys are read in the list's order, so a rule between two keys sits with the later one.
  // Empty when another key's hook reads it (the settle group) or the parser did before (name).
  std::function<void(Section&, T&)> read;
  // The key's line for check-config ("name = value\n"), a comment when it is off, or "" when
  // another key's line carries the value (a source's password, masked inside its dsn).
  std::function<std::string(const T&)> write;
  // A valid value that is not the default, as TOML, fitting the other keys' examples: the
  // round-trip test sets every key to it at once.
  std::string example;
  // Whether `a` and `b` hold the same value for the key as check-config's output, parsed back,
  // holds it (a secret: both set or both unset).
  std::function<bool(const T&, const T&)> same;
  // TOML lines the example needs beside it when set alone (a [nats] password needs its user).
  std::string needs;
};

// The [[source]] keys (source.cpp), the [[doorbell]] keys (doorbell.cpp) and those of the other
// tables (settings.cpp), each list in the order its keys are read.
const std::vector<Key<SourceConfig>>& sourceKeys();
const std::vector<Key<DoorbellConfig>>& doorbellKeys();
const std::vector<Key<NatsConfig>>& natsKeys();
const std::vector<Key<HttpConfig>>& httpKeys();
const std::vector<Key<LeaseConfig>>& leaseKeys();
const std::vector<Key<DatabaseConfig>>& databaseKeys();
const std::vector<Key<Config>>& logKeys();  // [log]'s keys are Config's own

// Reads every key of `keys` from `sec` into `target`, then rejects the keys it does not know.
template <typename T>
void readKeys(Section& sec, const std::vector<Key<T>>& keys, T& target) {
  for (const auto& key : keys) {
    if (key.read) key.read(sec, target);
  }
  sec.finish();
}

// The lines of every key of `keys` for `target`.
template <typename T>
std::string writeKeys(const std::vector<Key<T>>& keys, const T& target) {
  std::string out;
  for (const auto& key : keys) out += key.write(target);
  return out;
}

// Builders for the common kinds of key. A `Check` throws a ConfigError naming `key` when a value
// may not be; it sees the target as read so far.
template <typename T, typename V>
using Check = std::function<void(const std::string& key, const V& value, const T& target)>;

inline std::string keyLine(const std::string& name, const std::string& tomlValue) {
  return fmt::format("{} = {}\n", name, tomlValue);
}

template <typename T, typename V>
std::function<bool(const T&, const T&)> sameMember(V T::*member) {
  return [member](const T& a, const T& b) { return a.*member == b.*member; };
}

// A string. Absent, it is `fallback(target)` when there is one, else the member's default; `check`
// sees a given value and a fallback, not the member's default.
template <typename T>
Key<T> textKey(std::string name, std::string T::*member, std::string example, Check<T, std::string> check = {},
               std::function<std::string(const T&)> fallback = {}) {
  auto read = [name, member, check, fallback](Section& sec, T& t) {
    std::optional<std::string> v = sec.str(name);
    if (!v && fallback) v = fallback(t);
    if (!v) return;
    if (check) check(sec.keyName(name), *v, t);
    t.*member = *v;
  };
  auto write = [name, member](const T& t) { return keyLine(name, tomlString(t.*member)); };
  return {name, read, write, std::move(example), sameMember(member)};
}

// `key` written as a comment while the string `member` is empty (a key that must not be empty when given).
template <typename T>
Key<T> commentedWhenEmpty(Key<T> key, std::string T::*member) {
  key.write = [write = key.write, name = key.name, member](const T& t) {
    return (t.*member).empty() ? fmt::format("# {} is not set\n", name) : write(t);
  };
  return key;
}

// `key`, whose example needs `needs` beside it.
template <typename T>
Key<T> needing(std::string needs, Key<T> key) {
  key.needs = std::move(needs);
  return key;
}

// A path to a readable file (Section::path); a comment while unset.
template <typename T>
Key<T> pathKey(std::string name, std::string T::*member, std::string example) {
  Key<T> key = commentedWhenEmpty(textKey<T>(name, member, std::move(example)), member);
  key.read = [name, member](Section& sec, T& t) {
    if (auto v = sec.path(name)) t.*member = *v;
  };
  return key;
}

// A secret (Section::secret: inline, `<name>_file` or the environment), written masked.
template <typename T>
Key<T> secretKey(std::string name, std::string T::*member, std::string example, Check<T, std::string> check = {}) {
  auto read = [name, member, check](Section& sec, T& t) {
    if (auto v = sec.secret(name)) {
      if (check) check(sec.keyName(name), *v, t);
      t.*member = *v;
    }
  };
  auto write = [name, member](const T& t) { return keyLine(name, maskedSecret(t.*member)); };
  auto same = [member](const T& a, const T& b) { return (a.*member).empty() == (b.*member).empty(); };
  return {name, read, write, std::move(example), same};
}

// An integer from 1 to `max`.
template <typename T>
Key<T> countKey(std::string name, int T::*member, int64_t max, std::string example) {
  auto read = [name, member, max](Section& sec, T& t) {
    if (auto v = sec.integer(name)) t.*member = positiveInt(sec.keyName(name), *v, max);
  };
  auto write = [name, member](const T& t) { return keyLine(name, std::to_string(t.*member)); };
  return {name, read, write, std::move(example), sameMember(member)};
}

inline std::string durationValue(Duration d) { return tomlString(formatDuration(d)); }

// A duration; `check` sees it only when given.
template <typename T>
Key<T> durationKey(std::string name, Duration T::*member, std::string example, Check<T, Duration> check = {}) {
  auto read = [name, member, check](Section& sec, T& t) {
    if (auto v = sec.duration(name)) {
      if (check) check(sec.keyName(name), *v, t);
      t.*member = *v;
    }
  };
  auto write = [name, member](const T& t) { return keyLine(name, durationValue(t.*member)); };
  return {name, read, write, std::move(example), sameMember(member)};
}

// One of named values.
template <typename T, typename E>
Key<T> choiceKey(std::string name, E T::*member, std::vector<std::pair<std::string_view, E>> choices,
                 std::string example) {
  auto read = [name, member, choices](Section& sec, T& t) {
    if (auto v = sec.oneOf<E>(name, choices)) t.*member = *v;
  };
  auto write = [name, member, choices](const T& t) {
    for (const auto& [text, value] : choices) {
      if (value == t.*member) return keyLine(name, tomlString(std::string(text)));
    }
    return keyLine(name, "\"?\"");
  };
  return {name, read, write, std::move(example), sameMember(member)};
}

// What stands beside a DSN (a [[source]]'s or a [[doorbell]]'s "dsn" key): no inline password that
// looks like a reference to one, its TLS files readable (section.cpp).
void checkDsnFiles(Section& sec, const Dsn& dsn);

// `password` or `password_file` over the password of the DSN `member`: no line of its own, the
// dsn's carries it masked.
template <typename T>
Key<T> dsnPasswordKey(Dsn T::*member, std::string example) {
  auto read = [member](Section& sec, T& t) {
    if (auto password = sec.secret("password")) (t.*member).password = *password;
  };
  auto same = [member](const T& a, const T& b) { return (a.*member).password.empty() == (b.*member).password.empty(); };
  return {"password", read, [](const T&) { return std::string(); }, std::move(example), same};
}

// A DSN's line: masked.
template <typename T>
std::function<std::string(const T&)> writeDsn(Dsn T::*member) {
  return [member](const T& t) { return keyLine("dsn", tomlString((t.*member).masked())); };
}
template <typename T>
std::function<bool(const T&, const T&)> sameDsn(Dsn T::*member) {
  return [member](const T& a, const T& b) { return (a.*member).masked() == (b.*member).masked(); };
}

}  // namespace outbox::config_detail

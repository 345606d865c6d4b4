// Config values: integers, durations, names of enumerations, identifier and subject rules (the
// MySQL DSN: dsn.cpp).
#include <algorithm>
#include <cctype>
#include <charconv>
#include <string_view>

#include <fmt/format.h>

#include "common/utf8.h"
#include "config/config.h"

namespace outbox {

std::string shownValue(const std::string& value) {
  constexpr size_t kShown = 100;
  std::string out;
  size_t i = 0;
  while (i < value.size() && i < kShown) {
    const auto c = static_cast<unsigned char>(value[i]);
    const size_t length = utf8SequenceAt(value, i);
    if (c < 32 || c == 127 || length == 0) {
      out += fmt::format("\\x{:02x}", c);  // a control character, or a byte that is no UTF-8
      ++i;
      continue;
    }
    // C1 controls (U+0080-U+009F: some terminals take U+009B as CSI) and the bidirectional
    // overrides and isolates (U+202A-U+202E, U+2066-U+2069: text shown in another order).
    const std::string_view sequence(value.data() + i, length);
    const bool c1 = length == 2 && c == 0xC2 && static_cast<unsigned char>(value[i + 1]) < 0xA0;
    const bool bidi = (sequence >= "\u202A" && sequence <= "\u202E") || (sequence >= "\u2066" && sequence <= "\u2069");
    if (c1 || bidi) {
      for (unsigned char b : sequence) out += fmt::format("\\x{:02x}", b);
    } else {
      out += sequence;
    }
    i += length;
  }
  if (i < value.size()) out += fmt::format("... ({} bytes)", value.size());
  return out;
}

std::string printableProblem(const std::string& text) {
  for (unsigned char c : text) {
    if (c < 32 || c == 127) return "holds a control character";
  }
  if (!text.empty() && (text.front() == ' ' || text.back() == ' ')) return "has a blank at an end";
  return "";
}

int64_t parseInteger(const std::string& key, const std::string& text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) {
    throw ConfigError(key, fmt::format("'{}' is out of range", shownValue(text)));
  }
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw ConfigError(key, fmt::format("expected an integer, got '{}'", shownValue(text)));
  }
  return value;
}

// A loop, not a regular expression: std::regex recurses once per character, and ~50,000 digits
// overflowed the stack. Every sum and product is checked: a duration that does not fit is an
// error, never a wrapped value.
Duration parseDuration(const std::string& key, const std::string& text) {
  if (text == "0") return Duration(0);
  if (text.empty()) throw ConfigError(key, "empty duration");
  auto notADuration = [&] {
    return ConfigError(key, fmt::format("'{}' is not a duration (use e.g. 250ms, 30s, 2m, 1h)", shownValue(text)));
  };
  auto outOfRange = [&] {
    return ConfigError(key, fmt::format("'{}' is out of range (at most {}d)", shownValue(text),
                                        kMaxDuration.count() / 86'400'000));
  };
  int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    const size_t digits = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    const size_t unitStart = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    if (digits == unitStart || unitStart == i) throw notADuration();
    const std::string_view unit(text.data() + unitStart, i - unitStart);
    const int64_t scale = unit == "ms" ? 1
                          : unit == "s" ? 1000
                          : unit == "m" ? 60'000
                          : unit == "h" ? 3'600'000
                          : unit == "d" ? 86'400'000
                                        : 0;
    if (scale == 0) throw notADuration();
    int64_t n = 0;
    auto [end, ec] = std::from_chars(text.data() + digits, text.data() + unitStart, n);
    if (ec != std::errc() || end != text.data() + unitStart) throw outOfRange();
    int64_t part = 0;
    if (__builtin_mul_overflow(n, scale, &part) || __builtin_add_overflow(total, part, &total) ||
        total > kMaxDuration.count()) {
      throw outOfRange();
    }
  }
  return Duration(total);
}

std::string formatDuration(Duration d) {
  int64_t ms = d.count();
  if (ms == 0) return "0";
  if (ms % 3'600'000 == 0) return fmt::format("{}h", ms / 3'600'000);
  if (ms % 60'000 == 0) return fmt::format("{}m", ms / 60'000);
  if (ms % 1000 == 0) return fmt::format("{}s", ms / 1000);
  return fmt::format("{}ms", ms);
}

const char* wakeName(Wake wake) {
  switch (wake) {
    case Wake::kAuto: return "auto";
    case Wake::kBinlog: return "binlog";
    case Wake::kPoll: return "poll";
  }
  return "?";
}

bool isSqlIdentifier(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  auto c0 = static_cast<unsigned char>(name[0]);
  if (!(std::isalpha(c0) || c0 == '_') || c0 > 127) return false;
  return std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return c < 128 && (std::isalnum(c) || c == '_');
  });
}

bool isSubjectToken(const std::string& token) {
  if (token.empty()) return false;
  return std::all_of(token.begin(), token.end(), [](unsigned char c) {
    return c > 32 && c != 127 && c != '.' && c != '*' && c != '>';
  });
}

}  // namespace outbox

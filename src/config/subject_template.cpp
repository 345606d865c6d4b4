#include "config/subject_template.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include <fmt/format.h>

#include "config/config.h"

namespace outbox {

namespace {

constexpr uint32_t kMaxPartitions = 1024;

bool mustEscape(unsigned char c) { return c <= 0x20 || c == 0x7f || c == '.' || c == '*' || c == '>' || c == '%'; }

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;  // lower case is not what escapeSubjectToken writes: one spelling per key
}

}  // namespace

std::string escapeSubjectToken(std::string_view key) {
  if (key.empty()) return "%";
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(key.size());
  for (char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if (mustEscape(c)) {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += ch;
    }
  }
  return out;
}

std::optional<std::string> unescapeSubjectToken(std::string_view token) {
  if (token == "%") return std::string();
  if (token.empty()) return std::nullopt;
  std::string out;
  out.reserve(token.size());
  for (size_t i = 0; i < token.size(); ++i) {
    const auto c = static_cast<unsigned char>(token[i]);
    if (c != '%') {
      if (mustEscape(c)) return std::nullopt;
      out += token[i];
      continue;
    }
    if (i + 2 >= token.size()) return std::nullopt;
    const int high = hexValue(token[i + 1]);
    const int low = hexValue(token[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    const auto byte = static_cast<unsigned char>(high * 16 + low);
    if (!mustEscape(byte)) return std::nullopt;  // escapeSubjectToken leaves such a byte as it is
    out += static_cast<char>(byte);
    i += 2;
  }
  return out;
}

uint32_t fnv1a32(std::string_view bytes) {
  uint32_t h = 2166136261u;
  for (char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h;
}

uint32_t keyPartition(std::string_view key, uint32_t partitions) { return fnv1a32(key) % partitions; }

SubjectTemplate SubjectTemplate::byEntityType(const std::string& prefix) {
  SubjectTemplate t;
  t.text_ = prefix + ".{entity_type}";
  t.parts_ = {Part{Kind::kLiteral, prefix + "."}, Part{Kind::kEntityType}};
  return t;
}

SubjectTemplate SubjectTemplate::forSource(const std::string& subject, const std::string& prefix) {
  std::string problem;
  if (subject.empty()) return byEntityType(prefix);
  auto parsed = parse(subject, prefix, problem);
  return parsed ? *parsed : byEntityType(prefix);
}

std::optional<SubjectTemplate> SubjectTemplate::parse(const std::string& text, const std::string& prefix,
                                                      std::string& problem) {
  SubjectTemplate t;
  t.text_ = text;
  if (text.rfind(prefix + ".", 0) != 0) {
    problem = fmt::format("must start with the source's subject_prefix and a dot ('{}.'), so that every subject is "
                          "in the stream's '{}.>'",
                          shownValue(prefix), shownValue(prefix));
    return std::nullopt;
  }
  // The prefix is literal text (checked as a subject at load, and it may hold a brace).
  bool tokenEmpty = false;  // nothing yet in the dot-separated token being read
  int tokenVariables = 0;   // {entity_type}, {entity_key} and {partition:N} in that token
  auto endToken = [&] {
    if (tokenEmpty) {
      problem = "has an empty token (two dots in a row, or a dot at an end)";
      return false;
    }
    tokenEmpty = true;
    tokenVariables = 0;
    return true;
  };
  std::string literal = prefix;
  auto flush = [&] {
    if (!literal.empty()) t.parts_.push_back(Part{Kind::kLiteral, literal});
    literal.clear();
  };
  for (size_t i = prefix.size(); i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '{') {
      const size_t close = text.find('}', i);
      if (close == std::string::npos) {
        problem = fmt::format("has a '{{' at byte {} with no '}}' after it", i);
        return std::nullopt;
      }
      const std::string name = text.substr(i + 1, close - i - 1);
      Part part{Kind::kLiteral};
      if (auto kind = kindNamed(name)) {
        part.kind = *kind;
      } else if (name.rfind("partition:", 0) == 0) {
        const std::string digits = name.substr(10);
        uint32_t n = 0;
        auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
        if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || n < 1 ||
            n > kMaxPartitions) {
          problem =
              fmt::format("{{{}}}: the number of partitions must be from 1 to {}", shownValue(name), kMaxPartitions);
          return std::nullopt;
        }
        part.kind = Kind::kPartition;
        part.partitions = n;
      } else {
        problem = fmt::format("{{{}}} is no placeholder (there are {{entity_type}}, {{entity_key}}, {{op}}, {{source}} "
                              "and {{partition:N}})",
                              shownValue(name));
        return std::nullopt;
      }
      // Two values of any length side by side could be read apart more than one way: the
      // type "ab" with key "c" and the type "a" with key "bc" would share a subject.
      if (part.kind == Kind::kEntityType || part.kind == Kind::kEntityKey || part.kind == Kind::kPartition) {
        if (++tokenVariables > 1) {
          problem = "puts two of {entity_type}, {entity_key} and {partition:N} in one token: two rows could share a "
                    "subject (separate them with a dot)";
          return std::nullopt;
        }
      }
      flush();
      t.parts_.push_back(part);
      tokenEmpty = false;
      i = close;
    } else if (c == '}') {
      problem = fmt::format("has a '}}' at byte {} that closes no placeholder", i);
      return std::nullopt;
    } else if (c == '.') {
      if (!endToken()) return std::nullopt;
      literal += '.';
    } else if (c <= 0x20 || c == 0x7f || c == '*' || c == '>') {
      problem = "may not hold spaces, control characters or the wildcards '*' and '>'";
      return std::nullopt;
    } else {
      tokenEmpty = false;
      literal += text[i];
    }
  }
  if (!endToken()) return std::nullopt;
  flush();
  return t;
}

std::string SubjectTemplate::render(const SubjectFields& fields) const {
  std::string out;
  out.reserve(64);
  for (const Part& part : parts_) {
    switch (part.kind) {
      case Kind::kLiteral:
        out += part.literal;
        break;
      case Kind::kEntityType:
        out += fields.entityType;
        break;
      case Kind::kEntityKey:
        out += escapeSubjectToken(fields.entityKey);
        break;
      case Kind::kOp:
        out += fields.op;
        break;
      case Kind::kSource:
        out += fields.source;
        break;
      case Kind::kPartition:
        out += std::to_string(keyPartition(fields.entityKey, part.partitions));
        break;
    }
  }
  return out;
}

std::optional<SubjectTemplate::Kind> SubjectTemplate::kindNamed(std::string_view name) {
  static constexpr std::pair<std::string_view, Kind> kNamed[] = {{"entity_type", Kind::kEntityType},
                                                                 {"entity_key", Kind::kEntityKey},
                                                                 {"op", Kind::kOp},
                                                                 {"source", Kind::kSource}};
  for (const auto& [named, kind] : kNamed) {
    if (named == name) return kind;
  }
  return std::nullopt;
}

size_t SubjectTemplate::shortestLength(std::string_view source) const {
  size_t length = 0;
  for (const Part& part : parts_) {
    switch (part.kind) {
      case Kind::kLiteral: length += part.literal.size(); break;
      case Kind::kEntityType: length += 1; break;  // a token of one character at least
      case Kind::kEntityKey: length += 1; break;   // "%" for the empty key
      case Kind::kOp: length += 6; break;          // "upsert" or "delete"
      case Kind::kSource: length += source.size(); break;
      case Kind::kPartition: length += 1; break;
    }
  }
  return length;
}

bool SubjectTemplate::uses(std::string_view placeholder) const {
  const std::optional<Kind> kind = placeholder == "partition" ? Kind::kPartition : kindNamed(placeholder);
  return kind && std::any_of(parts_.begin(), parts_.end(), [&](const Part& part) { return part.kind == *kind; });
}

}  // namespace outbox

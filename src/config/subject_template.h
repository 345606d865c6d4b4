#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace outbox {

// A message's subject from its row (docs/design.md, "The message shaped by its row"): the source's `subject` template,
// e.g. "control.account.{entity_type}.{entity_key}", with the placeholders {entity_type},
// {entity_key}, {op}, {source} and {partition:N}. Literal text between them is made of subject
// token characters and dots; every subject it renders is under `<subject_prefix>.>`. A token
// holds at most one of {entity_type}, {entity_key} and {partition:N}, so no two rows' fields
// render to one subject.

// A rendered subject longer than this is refused (the row is poison): nats-server's default
// max_control_line is 4,096 bytes, and the publish line also carries a reply subject and sizes.
inline constexpr size_t kMaxSubjectBytes = 3072;

// The one escaping of an entity key into a subject token, reversible by unescapeSubjectToken:
// each byte that a token cannot hold or that would change its meaning — control characters and
// space (0x00-0x20), DEL (0x7f), '.', '*', '>' — and '%' itself becomes '%' and two upper-case
// hex digits; every other byte (UTF-8 included) stays as it is. The empty key becomes "%" alone,
// which no escaped key can be. So "a.b" -> "a%2Eb", "50%" -> "50%25", "" -> "%".
std::string escapeSubjectToken(std::string_view key);
// The key escapeSubjectToken made `token` from; nullopt when no key escapes to `token` (a '%' not
// followed by two hex digits, other than the lone "%", or a byte that should have been escaped).
std::optional<std::string> unescapeSubjectToken(std::string_view token);

// {partition:N}: FNV-1a, 32 bits, over the key's bytes (as stored, not escaped), mod `partitions`.
// FNV-1a: h = 2166136261; for each byte b: h = (h XOR b) * 16777619 (mod 2^32). nats-server's
// partition() subject mapping uses the same hash over the subject's tokens, which are the escaped
// key: the two agree only for keys that need no escaping.
uint32_t fnv1a32(std::string_view bytes);
uint32_t keyPartition(std::string_view key, uint32_t partitions);

// The fields of a row a subject may be made of.
struct SubjectFields {
  std::string_view source;
  std::string_view entityType;
  std::string_view entityKey;
  std::string_view op;
};

class SubjectTemplate {
 public:
  // The default of a source: `<prefix>.{entity_type}`.
  static SubjectTemplate byEntityType(const std::string& prefix);
  // A source's template: `subject` as the config holds it (checked at load), or the default when
  // it is empty.
  static SubjectTemplate forSource(const std::string& subject, const std::string& prefix);
  // Parses `text`; the reason it is not a template under `prefix` otherwise, as config errors
  // say it (e.g. "{entity_id} is no placeholder (...)").
  static std::optional<SubjectTemplate> parse(const std::string& text, const std::string& prefix,
                                              std::string& problem);

  std::string render(const SubjectFields& fields) const;
  bool uses(std::string_view placeholder) const;
  // The length of the shortest subject it can render for source `source`: longer than
  // kMaxSubjectBytes, and every row would be poison.
  size_t shortestLength(std::string_view source) const;  // "entity_key", "op", "partition", ...
  const std::string& text() const { return text_; }

 private:
  enum class Kind { kLiteral, kEntityType, kEntityKey, kOp, kSource, kPartition };
  struct Part {
    Kind kind;
    std::string literal;      // kLiteral
    uint32_t partitions = 0;  // kPartition
  };
  // The placeholder named `name` ("entity_type", ...), but for {partition:N}, which has a number.
  static std::optional<Kind> kindNamed(std::string_view name);
  std::string text_;
  std::vector<Part> parts_;
};

}  // namespace outbox

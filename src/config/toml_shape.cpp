// The shape of the config text, checked before toml++ parses it. toml++ recurses once per level of
// a dotted key or table header (`a.t.t.t... = 1`), and bounds only arrays and inline tables: an
// 80 KB file 40,000 levels deep overflowed the stack. The config's own keys are at most three
// levels deep (`[[source]]`, `name`), so anything far deeper is refused before it is parsed.
//
// Not a TOML parser: a scanner that knows strings (basic, literal, multi-line) and comments, so
// that dots and brackets inside them count for nothing. One pass, linear in the text.
#include <string_view>

#include <fmt/format.h>

#include "config/section.h"

namespace outbox::config_detail {

namespace {

// Far beyond any key of the config (3 levels) or any value it takes (no nested arrays).
constexpr int kMaxKeyParts = 16;
constexpr int kMaxBrackets = 32;

bool isBareKeyChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

class ShapeScanner {
 public:
  ShapeScanner(std::string_view text, const std::string& origin) : text_(text), origin_(origin) {}

  void run() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\n') {
        ++line_;
        ++pos_;
        endChain();
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;  // whitespace may stand around the dots of one key
      } else if (c == '#') {
        skipComment();
        endChain();
      } else if (c == '.') {
        ++pos_;
        afterDot_ = true;
      } else if (c == '"' || c == '\'') {
        const size_t start = pos_;
        skipString(c);
        part(start);
      } else if (isBareKeyChar(c)) {
        const size_t start = pos_;
        while (pos_ < text_.size() && isBareKeyChar(text_[pos_])) ++pos_;
        part(start);
      } else {
        if (c == '[' || c == '{') ++brackets_;
        if (c == ']' || c == '}') --brackets_;
        if (brackets_ > kMaxBrackets) {
          fail(pos_, fmt::format("more than {} brackets open at once (the config nests none)", kMaxBrackets));
        }
        ++pos_;
        endChain();
      }
    }
  }

 private:
  // A key part or a value's piece at `start`; the chain of dotted parts it belongs to grows.
  void part(size_t start) {
    if (afterDot_ && parts_ > 0) {
      ++parts_;
    } else {
      parts_ = 1;
      chainStart_ = start;
    }
    afterDot_ = false;
    if (parts_ > kMaxKeyParts) {
      fail(chainStart_,
           fmt::format("a key of more than {} dotted parts (the config's keys have at most 3)", kMaxKeyParts));
    }
  }

  void endChain() {
    parts_ = 0;
    afterDot_ = false;
  }

  void skipComment() {
    while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
  }

  // A string of any kind starting at pos_; an unclosed one runs to its line's end, or for a
  // multi-line one to the text's end (toml++ then says why).
  void skipString(char quote) {
    const std::string triple(3, quote);
    const bool multiLine = text_.compare(pos_, 3, triple) == 0;
    pos_ += multiLine ? 3 : 1;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\\' && quote == '"' && pos_ + 1 < text_.size()) {
        if (text_[pos_ + 1] == '\n') ++line_;
        pos_ += 2;
        continue;
      }
      if (c == '\n') {
        if (!multiLine) return;
        ++line_;
      } else if (c == quote && !multiLine) {
        ++pos_;
        return;
      } else if (c == quote && text_.compare(pos_, 3, triple) == 0) {
        pos_ += 3;
        // Up to two more quotes belong to the content: """a"""" is a" in a string.
        for (int i = 0; i < 2 && pos_ < text_.size() && text_[pos_] == quote; ++i) ++pos_;
        return;
      }
      ++pos_;
    }
  }

  [[noreturn]] void fail(size_t at, const std::string& why) const {
    const std::string_view rest = text_.substr(at, 100);
    throw ConfigError(shownValue(origin_), fmt::format("line {}: {}: '{}'", line_, why,
                                                       shownValue(std::string(rest.substr(0, rest.find('\n'))))));
  }

  std::string_view text_;
  const std::string& origin_;
  size_t pos_ = 0;
  int line_ = 1;
  int parts_ = 0;
  bool afterDot_ = false;
  size_t chainStart_ = 0;
  int brackets_ = 0;
};

}  // namespace

void checkTomlShape(const std::string& text, const std::string& origin) { ShapeScanner(text, origin).run(); }

}  // namespace outbox::config_detail

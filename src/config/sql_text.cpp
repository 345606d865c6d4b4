// snapshot_query: one SELECT (or WITH ... SELECT) statement, checked at load. Not a SQL parser:
// a small scanner that knows comments, string literals and quoted names, enough to find the first
// keyword and any ';' outside them. Strict on purpose: what it cannot place is refused.
#include <cctype>
#include <string_view>

#include <fmt/format.h>

#include "config/section.h"

namespace outbox::config_detail {

namespace {

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  bool atEnd() const { return pos_ >= text_.size(); }
  char peek() const { return atEnd() ? '\0' : text_[pos_]; }

  // Skips whitespace and comments (-- ..., # ..., /* ... */); false on an unclosed comment.
  bool skipSpace() {
    while (!atEnd()) {
      const char c = text_[pos_];
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++pos_;
      } else if (c == '#' || (c == '-' && next() == '-')) {
        size_t end = text_.find('\n', pos_);
        pos_ = end == std::string_view::npos ? text_.size() : end + 1;
      } else if (c == '/' && next() == '*') {
        size_t end = text_.find("*/", pos_ + 2);
        if (end == std::string_view::npos) return false;
        pos_ = end + 2;
      } else {
        return true;
      }
    }
    return true;
  }

  // The word at the position (letters, digits, '_'), upper-cased; "" when none.
  std::string word() {
    std::string w;
    while (!atEnd() && (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_')) {
      w.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(text_[pos_++]))));
    }
    return w;
  }

  // Moves past one token: a quoted string or name, a comment, or one character. False on an
  // unclosed quote or comment. Sets `semicolon` when the token is a ';' outside quotes.
  bool token(bool& semicolon, int& depth) {
    semicolon = false;
    const char c = peek();
    if (c == '\'' || c == '"' || c == '`') return quoted(c);
    if (std::isspace(static_cast<unsigned char>(c)) || c == '#' || (c == '-' && next() == '-') ||
        (c == '/' && next() == '*')) {
      return skipSpace();
    }
    if (c == ';') semicolon = true;
    if (c == '(') ++depth;
    if (c == ')') --depth;
    ++pos_;
    return true;
  }

 private:
  char next() const { return pos_ + 1 < text_.size() ? text_[pos_ + 1] : '\0'; }

  bool quoted(char quote) {
    ++pos_;
    while (!atEnd()) {
      const char c = text_[pos_++];
      if (c == '\\' && quote != '`') {
        ++pos_;
      } else if (c == quote) {
        if (peek() != quote) return true;
        ++pos_;  // a doubled quote stands for itself
      }
    }
    return false;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::string snapshotQueryProblem(const std::string& query) {
  if (query.empty()) return "";
  Scanner scan(query);
  if (!scan.skipSpace()) return "an unclosed comment";
  if (scan.atEnd()) return "is empty (leave it out for no snapshot)";
  const std::string first = scan.word();
  if (first != "SELECT" && first != "WITH") {
    return fmt::format("must be one SELECT statement (or WITH ... SELECT), not {}",
                       first.empty() ? "what it starts with" : first);
  }
  int depth = 0;
  bool semicolon = false;
  std::string lastTopLevelWord;  // with WITH, the statement's own verb is the first word after the CTEs
  bool sawMainVerb = first == "SELECT";
  while (!scan.atEnd()) {
    if (!sawMainVerb && depth == 0 && std::isalpha(static_cast<unsigned char>(scan.peek()))) {
      std::string w = scan.word();
      if (w == "SELECT") sawMainVerb = true;
      static const char* kWriters[] = {"INSERT", "UPDATE", "DELETE", "REPLACE", "CALL", "SET", "DO", "HANDLER"};
      for (const char* verb : kWriters) {
        if (w == verb) return fmt::format("must be one SELECT statement: WITH ... {} is not a read", w);
      }
      continue;
    }
    if (!scan.token(semicolon, depth)) return "an unclosed quote or comment";
    if (depth < 0) return "a ')' without its '('";
    if (semicolon) {
      if (!scan.skipSpace()) return "an unclosed comment";
      if (!scan.atEnd()) return "holds a second statement after ';' (one SELECT statement only)";
    }
  }
  if (depth != 0) return "a '(' without its ')'";
  if (!sawMainVerb) return "WITH ... must end in a SELECT";
  return "";
}

}  // namespace outbox::config_detail

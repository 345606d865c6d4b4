// snapshot_query: one SELECT (or WITH ... SELECT) statement that reads and neither writes nor
// locks, checked at load. Not a SQL parser: a scanner that reads comments, string literals and
// quoted names as MariaDB's and MySQL's lexers do, enough to see every word outside them. Strict on
// purpose: what it cannot place is refused. (A write it misses still fails: snapshots run in a
// READ ONLY transaction, on a connection without CLIENT_MULTI_STATEMENTS.)
#include <array>
#include <cctype>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "config/section.h"

namespace outbox::config_detail {

namespace {

struct Token {
  enum Kind { kWord, kQuotedName, kString, kSymbol } kind;
  std::string text;  // a word upper-cased; a quoted name's content upper-cased; a symbol's character
};

// The query as the server's lexer splits it, comments and whitespace dropped. `backslashEscapes`:
// whether '\' escapes the next character in '...' and "..." (true unless the server's sql_mode
// has NO_BACKSLASH_ESCAPES, which the bridge does not set or clear).
class Scanner {
 public:
  Scanner(std::string_view text, bool backslashEscapes) : text_(text), backslashEscapes_(backslashEscapes) {}

  // The tokens, or "" and `problem` set.
  bool scan(std::vector<Token>& tokens, std::string& problem) {
    while (true) {
      if (!skipSpace(problem)) return false;
      if (atEnd()) return true;
      const char c = text_[pos_];
      if (c == '\'' || c == '"' || c == '`') {
        std::string content;
        if (!quoted(c, content)) {
          problem = "an unclosed quote";
          return false;
        }
        tokens.push_back({c == '\'' ? Token::kString : Token::kQuotedName, upper(content)});
      } else if (isWordChar(c)) {
        const size_t start = pos_;
        while (!atEnd() && isWordChar(text_[pos_])) ++pos_;
        tokens.push_back({Token::kWord, upper(text_.substr(start, pos_ - start))});
      } else {
        tokens.push_back({Token::kSymbol, std::string(1, c)});
        ++pos_;
      }
    }
  }

 private:
  bool atEnd() const { return pos_ >= text_.size(); }
  char at(size_t i) const { return i < text_.size() ? text_[i] : '\0'; }
  static bool isWordChar(char c) {
    // Letters, digits, '_', '$' and bytes of multi-byte UTF-8 characters, as identifiers have them.
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || static_cast<unsigned char>(c) >= 0x80;
  }
  static std::string upper(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
  }

  // Whitespace and comments, as the server reads them: '#' to the end of the line; "--" only when
  // followed by whitespace, a control character or the end ("1 --1" is 1 minus -1, and "--;"
  // no comment); "/*" to the first "*/" (they do not nest). "/*!" and "/*M!" are executable
  // comments: the server runs what they hold, so they are refused.
  bool skipSpace(std::string& problem) {
    while (!atEnd()) {
      const char c = text_[pos_];
      const auto next = static_cast<unsigned char>(at(pos_ + 2));
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        ++pos_;
      } else if (c == '#' || (c == '-' && at(pos_ + 1) == '-' && (next <= 32 || next == 127))) {
        const size_t end = text_.find('\n', pos_);
        pos_ = end == std::string_view::npos ? text_.size() : end + 1;
      } else if (c == '/' && at(pos_ + 1) == '*') {
        if (at(pos_ + 2) == '!' ||
            (std::toupper(static_cast<unsigned char>(at(pos_ + 2))) == 'M' && at(pos_ + 3) == '!')) {
          problem = "holds an executable comment (/*! ... */ or /*M! ... */), which the server runs: write its text "
                    "outside a comment";
          return false;
        }
        const size_t end = text_.find("*/", pos_ + 2);
        if (end == std::string_view::npos) {
          problem = "an unclosed comment";
          return false;
        }
        pos_ = end + 2;
      } else {
        return true;
      }
    }
    return true;
  }

  bool quoted(char quote, std::string& content) {
    ++pos_;
    while (!atEnd()) {
      const char c = text_[pos_++];
      if (c == '\\' && quote != '`' && backslashEscapes_) {
        if (!atEnd()) content.push_back(text_[pos_++]);
      } else if (c == quote) {
        if (at(pos_) != quote) return true;
        content.push_back(quote);
        ++pos_;  // a doubled quote stands for itself
      } else {
        content.push_back(c);
      }
    }
    return false;
  }

  std::string_view text_;
  bool backslashEscapes_;
  size_t pos_ = 0;
};

// Functions that lock, wait, write or read the server's files: a snapshot must only read the
// database. A word is refused wherever it stands; a quoted name when a '(' follows (`SLEEP`(1)
// calls SLEEP).
constexpr std::array<std::string_view, 16> kRefusedFunctions{
    "GET_LOCK",        "RELEASE_LOCK",     "RELEASE_ALL_LOCKS", "SLEEP",
    "BENCHMARK",       "LOAD_FILE",        "NEXTVAL",           "SETVAL",
    "LASTVAL",         "MASTER_POS_WAIT",  "MASTER_GTID_WAIT",  "SOURCE_POS_WAIT",
    "WAIT_FOR_EXECUTED_GTID_SET", "WAIT_UNTIL_SQL_THREAD_AFTER_GTIDS", "SYS_EXEC", "SYS_EVAL"};

bool isWord(const std::vector<Token>& tokens, size_t i, std::string_view word) {
  return i < tokens.size() && tokens[i].kind == Token::kWord && tokens[i].text == word;
}

// What a token at `i` does that a read must not, or "".
std::string sideEffect(const std::vector<Token>& tokens, size_t i) {
  const Token& t = tokens[i];
  const bool called = i + 1 < tokens.size() && tokens[i + 1].kind == Token::kSymbol && tokens[i + 1].text == "(";
  if (t.kind == Token::kWord || (t.kind == Token::kQuotedName && called)) {
    for (std::string_view f : kRefusedFunctions) {
      if (t.text == f) {
        return fmt::format("calls {}, which locks, waits, writes or reads the server's files (a snapshot only reads)",
                           f);
      }
    }
  }
  if (t.kind != Token::kWord) return "";
  if (t.text == "INTO") return "writes (SELECT ... INTO OUTFILE, DUMPFILE or @variable): a snapshot only reads";
  if (t.text == "PROCEDURE") return "has a PROCEDURE clause: a snapshot only reads";
  if (t.text == "FOR" && (isWord(tokens, i + 1, "UPDATE") || isWord(tokens, i + 1, "SHARE"))) {
    return fmt::format("locks rows (FOR {}): a snapshot reads without locking", tokens[i + 1].text);
  }
  if (t.text == "LOCK" && isWord(tokens, i + 1, "IN")) {
    return "locks rows (LOCK IN SHARE MODE): a snapshot reads without locking";
  }
  if ((t.text == "NEXT" || t.text == "PREVIOUS") && isWord(tokens, i + 1, "VALUE")) {
    return fmt::format("takes a sequence value ({} VALUE FOR): a snapshot only reads", t.text);
  }
  return "";
}

std::string problemOf(const std::string& query, bool backslashEscapes) {
  std::vector<Token> tokens;
  std::string problem;
  if (!Scanner(query, backslashEscapes).scan(tokens, problem)) return problem;
  if (tokens.empty()) return "is empty (leave it out for no snapshot)";
  const std::string first = tokens[0].kind == Token::kWord ? tokens[0].text : "";
  if (first != "SELECT" && first != "WITH") {
    return fmt::format("must be one SELECT statement (or WITH ... SELECT), not {}",
                       first.empty() ? "what it starts with" : shownValue(first));
  }
  int depth = 0;
  bool sawMainVerb = first == "SELECT";  // with WITH, the statement's own verb is the first word after the CTEs
  for (size_t i = 1; i < tokens.size(); ++i) {
    const Token& t = tokens[i];
    if (std::string effect = sideEffect(tokens, i); !effect.empty()) return effect;
    if (t.kind == Token::kWord && !sawMainVerb && depth == 0) {
      if (t.text == "SELECT") sawMainVerb = true;
      for (const char* verb : {"INSERT", "UPDATE", "DELETE", "REPLACE", "CALL", "SET", "DO", "HANDLER"}) {
        if (t.text == verb) return fmt::format("must be one SELECT statement: WITH ... {} is not a read", verb);
      }
    }
    if (t.kind != Token::kSymbol) continue;
    if (t.text == "(") ++depth;
    if (t.text == ")" && --depth < 0) return "a ')' without its '('";
    if (t.text == ";" && i + 1 < tokens.size()) return "holds a second statement after ';' (one SELECT statement only)";
  }
  if (depth != 0) return "a '(' without its ')'";
  if (!sawMainVerb) return "WITH ... must end in a SELECT";
  return "";
}

}  // namespace

std::string snapshotQueryProblem(const std::string& query) {
  if (query.empty()) return "";
  for (char c : query) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 32 && c != '\t' && c != '\n' && c != '\r') || u == 127) {
      return fmt::format("holds the control character \\x{:02x} (the server's lexer may read it as an end)", u);
    }
  }
  std::string problem = problemOf(query, true);
  if (!problem.empty()) return problem;
  // The same text under NO_BACKSLASH_ESCAPES, which a server's sql_mode may have: a string with
  // \' in it ends elsewhere there, and what it hid would run.
  problem = problemOf(query, false);
  if (!problem.empty()) {
    return fmt::format("reads differently when the server's sql_mode has NO_BACKSLASH_ESCAPES ({}): write a quote "
                       "inside a string as '' rather than \\'",
                       problem);
  }
  return "";
}

}  // namespace outbox::config_detail

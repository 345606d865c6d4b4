// Reading the head of a statement the binary log carries as text (binlog_statement.h). Not a SQL
// parser: a lexer for what comes before the first table name of the five statements that can add
// or change rows, strict on purpose — what it cannot place is unreadable, and every source looks
// once (the rows still come from the table: a ring wrong costs latency, never a row); DDL, which
// adds no rows, asks its database's sources to look.
#include "db/binlog_statement.h"

#include <cstdint>
#include <optional>

namespace outbox::db {

namespace {

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  // Skips blanks and comments, and the markers of an executable comment (/*!NNNNN, /*M!NNNNN up
  // to kEveryServer, and its */), whose text every server runs; false on one of a later version
  // (which a server may or may not run), one inside another, or a comment not closed.
  bool skipSpace() {
    while (pos_ < text_.size()) {
      const auto c = static_cast<unsigned char>(text_[pos_]);
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        ++pos_;
      } else if (c == '#' ||
                 (c == '-' && at(1) == '-' && (pos_ + 2 == text_.size() || static_cast<unsigned char>(at(2)) <= ' '))) {
        const size_t end = text_.find('\n', pos_);
        pos_ = end == std::string_view::npos ? text_.size() : end + 1;
      } else if (c == '/' && at(1) == '*') {
        if (at(2) == '!' || (at(2) == 'M' && at(3) == '!')) {
          if (executable_) return false;
          pos_ += at(2) == '!' ? 3 : 4;
          uint64_t version = 0;
          size_t digits = 0;
          for (; pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9' && digits < 7; ++pos_, ++digits) {
            version = version * 10 + static_cast<uint64_t>(text_[pos_] - '0');
          }
          if (version > kEveryServer) return false;
          executable_ = true;
          continue;
        }
        const size_t end = text_.find("*/", pos_ + 2);
        if (end == std::string_view::npos) return false;
        pos_ = end + 2;
      } else if (c == '*' && at(1) == '/' && executable_) {
        executable_ = false;
        pos_ += 2;
      } else {
        return true;
      }
    }
    return true;
  }

  // Moves past `SET STATEMENT var = value [, ...] FOR`; false when what follows SET STATEMENT is
  // not that (strings skipped whole, so a FOR inside one does not end it).
  bool setStatementPrefix() {
    while (skipSpace() && pos_ < text_.size()) {
      if (keyword("FOR")) return true;
      if (text_[pos_] == '\'' || text_[pos_] == '"') {
        if (!string()) return false;
      } else if (!name()) {
        ++pos_;  // '=', ',', a digit's sign, a parenthesis
      }
    }
    return false;
  }

  // A name at the position, bare or in backquotes (`a``b` is a`b), or, with `ansi`, in double
  // quotes (ANSI_QUOTES: where a name must stand, a double-quoted word is one); nullopt when there
  // is none. `quoted` says which, since only a bare word can be a keyword.
  std::optional<std::string> name(bool* quoted = nullptr, bool ansi = false) {
    if (!skipSpace() || pos_ >= text_.size()) return std::nullopt;
    const char quote = text_[pos_] == '"' && ansi ? '"' : '`';
    if (quoted != nullptr) *quoted = text_[pos_] == quote;
    if (text_[pos_] == quote) {
      std::string out;
      for (size_t i = pos_ + 1; i < text_.size(); ++i) {
        if (text_[i] != quote) {
          out += text_[i];
        } else if (i + 1 < text_.size() && text_[i + 1] == quote) {
          out += quote;
          ++i;
        } else {
          pos_ = i + 1;
          return out.empty() ? std::nullopt : std::optional(out);
        }
      }
      return std::nullopt;  // not closed
    }
    const size_t start = pos_;
    while (pos_ < text_.size() && isNameChar(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    if (pos_ == start) return std::nullopt;
    return std::string(text_.substr(start, pos_ - start));
  }

  // Whether the next bare word is `keyword` (upper case), moving past it when it is.
  bool keyword(std::string_view keyword) {
    const size_t before = pos_;
    const bool executable = executable_;
    bool quoted = false;
    auto word = name(&quoted);
    if (word && !quoted && equalsUpper(*word, keyword)) return true;
    pos_ = before;
    executable_ = executable;
    return false;
  }

  // A string literal ('...' or "...", with backslash escapes and doubled quotes); false on none.
  bool string() {
    if (!skipSpace() || pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    const char quote = text_[pos_];
    for (size_t i = pos_ + 1; i < text_.size(); ++i) {
      if (text_[i] == '\\') {
        ++i;
      } else if (text_[i] == quote) {
        if (i + 1 < text_.size() && text_[i + 1] == quote) {
          ++i;
        } else {
          pos_ = i + 1;
          return true;
        }
      }
    }
    return false;
  }

  // A table name, `db`.`t` or `t` (then in `defaultDatabase`), as "db.t"; nullopt when there is
  // none, or no database to put it in.
  std::optional<std::string> table(std::string_view defaultDatabase) {
    auto first = name(nullptr, true);
    if (!first) return std::nullopt;
    const size_t afterFirst = pos_;
    const bool executable = executable_;
    if (skipSpace() && pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      auto second = name(nullptr, true);
      if (!second) return std::nullopt;
      return *first + "." + *second;
    }
    pos_ = afterFirst;
    executable_ = executable;
    if (defaultDatabase.empty()) return std::nullopt;
    return std::string(defaultDatabase) + "." + *first;
  }

 private:
  char at(size_t ahead) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }

  static bool isNameChar(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '$' ||
           c >= 0x80;
  }

  static bool equalsUpper(std::string_view word, std::string_view keyword) {
    if (word.size() != keyword.size()) return false;
    for (size_t i = 0; i < word.size(); ++i) {
      char c = word[i];
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      if (c != keyword[i]) return false;
    }
    return true;
  }

  // MariaDB 10.0.0: an executable comment up to this version runs on every server the bridge
  // supports (MySQL 5.x's /*!40101 ... */ among them).
  static constexpr uint64_t kEveryServer = 100000;

  std::string_view text_;
  size_t pos_ = 0;
  bool executable_ = false;  // inside /*! ... */
};

LoggedStatement rowsInto(std::optional<std::string> table) {
  if (!table) return {};
  return {LoggedStatement::Kind::kNewRows, std::move(*table)};
}

}  // namespace

LoggedStatement readLoggedStatement(std::string_view statement, std::string_view defaultDatabase, bool insertId) {
  Lexer lex(statement);
  // SET STATEMENT max_statement_time = 1, ... FOR <the statement>
  if (lex.keyword("SET")) {
    if (!lex.keyword("STATEMENT") || !lex.setStatementPrefix()) return {LoggedStatement::Kind::kSchema, ""};
  }
  // INSERT [LOW_PRIORITY | DELAYED | HIGH_PRIORITY] [IGNORE] [INTO] table ...
  // REPLACE [LOW_PRIORITY | DELAYED] [INTO] table ...
  if (lex.keyword("INSERT") || lex.keyword("REPLACE")) {
    while (lex.keyword("LOW_PRIORITY") || lex.keyword("DELAYED") || lex.keyword("HIGH_PRIORITY") ||
           lex.keyword("IGNORE") || lex.keyword("INTO")) {
    }
    return rowsInto(lex.table(defaultDatabase));
  }
  if (lex.keyword("UPDATE") || lex.keyword("DELETE")) {
    // An auto-increment value taken: a trigger or a function inserted rows somewhere.
    if (insertId) return {};
    return {LoggedStatement::Kind::kNoNewRows, ""};
  }
  // LOAD DATA|XML [LOW_PRIORITY | CONCURRENT] [LOCAL] INFILE 'file' [REPLACE | IGNORE] INTO TABLE table
  if (lex.keyword("LOAD")) {
    if (!lex.keyword("DATA") && !lex.keyword("XML")) return {};
    while (lex.keyword("LOW_PRIORITY") || lex.keyword("CONCURRENT") || lex.keyword("LOCAL")) {
    }
    if (!lex.keyword("INFILE") || !lex.string()) return {};
    if (!lex.keyword("REPLACE")) lex.keyword("IGNORE");
    if (!lex.keyword("INTO") || !lex.keyword("TABLE")) return {};
    return rowsInto(lex.table(defaultDatabase));
  }
  // CREATE [OR REPLACE] TEMPORARY TABLE, DROP TEMPORARY TABLE: the session's own table (MIXED logs
  // them around statements it logs as text), never an outbox. A CREATE ... SELECT fills only it.
  if (lex.keyword("CREATE")) {
    if (lex.keyword("OR") && !lex.keyword("REPLACE")) return {LoggedStatement::Kind::kSchema, ""};
    if (lex.keyword("TEMPORARY") && lex.keyword("TABLE")) return {LoggedStatement::Kind::kNoNewRows, ""};
    return {LoggedStatement::Kind::kSchema, ""};
  }
  if (lex.keyword("DROP")) {
    if (lex.keyword("TEMPORARY") && lex.keyword("TABLE")) return {LoggedStatement::Kind::kNoNewRows, ""};
    return {LoggedStatement::Kind::kSchema, ""};
  }
  // Statements that change a schema or an account, never a table's rows.
  for (const char* schema : {"ALTER", "RENAME", "TRUNCATE", "GRANT", "REVOKE", "ANALYZE", "OPTIMIZE", "REPAIR",
                             "FLUSH", "INSTALL", "UNINSTALL"}) {
    if (lex.keyword(schema)) return {LoggedStatement::Kind::kSchema, ""};
  }
  return {};
}

}  // namespace outbox::db

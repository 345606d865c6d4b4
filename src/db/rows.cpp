// db::Rows: a result set, its fields read by column name (or by the position index() gave) as
// text or integers.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <stdexcept>

#include <fmt/format.h>
#include <mysql.h>

#include "db/connection.h"

namespace outbox::db {

Rows::Rows(MYSQL_RES* res) : res_(res) {
  unsigned n = mysql_num_fields(res);
  MYSQL_FIELD* fields = mysql_fetch_fields(res);
  columns_.reserve(n);
  for (unsigned i = 0; i < n; ++i) {
    ColumnKind kind = ColumnKind::kText;
    switch (fields[i].type) {
      case MYSQL_TYPE_TINY:
      case MYSQL_TYPE_SHORT:
      case MYSQL_TYPE_LONG:
      case MYSQL_TYPE_INT24:
      case MYSQL_TYPE_LONGLONG:
      case MYSQL_TYPE_DECIMAL:
      case MYSQL_TYPE_NEWDECIMAL:
      case MYSQL_TYPE_FLOAT:
      case MYSQL_TYPE_DOUBLE:
        kind = ColumnKind::kNumber;
        break;
      default:
        break;
    }
    // A ZEROFILL column's text keeps its zeros ("000042"), which JSON has no number for: the
    // snapshot writes it as a string, the same text (docs/consumers.md, "The snapshot").
    if ((fields[i].flags & ZEROFILL_FLAG) != 0) kind = ColumnKind::kText;
    columns_.push_back({std::string(fields[i].name, fields[i].name_length), kind});
  }
}

namespace {

// Whether `column` is named `name`, ASCII case ignored (as SQL compares column names).
bool named(const Column& column, std::string_view name) {
  return std::equal(column.name.begin(), column.name.end(), name.begin(), name.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
}

}  // namespace

size_t Rows::index(std::string_view name) const {
  auto same = [name](const Column& c) { return named(c, name); };
  auto found = std::find_if(columns_.begin(), columns_.end(), same);
  if (found == columns_.end()) throw std::logic_error(fmt::format("the result has no column '{}'", name));
  if (std::find_if(found + 1, columns_.end(), same) != columns_.end()) {
    throw std::logic_error(fmt::format("the result has two columns '{}': give one an alias", name));
  }
  return static_cast<size_t>(found - columns_.begin());
}

bool Rows::has(std::string_view name) const {
  return std::any_of(columns_.begin(), columns_.end(), [name](const Column& c) { return named(c, name); });
}

bool Rows::next() {
  if (!res_) return false;
  row_ = mysql_fetch_row(res_.get());
  if (row_ == nullptr) return false;
  lengths_ = mysql_fetch_lengths(res_.get());
  return true;
}

std::string_view Rows::text(size_t i) const {
  if (row_[i] == nullptr) return {};
  return {row_[i], lengths_[i]};
}

std::optional<std::string_view> Rows::optText(size_t i) const {
  if (row_[i] == nullptr) return std::nullopt;
  return std::string_view(row_[i], lengths_[i]);
}

uint64_t Rows::u64(size_t i) const {
  uint64_t v = 0;
  if (row_[i] != nullptr) std::from_chars(row_[i], row_[i] + lengths_[i], v);
  return v;
}

std::optional<uint64_t> Rows::optU64(size_t i) const {
  if (row_[i] == nullptr) return std::nullopt;
  return u64(i);
}

int64_t Rows::i64(size_t i) const {
  int64_t v = 0;
  if (row_[i] != nullptr) std::from_chars(row_[i], row_[i] + lengths_[i], v);
  return v;
}

uint64_t Rows::rowCount() const { return res_ ? mysql_num_rows(res_.get()) : 0; }

}  // namespace outbox::db

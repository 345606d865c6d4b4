#pragma once

// Id ranges in the SQL of MysqlOutboxStore's reads (mysql_store_read.cpp, mysql_store_holes.cpp).

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "relay/ports.h"

namespace outbox::sql {

// `column` in one of `ranges`: a range scan of the primary key per range.
inline std::string inRanges(const char* column, const std::vector<IdRange>& ranges) {
  std::string out = "(";
  for (const IdRange& r : ranges) {
    if (out.size() > 1) out += " OR ";
    out += r.first == r.last ? fmt::format("{} = {}", column, r.first)
                             : fmt::format("{} BETWEEN {} AND {}", column, r.first, r.last);
  }
  return out + ")";
}

// What stands for a span's open ids, in a query that joins the versions (v) and the quarantine (q)
// to the outbox (o): a row with neither.
inline constexpr const char* kUnresolved = "v.outbox_id IS NULL AND q.outbox_id IS NULL";

// The parts of `ranges` (ascending) without an id of `present` (ascending).
inline std::vector<IdRange> without(const std::vector<IdRange>& ranges, const std::vector<uint64_t>& present) {
  std::vector<IdRange> out;
  size_t i = 0;
  for (IdRange r : ranges) {
    while (i < present.size() && present[i] < r.first) ++i;
    for (; i < present.size() && present[i] <= r.last; ++i) {
      if (present[i] > r.first) out.push_back(IdRange{r.first, present[i] - 1});
      r.first = present[i] + 1;
    }
    if (r.first <= r.last) out.push_back(r);
  }
  return out;
}


}  // namespace outbox::sql

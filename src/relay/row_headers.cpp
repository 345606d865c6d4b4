#include "relay/row_headers.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <string>

#include <fmt/format.h>
#include <simdjson.h>

namespace outbox {

namespace {

bool isHeaderNameChar(unsigned char c) {
  if (std::isalnum(c) != 0 && c < 128) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool startsWithNoCase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), text.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         });
}

bool equalsNoCase(std::string_view a, std::string_view b) { return a.size() == b.size() && startsWithNoCase(a, b); }

std::string shown(std::string_view text) {
  std::string out;
  for (char ch : text.substr(0, 64)) {
    const auto c = static_cast<unsigned char>(ch);
    out += c < 0x20 || c == 0x7f ? fmt::format("\\x{:02x}", c) : std::string(1, ch);
  }
  return text.size() > 64 ? out + "..." : out;
}

}  // namespace

std::string parseRowHeaders(std::string_view json, std::vector<RowHeader>& out) {
  out.clear();
  thread_local simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  simdjson::dom::element root;
  if (auto error = parser.parse(padded).get(root); error != simdjson::SUCCESS) {
    return fmt::format("headers is not valid JSON ({})", simdjson::error_message(error));
  }
  if (root.is_null()) return "";
  simdjson::dom::object object;
  if (root.get(object) != simdjson::SUCCESS) return "headers is not a JSON object of name -> string";
  std::set<std::string> seen;  // names in lower case: headers are matched without case
  for (auto [name, value] : object) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) {
          return isHeaderNameChar(static_cast<unsigned char>(c));
        })) {
      return fmt::format("headers: '{}' is not a header name (letters, digits and !#$%&'*+-.^_`|~)", shown(name));
    }
    if (startsWithNoCase(name, "Nats-") || startsWithNoCase(name, "Outbox-") || equalsNoCase(name, "Content-Type")) {
      return fmt::format("headers: '{}' is reserved (the bridge sets Nats-*, Outbox-* and Content-Type)", name);
    }
    // NATS clients take a message with no body and a Status header for a status message, not a
    // user's (a delete would never reach its consumer).
    if (equalsNoCase(name, "Status") || equalsNoCase(name, "Description")) {
      return fmt::format("headers: '{}' is reserved (NATS clients read it as a server status)", name);
    }
    std::string lowered(name);
    std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](unsigned char c) { return std::tolower(c); });
    if (!seen.insert(lowered).second) {
      // MariaDB keeps both of a JSON object's duplicate names, MySQL the last: one answer here.
      return fmt::format("headers: '{}' is given twice", name);
    }
    std::string_view text;
    if (value.get(text) != simdjson::SUCCESS) {
      return fmt::format("headers: the value of '{}' is not a string", name);
    }
    if (std::any_of(text.begin(), text.end(), [](char ch) {
          const auto c = static_cast<unsigned char>(ch);
          return (c < 0x20 && c != '\t') || c == 0x7f;
        })) {
      return fmt::format("headers: the value of '{}' holds a control character ('{}'); a CR or LF would end the "
                         "header",
                         name, shown(text));
    }
    // NATS clients trim a value's surrounding blanks as they read it: the value would arrive
    // changed. An empty one adds no header (there is no empty value to carry).
    if (text.empty()) continue;
    if (std::string_view(" \t").find(text.front()) != std::string_view::npos ||
        std::string_view(" \t").find(text.back()) != std::string_view::npos) {
      return fmt::format("headers: the value of '{}' begins or ends with a space or tab, which NATS clients trim",
                         name);
    }
    out.emplace_back(std::string(name), std::string(text));
  }
  return "";
}

}  // namespace outbox

#pragma once

#include <string>
#include <string_view>

namespace outbox {

// What the escaper does with bytes that are not well-formed UTF-8.
enum class InvalidUtf8 {
  kKeep,     // as they are (a snapshot's values, whose checksum is over the database's bytes)
  kReplace,  // each such byte as \ufffd: the output is valid JSON whatever the input
};

// Appends `text` to `out` as the inside of a JSON string: quote, backslash and control characters
// escaped; well-formed UTF-8 as it is, other bytes as `invalid` says.
void appendJsonEscaped(std::string& out, std::string_view text, InvalidUtf8 invalid = InvalidUtf8::kKeep);

// `text` as a JSON string, quotes included; always valid JSON (bytes that are not UTF-8 replaced):
// for text that may come from a client (an HTTP path, a request's fields).
std::string jsonQuoted(std::string_view text);

}  // namespace outbox

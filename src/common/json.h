#pragma once

#include <string>
#include <string_view>

namespace outbox {

// Appends `text` to `out` as the inside of a JSON string: quote, backslash and control characters
// escaped; other bytes (UTF-8) as they are.
void appendJsonEscaped(std::string& out, std::string_view text);

// `text` as a JSON string, quotes included.
std::string jsonQuoted(std::string_view text);

}  // namespace outbox

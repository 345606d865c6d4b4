#pragma once

#include <cstddef>
#include <string_view>

namespace outbox {

// The length of the well-formed UTF-8 sequence that starts at text[i] (1 to 4), or 0 when the
// bytes there are not one (a stray continuation byte, an overlong form, a surrogate, a code point
// past U+10FFFF, a sequence cut short). Requires i < text.size().
inline size_t utf8SequenceAt(std::string_view text, size_t i) {
  auto byte = [&](size_t k) {
    return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0u;
  };
  auto continuation = [&](size_t k) { return (byte(k) & 0xC0) == 0x80; };
  const unsigned c = byte(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return continuation(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    const unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    return byte(1) >= lo && byte(1) <= hi && continuation(2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    return byte(1) >= lo && byte(1) <= hi && continuation(2) && continuation(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace outbox

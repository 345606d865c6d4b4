#include "common/json.h"

#include "common/utf8.h"

namespace outbox {

void appendJsonEscaped(std::string& out, std::string_view text, InvalidUtf8 invalid) {
  static const char* kHex = "0123456789abcdef";
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80 && invalid == InvalidUtf8::kReplace) {
      if (size_t n = utf8SequenceAt(text, i); n > 0) {
        i += n - 1;
      } else {
        out.append(text.data() + start, i - start);
        out += "\\ufffd";
        start = i + 1;
      }
      continue;
    }
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(text.data() + start, i - start);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        out += "\\u00";
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 15]);
    }
    start = i + 1;
  }
  out.append(text.data() + start, text.size() - start);
}

std::string jsonQuoted(std::string_view text) {
  std::string out = "\"";
  appendJsonEscaped(out, text, InvalidUtf8::kReplace);
  return out + "\"";
}

}  // namespace outbox

#include "common/terminal_text.h"

#include <cstdint>

namespace ckprof {
namespace {

// The length of the valid UTF-8 sequence at text[at] (2 to 4), or 0 when there is none
// (overlong forms, surrogates and code points above U+10FFFF are not valid).
size_t Utf8Length(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t b0 = byte(at);
  size_t n = 0;
  uint32_t min = 0;
  uint32_t cp = 0;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    n = 2, min = 0x80, cp = b0 & 0x1f;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    n = 3, min = 0x800, cp = b0 & 0x0f;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    n = 4, min = 0x10000, cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (at + n > text.size()) return 0;
  for (size_t i = 1; i < n; ++i) {
    const uint8_t b = byte(at + i);
    if ((b & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

void AppendHex(std::string* out, const char* prefix, unsigned value, int digits) {
  static const char kHex[] = "0123456789abcdef";
  *out += prefix;
  for (int d = digits - 1; d >= 0; --d) *out += kHex[(value >> (4 * d)) & 0xf];
}

// Escapes into *out (when given) and says whether anything was escaped.
bool Escape(std::string_view text, LineBreaks breaks, std::string* out) {
  bool changed = false;
  for (size_t i = 0; i < text.size();) {
    const uint8_t b = static_cast<uint8_t>(text[i]);
    if (b < 0x80) {
      const bool kept = breaks == LineBreaks::kKeep && (b == '\n' || b == '\t');
      if ((b >= 0x20 && b != 0x7f) || kept) {
        if (out) *out += static_cast<char>(b);
      } else {
        changed = true;
        if (out && b == 0x1b) {
          *out += "\\e";
        } else if (out) {
          AppendHex(out, "\\x", b, 2);
        }
      }
      ++i;
      continue;
    }
    const size_t n = Utf8Length(text, i);
    if (n == 0) {  // not UTF-8: the byte alone
      changed = true;
      if (out) AppendHex(out, "\\x", b, 2);
      ++i;
      continue;
    }
    // U+0080..U+009F is C2 80..C2 9F.
    if (n == 2 && b == 0xc2 && static_cast<uint8_t>(text[i + 1]) <= 0x9f) {
      changed = true;
      if (out) AppendHex(out, "\\u", static_cast<uint8_t>(text[i + 1]), 4);
    } else if (out) {
      out->append(text.substr(i, n));
    }
    i += n;
  }
  return changed;
}

}  // namespace

std::string EscapeControl(std::string_view text, LineBreaks breaks) {
  std::string out;
  out.reserve(text.size());
  Escape(text, breaks, &out);
  return out;
}

std::string JsonForTerminal(std::string json) {
  bool any = false;
  for (size_t i = 0; i < json.size() && !any; ++i) {
    const uint8_t b = static_cast<uint8_t>(json[i]);
    any = b == 0x7f ||
          (b == 0xc2 && i + 1 < json.size() && static_cast<uint8_t>(json[i + 1]) <= 0x9f);
  }
  if (!any) return json;
  std::string out;
  out.reserve(json.size() + 16);
  for (size_t i = 0; i < json.size(); ++i) {
    const uint8_t b = static_cast<uint8_t>(json[i]);
    if (b == 0x7f) {
      out += "\\u007f";
    } else if (b == 0xc2 && i + 1 < json.size() && static_cast<uint8_t>(json[i + 1]) <= 0x9f) {
      AppendHex(&out, "\\u", static_cast<uint8_t>(json[++i]), 4);
    } else {
      out += static_cast<char>(b);
    }
  }
  return out;
}

bool HasControl(std::string_view text, LineBreaks breaks) { return Escape(text, breaks, nullptr); }

}  // namespace ckprof

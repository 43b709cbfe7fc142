#include "common/json_util.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "common/fast_json.h"

namespace ckprof {
namespace {

template <typename JsonT>
Result<JsonT> ParseImpl(std::string_view text, size_t max_depth) {
  if (Status depth = CheckJsonDepth(text, max_depth); !depth) return Error{depth.error()};
  // nlohmann's lexer takes a NUL byte for the end of the input: "{...}\0anything" would parse.
  // JSON text never holds a raw NUL (inside strings it must be escaped).
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return MakeError("not valid JSON at " + LineColumn(text, nul) + ": a NUL byte");
  }
  try {
    return JsonT::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    // nlohmann's message: "[json.exception.parse_error.101] parse error at line 1, column 2:
    // syntax error while parsing value - invalid literal; last read: 'x'". Keep the reason.
    auto pos = what.find(": ", what.find("parse error"));
    std::string reason = pos == std::string::npos ? what : what.substr(pos + 2);
    size_t offset = e.byte == 0 ? 0 : e.byte - 1;
    return MakeError("not valid JSON at " + LineColumn(text, std::min(offset, text.size())) + ": " +
                     reason);
  } catch (const std::exception& e) {
    return MakeError(std::string("not valid JSON: ") + e.what());
  }
}

}  // namespace

std::string LineColumn(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

Status CheckJsonDepth(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  JsonStringState strings;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (!strings.Outside(c)) continue;
    if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return MakeError("JSON nested deeper than " + std::to_string(max_depth) + " levels at " +
                         LineColumn(text, i));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return Status::Ok();
}

Result<nlohmann::json> ParseJson(std::string_view text, size_t max_depth) {
  return ParseImpl<nlohmann::json>(text, max_depth);
}

Result<nlohmann::ordered_json> ParseOrderedJson(std::string_view text, size_t max_depth) {
  // A stored config, read at each task's start, is what the fast reader takes (its value the
  // same, its depth within the bound); anything else goes to nlohmann's parser, its messages.
  if (max_depth >= kFastJsonMaxDepth) {
    if (auto fast = FastJsonParse(text)) return std::move(*fast);
  }
  return ParseImpl<nlohmann::ordered_json>(text, max_depth);
}

std::string DumpJson(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string DumpJson(const nlohmann::ordered_json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

namespace {

// True when one of the 8 bytes at p needs more than a copy inside a JSON string: a control
// character, '"', '\\', or a byte of a multibyte UTF-8 sequence (0x80 and up). Bit tricks on
// one 64-bit word (a byte-wise test that flags a byte flags the word; false hits only ever
// follow a true one), so that a profiler's kilobytes of plain output are scanned 8 at a time.
bool AnySpecial8(const char* p) {
  uint64_t x;
  std::memcpy(&x, p, sizeof x);
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  auto has_zero = [](uint64_t v) { return (v - kOnes) & ~v & kHigh; };
  const uint64_t below_space = (x - kOnes * 0x20) & ~x & kHigh;
  return ((x & kHigh) | below_space | has_zero(x ^ (kOnes * '"')) | has_zero(x ^ (kOnes * '\\'))) !=
         0;
}

}  // namespace

void AppendJsonString(std::string& out, std::string_view s) {
  const size_t start = out.size();
  out.reserve(start + s.size() + 2);
  out += '"';
  const char* p = s.data();
  const size_t n = s.size();
  size_t run = 0;  // start of the bytes copied as they are
  size_t i = 0;
  while (i < n) {
    if (i + 8 <= n && !AnySpecial8(p + i)) {
      i += 8;
      continue;
    }
    const auto c = static_cast<unsigned char>(p[i]);
    if (c >= 0x80) {  // UTF-8 checks and replacements: nlohmann's way
      out.resize(start);
      out += DumpJson(nlohmann::json(std::string(s)));
      return;
    }
    ++i;
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(p + run, i - 1 - run);
    run = i;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default: {
        static constexpr char kHex[] = "0123456789abcdef";
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 0xf];
      }
    }
  }
  out.append(p + run, n - run);
  out += '"';
}

void AppendJsonNumber(std::string& out, int64_t v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

void AppendJsonNumber(std::string& out, uint64_t v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

void AppendJsonNumber(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  char* end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  out.append(buf, end);
  if (std::none_of(buf, end, [](char c) { return c == '.' || c == 'e'; })) {
    out += ".0";
  }
}

JsonObjectWriter& JsonObjectWriter::Field(std::string_view key, const std::vector<int>& v) {
  std::string& out = Key(key);
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    AppendJsonNumber(out, int64_t{v[i]});
  }
  out += ']';
  return *this;
}

std::string& JsonObjectWriter::Key(std::string_view key) {
  if (!first_) out_ += ',';
  first_ = false;
  AppendJsonString(out_, key);
  out_ += ':';
  return out_;
}

}  // namespace ckprof

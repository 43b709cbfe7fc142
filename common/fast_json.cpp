#include "common/fast_json.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

namespace ckprof {
namespace {

using json = nlohmann::ordered_json;

class Reader {
 public:
  Reader(std::string_view text, size_t pos)
      : p_(text.data() + pos), begin_(text.data()), end_(text.data() + text.size()) {}

  size_t pos() const { return static_cast<size_t>(p_ - begin_); }

  void SkipSpace() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  // One value at p_ (no whitespace before it); false when declined.
  bool Value(json* out, size_t depth) {
    if (p_ >= end_) return false;
    switch (*p_) {
      case '{':
        return Object(out, depth + 1);
      case '[':
        return Array(out, depth + 1);
      case '"': {
        std::string s;
        if (!String(&s)) return false;
        *out = std::move(s);
        return true;
      }
      case 't':
        return Literal("true", json(true), out);
      case 'f':
        return Literal("false", json(false), out);
      case 'n':
        return Literal("null", json(nullptr), out);
      default:
        return Number(out);
    }
  }

 private:
  bool Literal(std::string_view word, json value, json* out) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) {
      return false;
    }
    p_ += word.size();
    *out = std::move(value);
    return true;
  }

  // A string at p_ ('"'): ASCII, the two-character escapes only.
  bool String(std::string* out) {
    ++p_;
    const char* run = p_;
    for (;;) {
      if (p_ >= end_) return false;
      const auto ch = static_cast<unsigned char>(*p_);
      if (ch == '"') {
        out->append(run, p_);
        ++p_;
        return true;
      }
      if (ch < 0x20 || ch >= 0x80) return false;  // invalid, or UTF-8 for nlohmann to check
      if (ch != '\\') {
        ++p_;
        continue;
      }
      out->append(run, p_);
      if (++p_ >= end_) return false;
      switch (*p_) {
        case '"':
          *out += '"';
          break;
        case '\\':
          *out += '\\';
          break;
        case '/':
          *out += '/';
          break;
        case 'b':
          *out += '\b';
          break;
        case 'f':
          *out += '\f';
          break;
        case 'n':
          *out += '\n';
          break;
        case 'r':
          *out += '\r';
          break;
        case 't':
          *out += '\t';
          break;
        default:
          return false;  // \u (surrogates, UTF-8) is nlohmann's; anything else is invalid
      }
      run = ++p_;
    }
  }

  static bool Digit(char c) { return c >= '0' && c <= '9'; }

  // A number at p_, by JSON's grammar, typed as nlohmann types it. Declines what nlohmann would
  // read otherwise: an integer past 64 bits (a float there) and a float that is not finite.
  bool Number(json* out) {
    const char* start = p_;
    const bool negative = *p_ == '-';
    if (negative) ++p_;
    if (p_ >= end_ || !Digit(*p_)) return false;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ < end_ && Digit(*p_)) ++p_;
    }
    bool integer = true;
    if (p_ < end_ && *p_ == '.') {
      integer = false;
      ++p_;
      if (p_ >= end_ || !Digit(*p_)) return false;
      while (p_ < end_ && Digit(*p_)) ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      integer = false;
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ >= end_ || !Digit(*p_)) return false;
      while (p_ < end_ && Digit(*p_)) ++p_;
    }
    if (integer && negative) {
      int64_t v = 0;
      auto r = std::from_chars(start, p_, v);
      if (r.ec != std::errc() || r.ptr != p_) return false;
      *out = v;
    } else if (integer) {
      uint64_t v = 0;
      auto r = std::from_chars(start, p_, v);
      if (r.ec != std::errc() || r.ptr != p_) return false;
      *out = v;
    } else {
      double v = 0;
      auto r = std::from_chars(start, p_, v);
      if (r.ec != std::errc() || r.ptr != p_ || !std::isfinite(v)) return false;
      *out = v;
    }
    return true;
  }

  // After a container's item: its end (`close`: *closed) or a comma and whatever space follows
  // it; false at anything else.
  bool AfterItem(char close, bool* closed) {
    SkipSpace();
    if (p_ >= end_) return false;
    *closed = *p_ == close;
    if (!*closed && *p_ != ',') return false;
    ++p_;
    if (!*closed) SkipSpace();
    return true;
  }

  // A container's start at p_: `*out` made `empty`, *closed when it ends at once.
  bool Open(json empty, char close, size_t depth, json* out, bool* closed) {
    if (depth > kFastJsonMaxDepth) return false;
    ++p_;
    *out = std::move(empty);
    SkipSpace();
    *closed = p_ < end_ && *p_ == close;
    if (*closed) ++p_;
    return true;
  }

  bool Array(json* out, size_t depth) {
    bool closed = false;
    if (!Open(json::array(), ']', depth, out, &closed)) return false;
    if (closed) return true;
    auto& items = out->get_ref<json::array_t&>();
    for (;;) {
      json v;
      if (!Value(&v, depth)) return false;
      items.push_back(std::move(v));
      if (!AfterItem(']', &closed)) return false;
      if (closed) return true;
    }
  }

  bool Object(json* out, size_t depth) {
    bool closed = false;
    if (!Open(json::object(), '}', depth, out, &closed)) return false;
    if (closed) return true;
    auto& items = static_cast<json::object_t::Container&>(out->get_ref<json::object_t&>());
    for (;;) {
      if (p_ >= end_ || *p_ != '"') return false;
      std::string key;
      if (!String(&key)) return false;
      SkipSpace();
      if (p_ >= end_ || *p_ != ':') return false;
      ++p_;
      SkipSpace();
      json v;
      if (!Value(&v, depth)) return false;
      // A repeated key keeps its first place and takes the last value, as nlohmann's parser.
      bool seen = false;
      for (auto& kv : items) {
        if (kv.first == key) {
          kv.second = std::move(v);
          seen = true;
          break;
        }
      }
      if (!seen) {
        if (items.size() >= kFastJsonMaxKeys) return false;
        items.emplace_back(std::move(key), std::move(v));
      }
      if (!AfterItem('}', &closed)) return false;
      if (closed) return true;
    }
  }

  const char* p_;
  const char* begin_;
  const char* end_;
};

}  // namespace

std::optional<json> FastJsonValue(std::string_view text, size_t* pos) {
  if (*pos > text.size()) return std::nullopt;
  Reader r(text, *pos);
  r.SkipSpace();
  json v;
  if (!r.Value(&v, 0)) return std::nullopt;
  *pos = r.pos();
  return v;
}

std::optional<json> FastJsonParse(std::string_view text) {
  size_t pos = 0;
  auto v = FastJsonValue(text, &pos);
  if (!v) return std::nullopt;
  Reader r(text, pos);
  r.SkipSpace();
  if (r.pos() != text.size()) return std::nullopt;
  return v;
}

bool JsonIdentical(const json& a, const json& b) {
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j) {
      if (i.key() != j.key() || !JsonIdentical(i.value(), j.value())) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!JsonIdentical(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.is_number_float()) {
    // The same bits: -0.0 is not 0.0 here.
    const double x = a.get<double>(), y = b.get<double>();
    return std::memcmp(&x, &y, sizeof x) == 0;
  }
  return a == b;
}

}  // namespace ckprof

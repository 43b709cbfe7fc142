// Safe parsing of untrusted JSON text: never throws, bounds nesting depth (nlohmann's DOM
// parser recurses, so a frame of a million '[' would otherwise overflow the stack), and
// reports errors with line and column.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/result.h"

namespace ckprof {

inline constexpr size_t kMaxJsonDepth = 256;

// "line 3, column 14" for a 0-based byte offset into text.
std::string LineColumn(std::string_view text, size_t offset);

// Follows JSON text character by character to tell what lies inside its strings: for scanners
// that look for structure (brackets, commas, whitespace) without parsing.
class JsonStringState {
 public:
  // True when `c`, the next character, is outside every string (a string's quotes are inside).
  bool Outside(char c) {
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      return false;
    }
    in_string_ = c == '"';
    return !in_string_;
  }

 private:
  bool in_string_ = false, escaped_ = false;
};

// Checks that arrays/objects nest at most max_depth deep (strings are skipped properly).
Status CheckJsonDepth(std::string_view text, size_t max_depth = kMaxJsonDepth);

// Parses text; errors read "not valid JSON at line L, column C: <reason>" or "JSON nested
// deeper than N levels".
Result<nlohmann::json> ParseJson(std::string_view text, size_t max_depth = kMaxJsonDepth);
Result<nlohmann::ordered_json> ParseOrderedJson(std::string_view text,
                                                size_t max_depth = kMaxJsonDepth);

// Compact dump that replaces invalid UTF-8 instead of throwing.
std::string DumpJson(const nlohmann::json& j, int indent = -1);
std::string DumpJson(const nlohmann::ordered_json& j, int indent = -1);

// Appends `s` as a JSON string (quotes included), byte for byte what DumpJson writes for it:
// a profiler's captured output, kilobytes per task, is mostly printable ASCII, which is
// copied in runs; anything else takes nlohmann's path.
void AppendJsonString(std::string& out, std::string_view s);

// Appends a number as DumpJson writes it: integers as they are; doubles in the shortest form
// that reads back the same, with ".0" on whole ones (they stay floats), non-finite as null.
void AppendJsonNumber(std::string& out, int64_t v);
void AppendJsonNumber(std::string& out, uint64_t v);
void AppendJsonNumber(std::string& out, double v);

// Writes one JSON object straight into a string: for the daemon's per-task events and
// results, where building nlohmann's DOM (a map node and a string per key) and dumping it
// cost more than the rest of the work. The object is closed by Close() or on destruction.
class JsonObjectWriter {
 public:
  explicit JsonObjectWriter(std::string& out) : out_(out) { out_ += '{'; }
  ~JsonObjectWriter() { Close(); }
  JsonObjectWriter(const JsonObjectWriter&) = delete;
  JsonObjectWriter& operator=(const JsonObjectWriter&) = delete;

  JsonObjectWriter& Field(std::string_view key, std::string_view v) {
    AppendJsonString(Key(key), v);
    return *this;
  }
  JsonObjectWriter& Field(std::string_view key, const std::string& v) {
    return Field(key, std::string_view(v));
  }
  JsonObjectWriter& Field(std::string_view key, const char* v) {
    return Field(key, std::string_view(v));
  }
  JsonObjectWriter& Field(std::string_view key, bool v) {
    Key(key) += v ? "true" : "false";
    return *this;
  }
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  JsonObjectWriter& Field(std::string_view key, T v) {
    if constexpr (std::is_signed_v<T>) {
      AppendJsonNumber(Key(key), static_cast<int64_t>(v));
    } else {
      AppendJsonNumber(Key(key), static_cast<uint64_t>(v));
    }
    return *this;
  }
  JsonObjectWriter& Field(std::string_view key, std::nullptr_t) {
    Key(key) += "null";
    return *this;
  }
  JsonObjectWriter& Field(std::string_view key, double v) {
    AppendJsonNumber(Key(key), v);
    return *this;
  }
  JsonObjectWriter& Field(std::string_view key, const std::vector<int>& v);
  // A value that is JSON text already (a nested object written by another writer).
  JsonObjectWriter& RawField(std::string_view key, std::string_view json) {
    Key(key) += json;
    return *this;
  }
  // The key, for a value the caller appends to the string itself (a nested writer).
  std::string& Key(std::string_view key);
  void Close() {
    if (!closed_) out_ += '}';
    closed_ = true;
  }

 private:
  std::string& out_;
  bool first_ = true, closed_ = false;
};

}  // namespace ckprof

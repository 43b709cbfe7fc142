// Safe parsing of untrusted JSON text: never throws, bounds nesting depth (nlohmann's DOM
// parser recurses, so a frame of a million '[' would otherwise overflow the stack), and
// reports errors with line and column.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

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

}  // namespace ckprof

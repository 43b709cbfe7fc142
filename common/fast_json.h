// A JSON reader for the common case of a large configs list's elements (inside the converter).
//
// nlohmann's parser costs ~9 us for a 500-byte config (its lexer keeps every character read for
// its error messages and counts lines as it goes); a million-config submit spent most of its
// conversion there. FastJsonValue reads plain JSON (ASCII, no \u escape, objects of at most
// kFastJsonMaxKeys keys, at most kFastJsonMaxDepth levels) into the very value nlohmann's
// parser makes: the same types (a non-negative integer is number_unsigned, a negative one
// number_integer, one with a fraction or an exponent number_float), the same key order (a
// repeated key keeps its first place and takes its last value). On anything else, valid or not,
// it declines (nullopt) and the caller reads the text with nlohmann's parser, whose value, or
// error message, stands: this reader never accepts what nlohmann's would not.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace ckprof {

inline constexpr size_t kFastJsonMaxKeys = 32;
inline constexpr size_t kFastJsonMaxDepth = 32;

// The JSON value at `*pos` of `text` (whitespace before it skipped), and `*pos` just after it;
// nullopt (and `*pos` anywhere) when it declines.
std::optional<nlohmann::ordered_json> FastJsonValue(std::string_view text, size_t* pos);

// The whole of `text` as one JSON value (whitespace around it allowed); nullopt when it declines.
std::optional<nlohmann::ordered_json> FastJsonParse(std::string_view text);

// Whether two values are the same in every way FastJsonValue promises: types (nlohmann's ==
// takes 1 and 1.0 for equal), values and key order. (For its tests.)
bool JsonIdentical(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b);

}  // namespace ckprof

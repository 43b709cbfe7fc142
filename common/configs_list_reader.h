// A large configs list on several threads (inside the converter; not for other callers).
//
// A configs list's elements are independent, so a large one is cut at top-level commas into runs
// of whole elements, and each run is read by its own document reader on its own thread, as the
// list "[" + run + "]". Only an input that converts cleanly is taken from this path: on anything
// else (a parse error, an invalid config, a run that is not all configs) the caller converts the
// input again on one thread, whose messages, with line and column, are the ones users see.
// A cut can only succeed at a top-level comma: anywhere else (inside a string or a nested value)
// "[...run" + "]" is not valid JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/convert.h"

namespace ckprof {

inline constexpr size_t kPartsMinBytes = size_t{4} << 20;  // smaller inputs take one thread
inline constexpr uint64_t kPartsMaxInflatedBytes = uint64_t{512} << 20;  // larger: streamed

// A large configs list (plain text, no NUL byte) read on up to `threads` threads; nullopt when
// it is not one, is too small to gain, or does not convert cleanly (see above).
std::optional<Conversion> ConvertConfigsListInParts(std::string_view text,
                                                    const ConvertOptions& options,
                                                    unsigned threads);

// The inflated text of a gzipped configs list, for ConvertConfigsListInParts; nullopt when the
// first element is no config, or the text is corrupt, holds a NUL byte or inflates past
// `max_bytes` (the streamed reading handles those).
std::optional<std::string> InflateConfigsList(std::string_view gz,
                                              uint64_t max_bytes = kPartsMaxInflatedBytes);

// Element `index` (0-based) of a configs list: its config and its record added to `conv`, or
// why it is no valid config. Defined in convert.cpp, whose document reader uses it too.
Status AddListConfig(nlohmann::ordered_json&& element, size_t index, Conversion* conv);

// Reads the text of `count` pieces in a row as one configs list whose first element is element
// `first_index` of the whole list; nullopt unless every element is a valid config and nothing
// was warned about. Defined in convert.cpp, beside the document reader it drives.
std::optional<Conversion> ConvertConfigsRun(const std::string_view* pieces, size_t count,
                                            size_t first_index,
                                            const ConvertOptions& options) noexcept;

}  // namespace ckprof

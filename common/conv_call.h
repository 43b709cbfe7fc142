// A ConvCall is one call of a PyTorch convolution operator with its arguments, whichever input
// it came from (a replay-IR record, or an event of a profiler trace), and the table of the
// operators we understand with their positional schemas (docs: shared conversion.md).
//
// Plain value types; any thread may use its own copies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ckprof {

// The value of one argument, as far as conversion needs to know it.
struct ArgValue {
  enum class Kind {
    kNone,      // null / an absent optional tensor
    kTensor,    // shape, strides (may be empty: unknown), dtype
    kInt,       // ints[0]
    kIntList,   // ints
    kBool,      // bools[0]
    kBoolList,  // bools
    kString,    // text, e.g. "same"
    kOther,     // anything else (a float, a mixed list, an object); text renders it
  };
  Kind kind = Kind::kNone;
  std::vector<int64_t> shape, strides;  // kTensor
  std::string dtype;                    // kTensor: "c10::BFloat16", "c10::Half", "float", ...
  std::vector<int64_t> ints;
  std::vector<bool> bools;
  std::string text;

  static ArgValue None() { return ArgValue{}; }
  static ArgValue Tensor(std::vector<int64_t> shape, std::vector<int64_t> strides,
                         std::string dtype);
  static ArgValue Int(int64_t v);
  static ArgValue IntList(std::vector<int64_t> v);
  static ArgValue Bool(bool v);
  static ArgValue BoolList(std::vector<bool> v);
  static ArgValue String(std::string s);
  static ArgValue Other(std::string rendering);

  // A short rendering for messages: "[1, 1]", "True", "tensor [10, 64, 56, 56]", ...
  std::string ToString() const;
};

// One operator call: its name ("aten::miopen_convolution") and its arguments by name.
struct ConvCall {
  std::string op_name;
  std::vector<std::pair<std::string, ArgValue>> args;

  // The first argument of that name, or nullptr.
  const ArgValue* Find(std::string_view name) const;
};

// True for every operator of conversion.md's table (conv1d/2d/3d, convolution, _convolution,
// the miopen_* and cudnn_* convolutions and their transposes, convolution_backward).
bool IsConvOpName(std::string_view op_name);
// True for the backend ops that describe a nest of trace events: miopen_*, cudnn_*,
// convolution_backward.
bool IsBackendConvOp(std::string_view op_name);
// The positional argument names of a conv op, in schema order; nullopt for other names.
std::optional<std::vector<std::string_view>> ConvOpSchema(std::string_view op_name);

// "[1, 2, 3]": a list of integers as messages show it (a shape, an int list argument).
std::string JoinInts(const std::vector<int64_t>& v);

// Parses a profiler trace's "Concrete Inputs" string: "[1, 1]" -> kIntList, "1" -> kInt,
// "False" -> kBool, "[True, True, False]" -> kBoolList, "" -> kNone, "same" -> kString.
ArgValue ParseTraceScalar(std::string_view text);

}  // namespace ckprof

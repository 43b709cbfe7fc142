#include "common/conv_call.h"

#include <charconv>

namespace ckprof {
namespace {

struct OpSchema {
  std::string_view name;
  std::vector<std::string_view> args;
  bool backend;
};

const std::vector<OpSchema>& Schemas() {
  static const std::vector<OpSchema> schemas = {
      {"aten::convolution",
       {"input", "weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding",
        "groups"},
       false},
      {"aten::_convolution",
       {"input", "weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding",
        "groups", "benchmark", "deterministic", "cudnn_enabled", "allow_tf32"},
       false},
      {"aten::conv1d",
       {"input", "weight", "bias", "stride", "padding", "dilation", "groups"},
       false},
      {"aten::conv2d",
       {"input", "weight", "bias", "stride", "padding", "dilation", "groups"},
       false},
      {"aten::conv3d",
       {"input", "weight", "bias", "stride", "padding", "dilation", "groups"},
       false},
      {"aten::miopen_convolution",
       {"self", "weight", "bias", "padding", "stride", "dilation", "groups", "benchmark",
        "deterministic"},
       true},
      {"aten::miopen_depthwise_convolution",
       {"self", "weight", "bias", "padding", "stride", "dilation", "groups", "benchmark",
        "deterministic"},
       true},
      {"aten::miopen_convolution_transpose",
       {"self", "weight", "bias", "padding", "output_padding", "stride", "dilation", "groups",
        "benchmark", "deterministic"},
       true},
      {"aten::cudnn_convolution",
       {"self", "weight", "padding", "stride", "dilation", "groups", "benchmark", "deterministic",
        "allow_tf32"},
       true},
      {"aten::cudnn_convolution_transpose",
       {"self", "weight", "padding", "output_padding", "stride", "dilation", "groups", "benchmark",
        "deterministic", "allow_tf32"},
       true},
      {"aten::convolution_backward",
       {"grad_output", "input", "weight", "bias_sizes", "stride", "padding", "dilation",
        "transposed", "output_padding", "groups", "output_mask"},
       true},
  };
  return schemas;
}

const OpSchema* FindSchema(std::string_view op_name) {
  for (const auto& s : Schemas()) {
    if (s.name == op_name) return &s;
  }
  return nullptr;
}

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<int64_t> ParseInt(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<bool> ParseBool(std::string_view s) {
  if (s == "True" || s == "true") return true;
  if (s == "False" || s == "false") return false;
  return std::nullopt;
}

}  // namespace

std::string JoinInts(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  return s + "]";
}

ArgValue ArgValue::Tensor(std::vector<int64_t> shape, std::vector<int64_t> strides,
                          std::string dtype) {
  ArgValue a;
  a.kind = Kind::kTensor;
  a.shape = std::move(shape);
  a.strides = std::move(strides);
  a.dtype = std::move(dtype);
  return a;
}

ArgValue ArgValue::Int(int64_t v) {
  ArgValue a;
  a.kind = Kind::kInt;
  a.ints = {v};
  return a;
}

ArgValue ArgValue::IntList(std::vector<int64_t> v) {
  ArgValue a;
  a.kind = Kind::kIntList;
  a.ints = std::move(v);
  return a;
}

ArgValue ArgValue::Bool(bool v) {
  ArgValue a;
  a.kind = Kind::kBool;
  a.bools = {v};
  return a;
}

ArgValue ArgValue::BoolList(std::vector<bool> v) {
  ArgValue a;
  a.kind = Kind::kBoolList;
  a.bools = std::move(v);
  return a;
}

ArgValue ArgValue::String(std::string s) {
  ArgValue a;
  a.kind = Kind::kString;
  a.text = std::move(s);
  return a;
}

ArgValue ArgValue::Other(std::string rendering) {
  ArgValue a;
  a.kind = Kind::kOther;
  a.text = std::move(rendering);
  return a;
}

std::string ArgValue::ToString() const {
  switch (kind) {
    case Kind::kNone:
      return "None";
    case Kind::kTensor:
      return "tensor " + JoinInts(shape);
    case Kind::kInt:
      return std::to_string(ints.empty() ? 0 : ints[0]);
    case Kind::kIntList:
      return JoinInts(ints);
    case Kind::kBool:
      return !bools.empty() && bools[0] ? "True" : "False";
    case Kind::kBoolList: {
      std::string s = "[";
      for (size_t i = 0; i < bools.size(); ++i) {
        if (i) s += ", ";
        s += bools[i] ? "True" : "False";
      }
      return s + "]";
    }
    case Kind::kString:
      return "\"" + text + "\"";
    case Kind::kOther:
      return text;
  }
  return text;
}

const ArgValue* ConvCall::Find(std::string_view name) const {
  for (const auto& [n, v] : args) {
    if (n == name) return &v;
  }
  return nullptr;
}

bool IsConvOpName(std::string_view op_name) { return FindSchema(op_name) != nullptr; }

bool IsBackendConvOp(std::string_view op_name) {
  const OpSchema* s = FindSchema(op_name);
  return s && s->backend;
}

std::optional<std::vector<std::string_view>> ConvOpSchema(std::string_view op_name) {
  const OpSchema* s = FindSchema(op_name);
  if (!s) return std::nullopt;
  return s->args;
}

ArgValue ParseTraceScalar(std::string_view text) {
  std::string_view s = TrimBlanks(text);
  if (s.empty()) return ArgValue::None();
  if (s == "None") return ArgValue::None();
  if (auto b = ParseBool(s)) return ArgValue::Bool(*b);
  if (auto i = ParseInt(s)) return ArgValue::Int(*i);
  if (s.front() == '[' && s.back() == ']') {
    std::string_view body = TrimBlanks(s.substr(1, s.size() - 2));
    if (body.empty()) return ArgValue::IntList({});
    std::vector<int64_t> ints;
    std::vector<bool> bools;
    bool all_ints = true, all_bools = true;
    while (true) {
      size_t comma = body.find(',');
      std::string_view item = TrimBlanks(body.substr(0, comma));
      if (auto i = ParseInt(item)) {
        ints.push_back(*i);
      } else {
        all_ints = false;
      }
      if (auto b = ParseBool(item)) {
        bools.push_back(*b);
      } else {
        all_bools = false;
      }
      if (comma == std::string_view::npos) break;
      body.remove_prefix(comma + 1);
    }
    if (all_ints) return ArgValue::IntList(std::move(ints));
    if (all_bools) return ArgValue::BoolList(std::move(bools));
    return ArgValue::Other(std::string(s));
  }
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front()) {
    return ArgValue::String(std::string(s.substr(1, s.size() - 2)));
  }
  // Letters only: a string argument such as padding="same". Anything else (a float) is other.
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')) {
      return ArgValue::Other(std::string(s));
    }
  }
  return ArgValue::String(std::string(s));
}

}  // namespace ckprof

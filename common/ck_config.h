// A CkConfig is one CK profiler problem: which grouped-convolution operation to profile and
// the positional arguments ckProfiler takes for it (docs/ck-profiler.md).
//
// It is what `ckprof convert` writes (ck_profiler_configs.json), what the daemon stores per task
// and what the command builder turns into an argv. Plain value type; no threads involved.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace ckprof {

// The three grouped-convolution operations of ckProfiler.
enum class ConvOp { kFwd, kBwdData, kBwdWeight };

// "profile_grouped_conv_fwd", ... : the operation_type written to configs files.
std::string_view OperationTypeName(ConvOp op);
// "grouped_conv_fwd", ... : the first argument of ckProfiler.
std::string_view CkOperationName(ConvOp op);
// "fwd", "bwd_data", "bwd_weight": short names for consoles and tables.
std::string_view ShortOpName(ConvOp op);
// The short name of an operation type as the wire and results carry it
// ("profile_grouped_conv_bwd_data" -> "bwd_data"); "fwd" for anything else.
std::string ShortOp(std::string_view operation_type);
// Accepts "profile_grouped_conv_fwd", "grouped_conv_fwd" and the short names.
std::optional<ConvOp> ParseOperationType(std::string_view name);

// Element types, encoded differently per operation (see EncodeDataType).
enum class DataType { kFp32, kFp16, kBf16 };
std::string_view DataTypeName(DataType t);                         // "fp32", "fp16", "bf16"
std::optional<DataType> ParseDataTypeName(std::string_view name);  // in any case: "FP16"

// Tensor layouts we produce: PyTorch's NCHW with KCYX weights, or channels-last.
enum class Layout { kNchw, kNhwc };
std::string_view LayoutName(Layout l);                         // "nchw", "nhwc"
std::optional<Layout> ParseLayoutName(std::string_view name);  // in any case: "NHWC"

// CK's per-operation enums: bf16 is 2 for fwd/bwd_data but 5 for bwd_weight; NCHW is 3, 3, 4
// and channels-last 1, 1, 2.
int EncodeDataType(ConvOp op, DataType t);
int EncodeLayout(ConvOp op, Layout l);

struct CkConfig {
  ConvOp op = ConvOp::kFwd;
  int data_type = 1;
  int layout = 3;
  std::optional<int> index_type;  // fwd only: 0 = 32-bit, 1 = 64-bit indexing.
  int verify = 0;
  int init = 1;
  int log = 0;
  int time = 1;
  int num_dim_spatial = 2;
  int64_t G = 1, N = 1, K = 1, C = 1;  // K and C are per group (CK's convention).
  std::vector<int64_t> filter_spatial, input_spatial, strides, dilations, left_pads, right_pads;
  // Backward only: "all" or a decimal integer such as "-1" or "4". Empty for fwd.
  std::string split_k;
  // priority_rank, pytorch_op, description, and any extra keys, in the order they came.
  nlohmann::ordered_json metadata = nlohmann::ordered_json::object();

  // metadata.priority_rank when it is an integer, else 0.
  int64_t priority_rank() const;
  // metadata.description when present, else Describe(*this).
  std::string description() const;
  // Output spatial lengths: (in + lp + rp - dil*(k-1) - 1)/stride + 1 per dimension.
  std::vector<int64_t> OutputSpatial() const;
  // Floating-point operations of the problem: 2*G*N*K*C*prod(out)*prod(filter).
  double Flops() const;
  // Bytes moved (input + weight + output) for an element of `bytes_per_element` bytes.
  double Bytes(int bytes_per_element) const;
};

// "Forward conv: G=32, N=32, K=4, C=4, [3, 3] kernel, [200, 200] input" (likewise
// "Backward data conv:", "Backward weight conv:").
std::string Describe(const CkConfig& c);

// The problem a config measures, as one canonical, readable text: the operation and every
// profiler argument that changes the work (not `log`, nor the metadata). Two configs with the
// same key time the same kernels: "fwd fp16 NHWGC_GKYXC_NHWGK G=1 N=32 K=64 C=64 filter=3x3
// input=56x56 stride=1x1 dilation=1x1 pad=1x1+1x1", with " split_k=all" for backward ones and
// the non-default flags (" index=64bit", " verify", " init=2", " untimed") at the end.
// Reuse (submit --reuse) and the tuning table (ckprof best) group results by it.
std::string ProblemKey(const CkConfig& c);

// The configs-file form of one config, keys in the order conversion.md shows.
nlohmann::ordered_json ConfigToJson(const CkConfig& c);

// Reads one config object. `index` is 0-based; errors name the config 1-based, as tasks and
// records are numbered: index 2 reads "config 3: field profiler_args.strides has 3 entries but
// num_dim_spatial is 2".
Result<CkConfig> ConfigFromJson(const nlohmann::ordered_json& j, size_t index);
// The same, taking the metadata out of `j` instead of copying it.
Result<CkConfig> ConfigFromJson(nlohmann::ordered_json&& j, size_t index);

// Reads a whole configs file (a JSON array of configs). Errors name the config and field.
Result<std::vector<CkConfig>> ConfigsFromJson(const nlohmann::ordered_json& j);

// The whole configs file as text: a JSON array, 2-space indented, as the original tool wrote.
std::string ConfigsToText(const std::vector<CkConfig>& configs);

}  // namespace ckprof

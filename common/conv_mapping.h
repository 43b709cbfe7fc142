// The mapping rules of conversion.md: from one PyTorch convolution call to the CK profiler
// problems that compute it (one forward config, or the backward ones its output_mask asks for;
// transposed convolutions mapped to the equivalent CK problem).
//
// Pure functions of their arguments; any thread may call them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/ck_config.h"
#include "common/conv_call.h"

namespace ckprof {

// Settings of a conversion.
struct ConvertOptions {
  std::optional<DataType> data_type;  // nullopt = auto (from the input tensor's dtype)
  std::optional<Layout> layout;       // nullopt = auto (channels-last strides -> nhwc)
};

// What one call maps to.
struct CallMapping {
  // The CK problems, in the order fwd/bwd_data (output_mask[0]) then bwd_weight
  // (output_mask[1]). Profiler arguments are set; metadata is left empty for the caller.
  std::vector<CkConfig> configs;
  std::string skip_reason;            // why there are no configs ("not a convolution", ...)
  std::vector<std::string> warnings;  // e.g. "unknown dtype \"double\"; using fp16"
};

// Maps one call. Never throws; any malformed argument becomes a skip_reason naming it.
CallMapping MapConvCall(const ConvCall& call, const ConvertOptions& options);

// Data type of a PyTorch dtype string: "c10::Half" -> fp16, "c10::BFloat16" -> bf16,
// "float" -> fp32; nullopt for anything else.
std::optional<DataType> DataTypeFromDtype(std::string_view dtype);

// Whether a tensor's strides say channels-last (NWC, NHWC, NDHWC). `channel_dim` is 1 for a
// batched tensor, 0 for an unbatched one. Strides that are empty or do not fit say no.
bool IsChannelsLast(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                    size_t channel_dim = 1);

}  // namespace ckprof

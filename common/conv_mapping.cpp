#include "common/conv_mapping.h"

#include <algorithm>
#include <limits>

namespace ckprof {
namespace {

constexpr int64_t kMaxLen = std::numeric_limits<int32_t>::max();
constexpr int64_t kIndex32Limit = int64_t{1} << 31;

using ArgKind = ArgValue::Kind;

std::string Quote(std::string_view name) { return "'" + std::string(name) + "'"; }

// a*b, saturating at INT64_MAX (sizes are non-negative).
int64_t SatMul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::numeric_limits<int64_t>::max();
  return r;
}

int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p = SatMul(p, x);
  return p;
}

// The facts the mapping needs about the operator itself.
struct OpTraits {
  int fixed_nd = 0;                 // conv1d/2d/3d: 1, 2, 3; else 0 (from the weight)
  bool backward = false;            // convolution_backward
  bool always_transposed = false;   // the *_transpose ops
  bool has_transposed_arg = false;  // convolution, _convolution, convolution_backward
  bool schema_defaults = false;     // conv1d/2d/3d: stride=1, padding=0, dilation=1, groups=1
};

OpTraits TraitsOf(std::string_view op) {
  OpTraits t;
  if (op == "aten::conv1d") t.fixed_nd = 1;
  if (op == "aten::conv2d") t.fixed_nd = 2;
  if (op == "aten::conv3d") t.fixed_nd = 3;
  t.schema_defaults = t.fixed_nd != 0;
  t.backward = op == "aten::convolution_backward";
  t.always_transposed =
      op == "aten::miopen_convolution_transpose" || op == "aten::cudnn_convolution_transpose";
  t.has_transposed_arg = op == "aten::convolution" || op == "aten::_convolution" || t.backward;
  return t;
}

// Reads arguments of one call; each getter returns an error naming the argument.
class ArgReader {
 public:
  explicit ArgReader(const ConvCall& call) : call_(call) {}

  const ArgValue* Find(std::string_view name) const {
    const ArgValue* v = call_.Find(name);
    return v && v->kind != ArgKind::kNone ? v : nullptr;
  }

  Result<const ArgValue*> Tensor(std::string_view name) const {
    const ArgValue* v = call_.Find(name);
    if (!v || v->kind == ArgKind::kNone) return MakeError("missing argument " + Quote(name));
    if (v->kind != ArgKind::kTensor) {
      return MakeError("argument " + Quote(name) + " must be a tensor, got " + v->ToString());
    }
    for (int64_t d : v->shape) {
      if (d < 0) return MakeError("argument " + Quote(name) + " has a negative size");
    }
    return v;
  }

  Result<int64_t> Int(std::string_view name, std::optional<int64_t> dflt, int64_t min) const {
    const ArgValue* v = Find(name);
    if (!v) {
      if (dflt) return *dflt;
      return MakeError("missing argument " + Quote(name));
    }
    int64_t x = 0;
    if (v->kind == ArgKind::kInt || (v->kind == ArgKind::kIntList && v->ints.size() == 1)) {
      x = v->ints[0];
    } else {
      return MakeError("argument " + Quote(name) + " must be an integer, got " + v->ToString());
    }
    if (x < min || x > kMaxLen) {
      return MakeError("argument " + Quote(name) + " must be at least " + std::to_string(min) +
                       ", got " + std::to_string(x));
    }
    return x;
  }

  Result<bool> Bool(std::string_view name) const {
    const ArgValue* v = Find(name);
    if (!v) return MakeError("missing argument " + Quote(name));
    if (v->kind == ArgKind::kBool) return static_cast<bool>(v->bools[0]);
    if (v->kind == ArgKind::kInt && (v->ints[0] == 0 || v->ints[0] == 1)) return v->ints[0] == 1;
    return MakeError("argument " + Quote(name) + " must be a boolean, got " + v->ToString());
  }

  // A per-dimension list: nd values, one value (or a bare integer) for every dimension.
  Result<std::vector<int64_t>> Spatial(std::string_view name, int nd, std::optional<int64_t> dflt,
                                       int64_t min) const {
    const ArgValue* v = Find(name);
    if (!v) {
      if (dflt) return std::vector<int64_t>(nd, *dflt);
      return MakeError("missing argument " + Quote(name));
    }
    std::vector<int64_t> out;
    if (v->kind == ArgKind::kInt || (v->kind == ArgKind::kIntList && v->ints.size() == 1)) {
      out.assign(nd, v->ints[0]);
    } else if (v->kind == ArgKind::kIntList) {
      if (static_cast<int>(v->ints.size()) != nd) {
        return MakeError("argument " + Quote(name) + " has " + std::to_string(v->ints.size()) +
                         " values for " + std::to_string(nd) + " spatial dimension" +
                         (nd == 1 ? "" : "s"));
      }
      out = v->ints;
    } else {
      return MakeError("argument " + Quote(name) + " must be a list of integers, got " +
                       v->ToString());
    }
    for (int64_t x : out) {
      if (x < min || x > kMaxLen) {
        return MakeError("argument " + Quote(name) + " must hold values of at least " +
                         std::to_string(min) + ", got " + JoinInts(out));
      }
    }
    return out;
  }

  Result<std::vector<bool>> Mask(std::string_view name) const {
    const ArgValue* v = Find(name);
    if (!v) return MakeError("missing argument " + Quote(name));
    if (v->kind == ArgKind::kBoolList && (v->bools.size() == 3 || v->bools.size() == 2)) {
      return v->bools;
    }
    if (v->kind == ArgKind::kIntList && (v->ints.size() == 3 || v->ints.size() == 2)) {
      std::vector<bool> out;
      for (int64_t x : v->ints) {
        if (x != 0 && x != 1) break;
        out.push_back(x == 1);
      }
      if (out.size() == v->ints.size()) return out;
    }
    return MakeError("argument " + Quote(name) + " must be a list of 3 booleans, got " +
                     v->ToString());
  }

 private:
  const ConvCall& call_;
};

// Fills a config for one CK operation of the problem `p` (op, data type, layout set here).
CkConfig MakeConfig(const CkConfig& p, ConvOp op, DataType dt, Layout layout) {
  CkConfig c = p;
  c.op = op;
  c.data_type = EncodeDataType(op, dt);
  c.layout = EncodeLayout(op, layout);
  if (op == ConvOp::kFwd) {
    int64_t in = SatMul(SatMul(SatMul(c.N, c.G), c.C), Product(c.input_spatial));
    int64_t wei = SatMul(SatMul(SatMul(c.G, c.K), c.C), Product(c.filter_spatial));
    int64_t out = SatMul(SatMul(SatMul(c.N, c.G), c.K), Product(c.OutputSpatial()));
    c.index_type = (in >= kIndex32Limit || wei >= kIndex32Limit || out >= kIndex32Limit) ? 1 : 0;
    c.split_k.clear();
  } else {
    c.index_type.reset();
    c.split_k = "all";
  }
  return c;
}

CallMapping Skip(std::string reason) {
  CallMapping m;
  m.skip_reason = std::move(reason);
  return m;
}

}  // namespace

std::optional<DataType> DataTypeFromDtype(std::string_view dtype) {
  if (dtype == "c10::Half") return DataType::kFp16;
  if (dtype == "c10::BFloat16") return DataType::kBf16;
  if (dtype == "float") return DataType::kFp32;
  return std::nullopt;
}

bool IsChannelsLast(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                    size_t channel_dim) {
  const size_t rank = shape.size();
  if (strides.size() != rank || channel_dim >= rank || rank < channel_dim + 2) return false;
  // Row-major (NCHW) strides, and channels-last strides: channel innermost, then the spatial
  // dimensions, then the batch.
  std::vector<int64_t> contiguous(rank), channels_last(rank);
  int64_t s = 1;
  for (size_t i = rank; i-- > 0;) {
    contiguous[i] = s;
    s = SatMul(s, std::max<int64_t>(shape[i], 1));
  }
  s = 1;
  channels_last[channel_dim] = s;
  s = SatMul(s, std::max<int64_t>(shape[channel_dim], 1));
  for (size_t i = rank; i-- > channel_dim + 1;) {
    channels_last[i] = s;
    s = SatMul(s, std::max<int64_t>(shape[i], 1));
  }
  for (size_t i = channel_dim; i-- > 0;) {
    channels_last[i] = s;
    s = SatMul(s, std::max<int64_t>(shape[i], 1));
  }
  if (strides == contiguous) return false;
  if (strides == channels_last) return true;
  // Neither exactly (a view): channels-last when the channel stride is the smallest among
  // the dimensions that matter.
  if (shape[channel_dim] <= 1) return false;
  for (size_t i = channel_dim + 1; i < rank; ++i) {
    if (shape[i] > 1 && strides[i] <= strides[channel_dim]) return false;
  }
  return true;
}

CallMapping MapConvCall(const ConvCall& call, const ConvertOptions& options) {
  const std::string& op = call.op_name;
  if (!IsConvOpName(op)) return Skip("not a convolution");
  const OpTraits traits = TraitsOf(op);
  ArgReader args(call);

  // Tensors: the input is "input" (convolution, conv*d, convolution_backward) or "self"
  // (the miopen_* and cudnn_* ops); accept either name.
  std::string_view input_name = "input";
  if (!traits.backward) {
    input_name = (*ConvOpSchema(op))[0];
    std::string_view alt = input_name == "input" ? "self" : "input";
    if (!args.Find(input_name) && args.Find(alt)) input_name = alt;
  }
  auto input = args.Tensor(input_name);
  if (!input) return Skip(input.error());
  auto weight = args.Tensor("weight");
  if (!weight) return Skip(weight.error());
  const ArgValue* grad_output = nullptr;
  if (traits.backward) {
    auto g = args.Tensor("grad_output");
    if (!g) return Skip(g.error());
    grad_output = *g;
  }
  const std::vector<int64_t>& in_shape = (*input)->shape;
  const std::vector<int64_t>& w_shape = (*weight)->shape;

  // Dimensionality from the weight: [K, C/G, *filter].
  const int w_rank = static_cast<int>(w_shape.size());
  const int nd = w_rank - 2;
  if (traits.fixed_nd && nd != traits.fixed_nd) {
    return Skip("weight has " + std::to_string(w_rank) + " dimensions; " + op + " needs " +
                std::to_string(traits.fixed_nd + 2));
  }
  if (nd < 1 || nd > 3) {
    return Skip("unsupported dimensionality: weight has " + std::to_string(w_rank) +
                " dimensions (CK handles 1-D, 2-D and 3-D convolutions)");
  }
  const int in_rank = static_cast<int>(in_shape.size());
  const bool unbatched = traits.fixed_nd && in_rank == nd + 1;
  if (in_rank != nd + 2 && !unbatched) {
    return Skip("input has " + std::to_string(in_rank) + " dimensions but weight has " +
                std::to_string(w_rank));
  }
  if (grad_output && static_cast<int>(grad_output->shape.size()) != nd + 2) {
    return Skip("grad_output has " + std::to_string(grad_output->shape.size()) +
                " dimensions but weight has " + std::to_string(w_rank));
  }

  // Scalar arguments.
  bool transposed = traits.always_transposed;
  if (traits.has_transposed_arg) {
    auto t = args.Bool("transposed");
    if (!t) return Skip(t.error());
    transposed = *t;
  }
  const std::optional<int64_t> one =
      traits.schema_defaults ? std::optional<int64_t>(1) : std::nullopt;
  const std::optional<int64_t> zero =
      traits.schema_defaults ? std::optional<int64_t>(0) : std::nullopt;
  auto groups = args.Int("groups", one, 1);
  if (!groups) return Skip(groups.error());
  auto stride = args.Spatial("stride", nd, one, 1);
  if (!stride) return Skip(stride.error());
  auto dilation = args.Spatial("dilation", nd, one, 1);
  if (!dilation) return Skip(dilation.error());
  std::vector<int64_t> filter(w_shape.begin() + 2, w_shape.end());
  std::vector<int64_t> left_pads, right_pads;
  const ArgValue* pad_arg = args.Find("padding");
  if (traits.fixed_nd && pad_arg && pad_arg->kind == ArgKind::kString) {
    // conv*d's string padding.
    if (pad_arg->text == "valid") {
      left_pads.assign(nd, 0);
      right_pads.assign(nd, 0);
    } else if (pad_arg->text == "same") {
      for (int i = 0; i < nd; ++i) {
        if ((*stride)[i] != 1) return Skip("padding='same' needs stride 1");
        int64_t total = SatMul((*dilation)[i], std::max<int64_t>(filter[i] - 1, 0));
        left_pads.push_back(total / 2);
        right_pads.push_back(total - total / 2);
      }
    } else {
      return Skip("argument 'padding' must be a list of integers, \"same\" or \"valid\", got " +
                  pad_arg->ToString());
    }
  } else {
    auto padding = args.Spatial("padding", nd, zero, 0);
    if (!padding) return Skip(padding.error());
    left_pads = right_pads = *padding;
  }
  std::vector<int64_t> output_padding(nd, 0);
  if (transposed) {
    auto op_pad = args.Spatial("output_padding", nd, std::nullopt, 0);
    if (!op_pad) return Skip(op_pad.error());
    output_padding = *op_pad;
  }
  std::vector<bool> mask;
  if (traits.backward) {
    auto m = args.Mask("output_mask");
    if (!m) return Skip(m.error());
    mask = *m;
  }

  // Sizes.
  for (int64_t d : in_shape) {
    if (d == 0) return Skip("the input is empty (shape " + JoinInts(in_shape) + ")");
  }
  for (int64_t d : w_shape) {
    if (d == 0) return Skip("the weight is empty (shape " + JoinInts(w_shape) + ")");
  }
  for (const auto* shape : {&in_shape, &w_shape}) {
    for (int64_t d : *shape) {
      if (d > kMaxLen) return Skip("sizes exceed CK's 32-bit lengths");
    }
  }
  if (grad_output) {
    for (int64_t d : grad_output->shape) {
      if (d > kMaxLen) return Skip("sizes exceed CK's 32-bit lengths");
    }
  }
  const int64_t G = *groups;
  const int64_t N = unbatched ? 1 : in_shape[0];
  const size_t ch = unbatched ? 0 : 1;
  const int64_t channels = in_shape[ch];
  std::vector<int64_t> in_spatial(in_shape.begin() + static_cast<std::ptrdiff_t>(ch) + 1,
                                  in_shape.end());
  if (channels % G != 0) {
    return Skip("input channels (" + std::to_string(channels) + ") are not divisible by groups (" +
                std::to_string(G) + ")");
  }
  CkConfig p;
  p.num_dim_spatial = nd;
  p.G = G;
  p.N = N;
  p.filter_spatial = filter;
  p.strides = *stride;
  p.dilations = *dilation;
  p.left_pads = left_pads;
  p.right_pads = right_pads;
  if (!transposed) {
    if (w_shape[0] % G != 0) {
      return Skip("output channels (" + std::to_string(w_shape[0]) +
                  ") are not divisible by groups (" + std::to_string(G) + ")");
    }
    if (w_shape[1] != channels / G) {
      return Skip("weight has " + std::to_string(w_shape[1]) +
                  " input channels per group; the input's " + std::to_string(channels) +
                  " channels in " + std::to_string(G) + " groups need " +
                  std::to_string(channels / G));
    }
    p.C = channels / G;
    p.K = w_shape[0] / G;
    p.input_spatial = in_spatial;
  } else {
    // Transposed: weight [C_in, C_out/G, *filter]; CK sees the convolution whose gradient
    // this is, with K = C_in/G, C = C_out/G and the transposed convolution's output as input.
    if (w_shape[0] != channels) {
      return Skip("weight has " + std::to_string(w_shape[0]) +
                  " input channels but the transposed convolution's input has " +
                  std::to_string(channels));
    }
    p.K = channels / G;
    p.C = w_shape[1];
    if (grad_output) {
      p.input_spatial.assign(grad_output->shape.begin() + 2, grad_output->shape.end());
      for (int64_t d : p.input_spatial) {
        if (d == 0)
          return Skip("grad_output is empty (shape " + JoinInts(grad_output->shape) + ")");
      }
    } else {
      for (int i = 0; i < nd; ++i) {
        // (in - 1)*stride - 2*pad + dilation*(k - 1) + output_padding + 1. Lengths are below
        // 2^31, so each product is below 2^62; only the final sum can overflow.
        int64_t out = (in_spatial[i] - 1) * p.strides[i] - left_pads[i] - right_pads[i] +
                      output_padding[i] + 1;
        if (__builtin_add_overflow(out, p.dilations[i] * (filter[i] - 1), &out)) {
          return Skip("sizes exceed CK's 32-bit lengths");
        }
        if (out <= 0) return Skip("the output would be empty");
        p.input_spatial.push_back(out);
      }
    }
  }
  for (int64_t o : p.OutputSpatial()) {
    if (o <= 0) return Skip("the output would be empty");
  }
  for (int i = 0; i < nd; ++i) {
    int64_t padded = p.input_spatial[i] + p.left_pads[i] + p.right_pads[i];
    if (padded < p.dilations[i] * (filter[i] - 1) + 1) return Skip("the output would be empty");
  }
  for (int64_t v : {p.G, p.N, p.K, p.C}) {
    if (v > kMaxLen) return Skip("sizes exceed CK's 32-bit lengths");
  }
  for (const auto* list : {&p.filter_spatial, &p.input_spatial, &p.left_pads, &p.right_pads}) {
    for (int64_t v : *list) {
      if (v > kMaxLen) return Skip("sizes exceed CK's 32-bit lengths");
    }
  }

  // Which CK operations.
  std::vector<ConvOp> ops;
  if (!traits.backward) {
    ops.push_back(transposed ? ConvOp::kBwdData : ConvOp::kFwd);
  } else {
    if (mask[0]) ops.push_back(transposed ? ConvOp::kFwd : ConvOp::kBwdData);
    if (mask[1]) ops.push_back(ConvOp::kBwdWeight);
    if (ops.empty()) {
      return Skip("output_mask " + ArgValue::BoolList(mask).ToString() +
                  " asks for neither the input nor the weight gradient");
    }
  }

  CallMapping m;
  const ArgValue& in = **input;
  DataType dt = DataType::kFp16;
  if (options.data_type) {
    dt = *options.data_type;
  } else if (auto d = DataTypeFromDtype(in.dtype)) {
    dt = *d;
  } else {
    m.warnings.push_back("unknown dtype \"" + in.dtype + "\"; using fp16");
  }
  Layout layout = options.layout.value_or(IsChannelsLast(in.shape, in.strides, ch) ? Layout::kNhwc
                                                                                   : Layout::kNchw);
  for (ConvOp o : ops) m.configs.push_back(MakeConfig(p, o, dt, layout));
  return m;
}

}  // namespace ckprof

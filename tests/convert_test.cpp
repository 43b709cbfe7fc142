// Unit tests of the conversion rules (docs: shared conversion.md): every op, transposed,
// grouped and depthwise convolutions, dtype and layout detection, bad records, format
// detection, errors, the console report and the configs file text.
#include "common/convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/conv_mapping.h"
#include "common/file_util.h"
#include "common/json_util.h"

namespace ckprof {
namespace {

using Json = nlohmann::ordered_json;

std::string List(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// A config's profiler arguments in one line, to compare exactly:
// "fwd dt=2 lay=3 idx=0 G=1 N=10 K=64 C=64 f=[3,3] in=[56,56] s=[1,1] d=[1,1] p=[1,1]/[1,1]".
std::string Sig(const CkConfig& c) {
  std::string s = std::string(ShortOpName(c.op)) + " dt=" + std::to_string(c.data_type) +
                  " lay=" + std::to_string(c.layout);
  if (c.op == ConvOp::kFwd) s += " idx=" + std::to_string(c.index_type.value_or(-1));
  s += " G=" + std::to_string(c.G) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
       " C=" + std::to_string(c.C) + " f=" + List(c.filter_spatial) +
       " in=" + List(c.input_spatial) + " s=" + List(c.strides) + " d=" + List(c.dilations) +
       " p=" + List(c.left_pads) + "/" + List(c.right_pads);
  if (c.op != ConvOp::kFwd) s += " k=" + c.split_k;
  if (static_cast<int>(c.filter_spatial.size()) != c.num_dim_spatial) s += " BAD-ND";
  return s;
}

// Strides of a contiguous (or channels-last) tensor.
std::vector<int64_t> Strides(const std::vector<int64_t>& shape, bool channels_last = false) {
  std::vector<int64_t> st(shape.size());
  int64_t s = 1;
  if (channels_last) {
    st[1] = 1;
    s = shape[1];
    for (size_t i = shape.size(); i-- > 2;) {
      st[i] = s;
      s *= shape[i];
    }
    st[0] = s;
    return st;
  }
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = s;
    s *= shape[i];
  }
  return st;
}

Json T(const std::vector<int64_t>& shape, const char* dtype = "c10::BFloat16",
       bool channels_last = false) {
  return Json{{"shape", shape},
              {"dtype", dtype},
              {"strides", Strides(shape, channels_last)},
              {"init", "normal"}};
}

// An IR record: op name and (name, value) arguments in list_pos_args.
Json Rec(const std::string& op, std::vector<std::pair<std::string, Json>> args) {
  Json pos = Json::array();
  for (auto& [n, v] : args) pos.push_back(Json{{"arg_name", n}, {"arg_type", "x"}, {"value", v}});
  return Json{{"op_name", op},
              {"replay_ir", {{"list_pos_args", pos}, {"list_kwargs", Json::array()}}}};
}

Json Ints(std::initializer_list<int64_t> v) { return Json(std::vector<int64_t>(v)); }
Json Bools(std::initializer_list<bool> v) {
  Json j = Json::array();
  for (bool b : v) j.push_back(b);
  return j;
}

Json Miopen(Json input, Json weight, Json padding, Json stride, Json dilation, int64_t groups,
            const std::string& op = "aten::miopen_convolution") {
  return Rec(op, {{"self", input},
                  {"weight", weight},
                  {"bias", nullptr},
                  {"padding", padding},
                  {"stride", stride},
                  {"dilation", dilation},
                  {"groups", groups},
                  {"benchmark", false},
                  {"deterministic", false}});
}

Json Backward(Json grad_output, Json input, Json weight, Json stride, Json padding, bool transposed,
              Json output_padding, int64_t groups, Json mask) {
  return Rec("aten::convolution_backward", {{"grad_output", grad_output},
                                            {"input", input},
                                            {"weight", weight},
                                            {"bias_sizes", Ints({0})},
                                            {"stride", stride},
                                            {"padding", padding},
                                            {"dilation", Ints({1, 1})},
                                            {"transposed", transposed},
                                            {"output_padding", output_padding},
                                            {"groups", groups},
                                            {"output_mask", mask}});
}

// Converts one IR record and returns the configs' signatures, or "skip: <reason>". The record
// goes second in the list, after a record that is not a convolution, so that even a malformed
// record leaves the list recognisable as a replay-IR list.
std::vector<std::string> ConvertOne(const Json& record, ConvertOptions options = {}) {
  const Json other = Json{{"op_name", "aten::relu"}};
  auto conv = ConvertText(Json::array({other, record}).dump(), options);
  EXPECT_TRUE(conv.ok()) << conv.error();
  if (!conv.ok()) return {"error: " + conv.error()};
  EXPECT_EQ(conv->records.size(), 2u);
  EXPECT_EQ(conv->records[1].position, 2u);
  std::vector<std::string> out;
  if (conv->records[1].produced.empty()) return {"skip: " + conv->records[1].skip_reason};
  for (const auto& c : conv->configs) {
    EXPECT_EQ(c.priority_rank(), 2);
    out.push_back(Sig(c));
  }
  return out;
}

TEST(ConvertMapping, EveryOperation) {
  const Json x = T({10, 256, 14, 14}), w = T({512, 256, 3, 3});
  struct Case {
    const char* name;
    Json record;
    std::vector<std::string> expected;
  } cases[] = {
      {"miopen_convolution (padding before stride)",
       Miopen(x, w, Ints({1, 1}), Ints({2, 2}), Ints({1, 1}), 1),
       {"fwd dt=2 lay=3 idx=0 G=1 N=10 K=512 C=256 f=[3,3] in=[14,14] s=[2,2] d=[1,1] "
        "p=[1,1]/[1,1]"}},
      {"cudnn_convolution (no bias)",
       Rec("aten::cudnn_convolution", {{"self", T({4, 3, 224, 224})},
                                       {"weight", T({768, 3, 16, 16})},
                                       {"padding", Ints({0, 0})},
                                       {"stride", Ints({16, 16})},
                                       {"dilation", Ints({1, 1})},
                                       {"groups", 1},
                                       {"benchmark", false},
                                       {"deterministic", false},
                                       {"allow_tf32", true}}),
       {"fwd dt=2 lay=3 idx=0 G=1 N=4 K=768 C=3 f=[16,16] in=[224,224] s=[16,16] d=[1,1] "
        "p=[0,0]/[0,0]"}},
      {"convolution (stride before padding)",
       Rec("aten::convolution", {{"input", x},
                                 {"weight", w},
                                 {"bias", nullptr},
                                 {"stride", Ints({2, 1})},
                                 {"padding", Ints({0, 1})},
                                 {"dilation", Ints({1, 2})},
                                 {"transposed", false},
                                 {"output_padding", Ints({0, 0})},
                                 {"groups", 1}}),
       {"fwd dt=2 lay=3 idx=0 G=1 N=10 K=512 C=256 f=[3,3] in=[14,14] s=[2,1] d=[1,2] "
        "p=[0,1]/[0,1]"}},
      {"_convolution",
       Rec("aten::_convolution", {{"input", x},
                                  {"weight", w},
                                  {"bias", nullptr},
                                  {"stride", Ints({1, 1})},
                                  {"padding", Ints({1, 1})},
                                  {"dilation", Ints({1, 1})},
                                  {"transposed", false},
                                  {"output_padding", Ints({0, 0})},
                                  {"groups", 1},
                                  {"benchmark", false},
                                  {"deterministic", false},
                                  {"cudnn_enabled", true},
                                  {"allow_tf32", true}}),
       {"fwd dt=2 lay=3 idx=0 G=1 N=10 K=512 C=256 f=[3,3] in=[14,14] s=[1,1] d=[1,1] "
        "p=[1,1]/[1,1]"}},
      {"conv1d",
       Rec("aten::conv1d", {{"input", T({8, 16, 100}, "c10::Half")},
                            {"weight", T({32, 16, 5})},
                            {"bias", nullptr},
                            {"stride", Ints({2})},
                            {"padding", Ints({2})},
                            {"dilation", Ints({1})},
                            {"groups", 1}}),
       {"fwd dt=1 lay=3 idx=0 G=1 N=8 K=32 C=16 f=[5] in=[100] s=[2] d=[1] p=[2]/[2]"}},
      {"conv2d with schema defaults",
       Rec("aten::conv2d", {{"input", T({2, 8, 10, 12}, "float")}, {"weight", T({4, 8, 3, 3})}}),
       {"fwd dt=0 lay=3 idx=0 G=1 N=2 K=4 C=8 f=[3,3] in=[10,12] s=[1,1] d=[1,1] "
        "p=[0,0]/[0,0]"}},
      {"conv3d",
       Rec("aten::conv3d", {{"input", T({1, 4, 8, 16, 16})},
                            {"weight", T({8, 4, 3, 3, 3})},
                            {"bias", nullptr},
                            {"stride", Ints({1, 2, 2})},
                            {"padding", Ints({1, 1, 1})},
                            {"dilation", Ints({1, 1, 1})},
                            {"groups", 1}}),
       {"fwd dt=2 lay=3 idx=0 G=1 N=1 K=8 C=4 f=[3,3,3] in=[8,16,16] s=[1,2,2] d=[1,1,1] "
        "p=[1,1,1]/[1,1,1]"}},
      {"conv2d unbatched input",
       Rec("aten::conv2d", {{"input", T({3, 32, 32})},
                            {"weight", T({16, 3, 5, 5})},
                            {"bias", nullptr},
                            {"stride", Ints({1, 1})},
                            {"padding", Ints({2, 2})},
                            {"dilation", Ints({1, 1})},
                            {"groups", 1}}),
       {"fwd dt=2 lay=3 idx=0 G=1 N=1 K=16 C=3 f=[5,5] in=[32,32] s=[1,1] d=[1,1] "
        "p=[2,2]/[2,2]"}},
      {"conv2d padding='same' (even kernel pads more on the right)",
       Rec("aten::conv2d", {{"input", T({1, 4, 9, 9})},
                            {"weight", T({4, 4, 4, 3})},
                            {"bias", nullptr},
                            {"stride", Ints({1, 1})},
                            {"padding", "same"},
                            {"dilation", Ints({1, 2})},
                            {"groups", 1}}),
       {"fwd dt=2 lay=3 idx=0 G=1 N=1 K=4 C=4 f=[4,3] in=[9,9] s=[1,1] d=[1,2] "
        "p=[1,2]/[2,2]"}},
      {"conv2d padding='valid'",
       Rec("aten::conv2d",
           {{"input", T({1, 4, 9, 9})}, {"weight", T({4, 4, 3, 3})}, {"padding", "valid"}}),
       {"fwd dt=2 lay=3 idx=0 G=1 N=1 K=4 C=4 f=[3,3] in=[9,9] s=[1,1] d=[1,1] "
        "p=[0,0]/[0,0]"}},
      {"one-element lists and bare integers apply to every dimension",
       Miopen(T({2, 8, 20, 20}), T({8, 8, 3, 3}), Ints({1}), 2, Ints({1}), 1),
       {"fwd dt=2 lay=3 idx=0 G=1 N=2 K=8 C=8 f=[3,3] in=[20,20] s=[2,2] d=[1,1] "
        "p=[1,1]/[1,1]"}},
      {"1-D and 3-D through miopen_convolution",
       Miopen(T({2, 6, 50}), T({12, 6, 7}), Ints({3}), Ints({1}), Ints({1}), 1),
       {"fwd dt=2 lay=3 idx=0 G=1 N=2 K=12 C=6 f=[7] in=[50] s=[1] d=[1] p=[3]/[3]"}},
  };
  for (const auto& tc : cases) {
    EXPECT_EQ(ConvertOne(tc.record), tc.expected) << tc.name;
  }
}

TEST(ConvertMapping, GroupedAndDepthwise) {
  struct Case {
    const char* name;
    Json record;
    std::vector<std::string> expected;
  } cases[] = {
      {"grouped: K and C per group",
       Miopen(T({8, 64, 14, 14}), T({128, 16, 3, 3}), Ints({1, 1}), Ints({1, 1}), Ints({1, 1}), 4),
       {"fwd dt=2 lay=3 idx=0 G=4 N=8 K=32 C=16 f=[3,3] in=[14,14] s=[1,1] d=[1,1] "
        "p=[1,1]/[1,1]"}},
      {"depthwise",
       Miopen(T({2, 32, 28, 28}), T({32, 1, 3, 3}), Ints({1, 1}), Ints({1, 1}), Ints({1, 1}), 32,
              "aten::miopen_depthwise_convolution"),
       {"fwd dt=2 lay=3 idx=0 G=32 N=2 K=1 C=1 f=[3,3] in=[28,28] s=[1,1] d=[1,1] "
        "p=[1,1]/[1,1]"}},
      {"depthwise with multiplier 2",
       Miopen(T({2, 32, 28, 28}), T({64, 1, 3, 3}), Ints({1, 1}), Ints({2, 2}), Ints({1, 1}), 32,
              "aten::miopen_depthwise_convolution"),
       {"fwd dt=2 lay=3 idx=0 G=32 N=2 K=2 C=1 f=[3,3] in=[28,28] s=[2,2] d=[1,1] "
        "p=[1,1]/[1,1]"}},
      {"grouped backward",
       Backward(T({4, 64, 7, 7}), T({4, 32, 7, 7}), T({64, 8, 3, 3}), Ints({1, 1}), Ints({1, 1}),
                false, Ints({0, 0}), 4, Bools({true, true, false})),
       {"bwd_data dt=2 lay=3 G=4 N=4 K=16 C=8 f=[3,3] in=[7,7] s=[1,1] d=[1,1] p=[1,1]/[1,1] "
        "k=all",
        "bwd_weight dt=5 lay=4 G=4 N=4 K=16 C=8 f=[3,3] in=[7,7] s=[1,1] d=[1,1] p=[1,1]/[1,1] "
        "k=all"}},
  };
  for (const auto& tc : cases) EXPECT_EQ(ConvertOne(tc.record), tc.expected) << tc.name;
}

TEST(ConvertMapping, BackwardFollowsOutputMask) {
  const Json go = T({10, 64, 56, 56}), x = T({10, 64, 56, 56}), w = T({64, 64, 3, 3});
  const std::string data =
      "bwd_data dt=2 lay=3 G=1 N=10 K=64 C=64 f=[3,3] in=[56,56] s=[1,1] d=[1,1] p=[1,1]/[1,1] "
      "k=all";
  const std::string weight =
      "bwd_weight dt=5 lay=4 G=1 N=10 K=64 C=64 f=[3,3] in=[56,56] s=[1,1] d=[1,1] "
      "p=[1,1]/[1,1] k=all";
  struct Case {
    Json mask;
    std::vector<std::string> expected;
  } cases[] = {
      {Bools({true, true, false}), {data, weight}},
      {Bools({true, true, true}), {data, weight}},
      {Bools({false, true, true}), {weight}},
      {Bools({true, false, false}), {data}},
      {Bools({false, false, true}),
       {"skip: output_mask [False, False, True] asks for neither the input nor the weight "
        "gradient"}},
  };
  for (const auto& tc : cases) {
    EXPECT_EQ(
        ConvertOne(Backward(go, x, w, Ints({1, 1}), Ints({1, 1}), false, Ints({0, 0}), 1, tc.mask)),
        tc.expected)
        << tc.mask.dump();
  }
}

TEST(ConvertMapping, TransposedMapsToEquivalentProblem) {
  struct Case {
    const char* name;
    Json record;
    std::vector<std::string> expected;
  } cases[] = {
      // out = (7-1)*2 - 2*1 + 1*(4-1) + 0 + 1 = 14
      {"miopen_convolution_transpose -> bwd_data",
       Rec("aten::miopen_convolution_transpose", {{"self", T({2, 64, 7, 7})},
                                                  {"weight", T({64, 32, 4, 4})},
                                                  {"bias", nullptr},
                                                  {"padding", Ints({1, 1})},
                                                  {"output_padding", Ints({0, 0})},
                                                  {"stride", Ints({2, 2})},
                                                  {"dilation", Ints({1, 1})},
                                                  {"groups", 1},
                                                  {"benchmark", false},
                                                  {"deterministic", false}}),
       {"bwd_data dt=2 lay=3 G=1 N=2 K=64 C=32 f=[4,4] in=[14,14] s=[2,2] d=[1,1] "
        "p=[1,1]/[1,1] k=all"}},
      // grouped: K = 8/2, C = weight[1] = 3; out = (5-1)*1 - 0 + 2 + 0 + 1 = 7
      {"cudnn_convolution_transpose grouped",
       Rec("aten::cudnn_convolution_transpose", {{"self", T({1, 8, 5, 5}, "c10::Half")},
                                                 {"weight", T({8, 3, 3, 3})},
                                                 {"padding", Ints({0, 0})},
                                                 {"output_padding", Ints({0, 0})},
                                                 {"stride", Ints({1, 1})},
                                                 {"dilation", Ints({1, 1})},
                                                 {"groups", 2},
                                                 {"benchmark", false},
                                                 {"deterministic", false},
                                                 {"allow_tf32", true}}),
       {"bwd_data dt=1 lay=3 G=2 N=1 K=4 C=3 f=[3,3] in=[7,7] s=[1,1] d=[1,1] p=[0,0]/[0,0] "
        "k=all"}},
      // out = (10-1)*2 - 2 + 2 + 1 + 1 = 20 (output_padding 1), 1-D
      {"convolution transposed=true with output_padding",
       Rec("aten::convolution", {{"input", T({3, 16, 10})},
                                 {"weight", T({16, 8, 3})},
                                 {"bias", nullptr},
                                 {"stride", Ints({2})},
                                 {"padding", Ints({1})},
                                 {"dilation", Ints({1})},
                                 {"transposed", true},
                                 {"output_padding", Ints({1})},
                                 {"groups", 1}}),
       {"bwd_data dt=2 lay=3 G=1 N=3 K=16 C=8 f=[3] in=[20] s=[2] d=[1] p=[1]/[1] k=all"}},
      // Its backward: grad_output is the transposed conv's output [2, 32, 14, 14].
      {"convolution_backward transposed -> fwd + bwd_weight",
       Backward(T({2, 32, 14, 14}), T({2, 64, 7, 7}), T({64, 32, 4, 4}), Ints({2, 2}), Ints({1, 1}),
                true, Ints({0, 0}), 1, Bools({true, true, false})),
       {"fwd dt=2 lay=3 idx=0 G=1 N=2 K=64 C=32 f=[4,4] in=[14,14] s=[2,2] d=[1,1] "
        "p=[1,1]/[1,1]",
        "bwd_weight dt=5 lay=4 G=1 N=2 K=64 C=32 f=[4,4] in=[14,14] s=[2,2] d=[1,1] "
        "p=[1,1]/[1,1] k=all"}},
  };
  for (const auto& tc : cases) EXPECT_EQ(ConvertOne(tc.record), tc.expected) << tc.name;
}

TEST(ConvertMapping, DataTypeDetectionAndOverride) {
  auto fwd_bwd = [](const char* dtype) {
    return Backward(T({1, 8, 8, 8}, dtype), T({1, 8, 8, 8}, dtype), T({8, 8, 1, 1}, dtype),
                    Ints({1, 1}), Ints({0, 0}), false, Ints({0, 0}), 1, Bools({true, true, false}));
  };
  struct Case {
    const char* dtype;
    std::optional<DataType> forced;
    int bwd_data, bwd_weight;
    bool warns;
  } cases[] = {
      {"c10::Half", std::nullopt, 1, 1, false},    {"c10::BFloat16", std::nullopt, 2, 5, false},
      {"float", std::nullopt, 0, 0, false},        {"double", std::nullopt, 1, 1, true},
      {"c10::Half", DataType::kBf16, 2, 5, false}, {"double", DataType::kFp32, 0, 0, false},
  };
  for (const auto& tc : cases) {
    ConvertOptions opts;
    opts.data_type = tc.forced;
    auto conv = ConvertText(Json::array({fwd_bwd(tc.dtype)}).dump(), opts);
    ASSERT_TRUE(conv.ok()) << conv.error();
    ASSERT_EQ(conv->configs.size(), 2u) << tc.dtype;
    EXPECT_EQ(conv->configs[0].data_type, tc.bwd_data) << tc.dtype;
    EXPECT_EQ(conv->configs[1].data_type, tc.bwd_weight) << tc.dtype;
    EXPECT_EQ(conv->warnings.size(), tc.warns ? 1u : 0u) << tc.dtype;
    if (tc.warns) {
      EXPECT_EQ(conv->warnings[0],
                "record 1 (aten::convolution_backward): unknown dtype \"double\"; using fp16");
    }
  }
  // A forward op: fp32 is 0, bf16 2.
  EXPECT_EQ(ConvertOne(Miopen(T({1, 4, 4, 4}, "float"), T({4, 4, 1, 1}), 0, 1, 1, 1)),
            std::vector<std::string>{"fwd dt=0 lay=3 idx=0 G=1 N=1 K=4 C=4 f=[1,1] in=[4,4] "
                                     "s=[1,1] d=[1,1] p=[0,0]/[0,0]"});
}

TEST(ConvertMapping, LayoutDetectionAndOverride) {
  auto rec = [](bool channels_last) {
    return Backward(T({2, 16, 8, 8}, "c10::Half", channels_last),
                    T({2, 16, 8, 8}, "c10::Half", channels_last), T({16, 16, 3, 3}), Ints({1, 1}),
                    Ints({1, 1}), false, Ints({0, 0}), 1, Bools({true, true, false}));
  };
  struct Case {
    bool channels_last;
    std::optional<Layout> forced;
    int bwd_data, bwd_weight;
  } cases[] = {
      {false, std::nullopt, 3, 4},
      {true, std::nullopt, 1, 2},
      {true, Layout::kNchw, 3, 4},
      {false, Layout::kNhwc, 1, 2},
  };
  for (const auto& tc : cases) {
    ConvertOptions opts;
    opts.layout = tc.forced;
    auto conv = ConvertText(Json::array({rec(tc.channels_last)}).dump(), opts);
    ASSERT_TRUE(conv.ok()) << conv.error();
    ASSERT_EQ(conv->configs.size(), 2u);
    EXPECT_EQ(conv->configs[0].layout, tc.bwd_data) << tc.channels_last;
    EXPECT_EQ(conv->configs[1].layout, tc.bwd_weight) << tc.channels_last;
  }
  // Forward channels-last: layout 1.
  EXPECT_EQ(ConvertOne(Miopen(T({1, 4, 6, 6}, "c10::Half", true), T({4, 4, 1, 1}), 0, 1, 1, 1)),
            std::vector<std::string>{"fwd dt=1 lay=1 idx=0 G=1 N=1 K=4 C=4 f=[1,1] in=[6,6] "
                                     "s=[1,1] d=[1,1] p=[0,0]/[0,0]"});
}

TEST(ConvertMapping, ChannelsLastStrides) {
  struct Case {
    std::vector<int64_t> shape, strides;
    bool expected;
  } cases[] = {
      {{2, 16, 8, 8}, {1024, 64, 8, 1}, false},       // NCHW contiguous
      {{2, 16, 8, 8}, {1024, 1, 128, 16}, true},      // NHWC
      {{2, 1, 8, 8}, {64, 1, 8, 1}, true},            // C = 1, channels_last as PyTorch makes it
      {{2, 16, 1, 1}, {16, 1, 16, 16}, true},         // 1x1 spatial channels-last
      {{2, 16, 1, 1}, {16, 1, 1, 1}, false},          // 1x1 spatial contiguous
      {{2, 16, 50}, {800, 1, 16}, true},              // NWC
      {{2, 4, 3, 5, 5}, {300, 1, 100, 20, 4}, true},  // NDHWC
      {{2, 16, 8, 8}, {}, false},                     // unknown strides
      {{2, 16, 8, 8}, {2048, 1, 256, 32}, true},      // a channels-last view (sliced channels)
  };
  for (const auto& tc : cases) {
    EXPECT_EQ(IsChannelsLast(tc.shape, tc.strides), tc.expected) << List(tc.strides);
  }
}

TEST(ConvertMapping, IndexTypeForLargeTensors) {
  // Input 64*256*512*512 = 2^32 elements: 64-bit indexing.
  EXPECT_EQ(ConvertOne(Miopen(T({64, 256, 512, 512}), T({256, 256, 3, 3}), 1, 1, 1, 1)),
            std::vector<std::string>{"fwd dt=2 lay=3 idx=1 G=1 N=64 K=256 C=256 f=[3,3] "
                                     "in=[512,512] s=[1,1] d=[1,1] p=[1,1]/[1,1]"});
  // Output alone reaches 2^31 (input 2^30): still 1.
  EXPECT_EQ(ConvertOne(Miopen(T({64, 64, 512, 512}), T({128, 64, 1, 1}), 0, 1, 1, 1)),
            std::vector<std::string>{"fwd dt=2 lay=3 idx=1 G=1 N=64 K=128 C=64 f=[1,1] "
                                     "in=[512,512] s=[1,1] d=[1,1] p=[0,0]/[0,0]"});
  // Just below: 0.
  EXPECT_EQ(ConvertOne(Miopen(T({32, 64, 512, 512}), T({64, 64, 1, 1}), 0, 1, 1, 1)),
            std::vector<std::string>{"fwd dt=2 lay=3 idx=0 G=1 N=32 K=64 C=64 f=[1,1] "
                                     "in=[512,512] s=[1,1] d=[1,1] p=[0,0]/[0,0]"});
}

TEST(ConvertMapping, BadRecordsAreSkippedWithTheReason) {
  const Json x = T({2, 8, 10, 10}), w = T({16, 8, 3, 3});
  auto conv_with = [&](const char* drop, std::pair<std::string, Json> replace = {"", nullptr}) {
    std::vector<std::pair<std::string, Json>> args = {{"input", x},
                                                      {"weight", w},
                                                      {"bias", nullptr},
                                                      {"stride", Ints({1, 1})},
                                                      {"padding", Ints({1, 1})},
                                                      {"dilation", Ints({1, 1})},
                                                      {"transposed", false},
                                                      {"output_padding", Ints({0, 0})},
                                                      {"groups", 1}};
    std::vector<std::pair<std::string, Json>> out;
    for (auto& a : args) {
      if (a.first == drop) continue;
      out.push_back(a.first == replace.first ? replace : a);
    }
    return Rec("aten::convolution", out);
  };
  struct Case {
    const char* name;
    Json record;
    std::string reason;
  } cases[] = {
      {"not a convolution", Rec("aten::addmm", {{"self", T({4, 4})}}), "not a convolution"},
      {"missing weight", conv_with("weight"), "missing argument 'weight'"},
      {"missing stride", conv_with("stride"), "missing argument 'stride'"},
      {"missing transposed", conv_with("transposed"), "missing argument 'transposed'"},
      {"missing groups", conv_with("groups"), "missing argument 'groups'"},
      {"weight is not a tensor", conv_with("", {"weight", Ints({1, 2})}),
       "argument 'weight' must be a tensor, got [1, 2]"},
      {"stride mistyped", conv_with("", {"stride", "2"}),
       "argument 'stride' must be a list of integers, got \"2\""},
      {"stride wrong length", conv_with("", {"stride", Ints({1, 1, 1})}),
       "argument 'stride' has 3 values for 2 spatial dimensions"},
      {"zero stride", conv_with("", {"stride", Ints({0, 1})}),
       "argument 'stride' must hold values of at least 1, got [0, 1]"},
      {"negative padding", conv_with("", {"padding", Ints({-1, 0})}),
       "argument 'padding' must hold values of at least 0, got [-1, 0]"},
      {"groups zero", conv_with("", {"groups", 0}), "argument 'groups' must be at least 1, got 0"},
      {"transposed mistyped", conv_with("", {"transposed", "yes"}),
       "argument 'transposed' must be a boolean"},
      {"channels not divisible by groups", conv_with("", {"groups", 3}),
       "input channels (8) are not divisible by groups (3)"},
      {"weight does not match C/G", conv_with("", {"weight", T({16, 4, 3, 3})}),
       "weight has 4 input channels per group; the input's 8 channels in 1 groups need 8"},
      {"output channels not divisible", conv_with("", {"groups", 2}),
       "weight has 8 input channels per group; the input's 8 channels in 2 groups need 4"},
      {"empty output", conv_with("", {"weight", T({16, 8, 13, 3})}), "the output would be empty"},
      {"4 spatial dims", conv_with("", {"weight", T({16, 8, 3, 3, 3, 3})}),
       "unsupported dimensionality: weight has 6 dimensions"},
      {"input rank mismatch", conv_with("", {"input", T({8, 10, 10})}),
       "input has 3 dimensions but weight has 4"},
      {"empty batch", conv_with("", {"input", T({0, 8, 10, 10})}), "the input is empty"},
      {"transposed weight mismatch", conv_with("", {"transposed", true}),
       "weight has 16 input channels but the transposed "
       "convolution's input has 8"},
      {"backward without output_mask",
       Rec("aten::convolution_backward", {{"grad_output", T({2, 16, 10, 10})},
                                          {"input", x},
                                          {"weight", w},
                                          {"stride", Ints({1, 1})},
                                          {"padding", Ints({1, 1})},
                                          {"dilation", Ints({1, 1})},
                                          {"transposed", false},
                                          {"output_padding", Ints({0, 0})},
                                          {"groups", 1}}),
       "missing argument 'output_mask'"},
      {"backward without grad_output",
       Rec("aten::convolution_backward", {{"input", x},
                                          {"weight", w},
                                          {"stride", Ints({1, 1})},
                                          {"padding", Ints({1, 1})},
                                          {"dilation", Ints({1, 1})},
                                          {"transposed", false},
                                          {"output_padding", Ints({0, 0})},
                                          {"groups", 1},
                                          {"output_mask", Bools({true, true, false})}}),
       "missing argument 'grad_output'"},
      {"conv2d with a 3-D weight",
       Rec("aten::conv2d", {{"input", T({1, 4, 9})}, {"weight", T({4, 4, 3})}}),
       "weight has 3 dimensions; aten::conv2d needs 4"},
      {"same padding with stride 2",
       Rec("aten::conv2d",
           {{"input", x}, {"weight", w}, {"stride", Ints({2, 2})}, {"padding", "same"}}),
       "padding='same' needs stride 1"},
      {"record is not an object", Json(42),
       "not a replay-IR record (a JSON number, not an object)"},
      {"missing op_name", Json{{"replay_ir", Json::object()}}, "missing op_name"},
      {"op_name not a string", Json{{"op_name", 7}}, "op_name must be a string, got 7"},
      {"missing replay_ir", Json{{"op_name", "aten::conv2d"}}, "missing replay_ir"},
      {"list_pos_args not a list",
       Json{{"op_name", "aten::conv2d"}, {"replay_ir", {{"list_pos_args", 3}}}},
       "replay_ir.list_pos_args must be a list"},
      {"argument without a name",
       Json{{"op_name", "aten::conv2d"}, {"replay_ir", {{"list_pos_args", {{{"value", 1}}}}}}},
       "replay_ir.list_pos_args[0] has no arg_name"},
  };
  for (const auto& tc : cases) {
    auto got = ConvertOne(tc.record);
    ASSERT_EQ(got.size(), 1u) << tc.name;
    EXPECT_EQ(got[0].rfind("skip: ", 0), 0u) << tc.name << ": " << got[0];
    EXPECT_NE(got[0].find(tc.reason), std::string::npos) << tc.name << ": " << got[0];
  }
}

TEST(ConvertIr, ArgumentsByNameFromKwargsAndRankFallback) {
  Json rec = Miopen(T({1, 4, 8, 8}), T({4, 4, 3, 3}), Ints({1, 1}), Ints({1, 1}), Ints({1, 1}), 1);
  // Move stride and groups into list_kwargs, in another order.
  Json& pos = rec["replay_ir"]["list_pos_args"];
  Json kw = Json::array({pos[6], pos[4]});
  pos.erase(6);
  pos.erase(4);
  rec["replay_ir"]["list_kwargs"] = kw;
  Json ranked = rec;
  ranked["metadata"] = {{"priority_rank", 7}, {"gpu_time_us", 12.5}, {"count", 3}};
  auto conv = ConvertText(Json::array({rec, ranked, Json{{"op_name", "aten::relu"}}}).dump(), {});
  ASSERT_TRUE(conv.ok()) << conv.error();
  ASSERT_EQ(conv->configs.size(), 2u);
  EXPECT_EQ(conv->format, InputFormat::kReplayIr);
  EXPECT_EQ(conv->configs[0].priority_rank(), 1);  // its position
  EXPECT_EQ(conv->configs[1].priority_rank(), 7);
  EXPECT_EQ(ConfigToJson(conv->configs[1])["metadata"].dump(),
            R"({"priority_rank":7,"pytorch_op":"aten::miopen_convolution","description":)"
            R"("Forward conv: G=1, N=1, K=4, C=4, [3, 3] kernel, [8, 8] input",)"
            R"("gpu_time_us":12.5,"count":3})");
  ASSERT_EQ(conv->records.size(), 3u);
  EXPECT_EQ(conv->records[2].priority_rank, 3);
  EXPECT_EQ(conv->records[2].skip_reason, "not a convolution");
  EXPECT_EQ(SkipWarning(conv->records[2]), "record 3 (aten::relu) skipped: not a convolution");
}

TEST(ConvertFormats, ErrorsForUnusableInput) {
  struct Case {
    const char* name;
    std::string text;
    std::string error;
  } cases[] = {
      {"not JSON", "[\n  {\"op_name\": 1},\n  x\n]",
       "input: not valid JSON at line 3, column 3: syntax error while parsing value - invalid "
       "literal"},
      {"empty", "", "input: not valid JSON at line 1, column 1:"},
      {"trailing garbage", "[] []", "input: not valid JSON at line 1, column 4:"},
      {"truncated", "[{\"op_name\": \"aten::conv2d\"",
       "input: not valid JSON at line 1, column 28"},
      {"scalar", "42", "neither a replay-IR list"},
      {"object without traceEvents", "{\"foo\": []}", "the object has no traceEvents list"},
      {"array of numbers", "[1, 2, 3]", "its 3 elements have neither op_name nor operation_type"},
      {"too deep", std::string(100000, '['), "input: JSON nested deeper than 512 levels"},
      {"bad config in a configs file",
       R"([{"operation_type": "profile_grouped_conv_fwd", "profiler_args": {}}])",
       "input: config 1: field profiler_args.data_type is missing"},
  };
  for (const auto& tc : cases) {
    auto conv = ConvertText(tc.text, {});
    ASSERT_FALSE(conv.ok()) << tc.name;
    EXPECT_EQ(
        conv.error().rfind(tc.error, 0) == 0 || conv.error().find(tc.error) != std::string::npos,
        true)
        << tc.name << ": " << conv.error();
  }
}

TEST(ConvertFormats, NestingUpToTheLimitIsFine) {
  // Root array (1) + record object (2) + n arrays.
  auto nested = [](size_t n) {
    return R"([{"op_name": "aten::relu", "x": )" + std::string(n, '[') + std::string(n, ']') + "}]";
  };
  auto conv = ConvertText(nested(kMaxInputDepth - 2), {});
  ASSERT_TRUE(conv.ok()) << conv.error();
  EXPECT_EQ(conv->records.size(), 1u);
  EXPECT_EQ(conv->records[0].skip_reason, "not a convolution");
  auto too_deep = ConvertText(nested(kMaxInputDepth - 1), {});
  ASSERT_FALSE(too_deep.ok());
  EXPECT_EQ(too_deep.error(), "input: JSON nested deeper than 512 levels");
}

TEST(ConvertFormats, ConfigsFilePassesThrough) {
  const Json rec =
      Miopen(T({10, 64, 56, 56}), T({64, 64, 3, 3}), Ints({1, 1}), Ints({1, 1}), Ints({1, 1}), 1);
  auto first = ConvertText(Json::array({rec, rec}).dump(), {});
  ASSERT_TRUE(first.ok()) << first.error();
  const std::string text = FormatConfigsText(first->configs);
  auto again = ConvertText(text, {});
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(again->format, InputFormat::kConfigs);
  EXPECT_EQ(FormatConfigsText(again->configs), text);
  EXPECT_EQ(FormatRecordLine(again->records[0], 2, again->format),
            "✓ [1/2] Loaded: aten::miopen_convolution (rank 1) → fwd");
  // A configs file with a non-config element first is an error, not a skipped record.
  auto mixed = ConvertText("[1, " + text.substr(1), {});
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.error().find("config 1: must be a JSON object"), std::string::npos)
      << mixed.error();
}

TEST(ConvertFormats, GzippedTextAndEmptyList) {
  auto plain = ConvertText("[]", {});
  ASSERT_TRUE(plain.ok()) << plain.error();
  EXPECT_EQ(plain->format, InputFormat::kReplayIr);
  EXPECT_TRUE(plain->records.empty());
  EXPECT_EQ(FormatConfigsText(plain->configs), "[]\n");
  // "[]" gzipped (gzip -c of the two bytes).
  const unsigned char gz[] = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x8b,
                              0x8e, 0x05, 0x00, 0x29, 0xbb, 0x4c, 0x0d, 0x02, 0x00, 0x00, 0x00};
  auto zipped = ConvertText(std::string_view(reinterpret_cast<const char*>(gz), sizeof(gz)), {});
  ASSERT_TRUE(zipped.ok()) << zipped.error();
  EXPECT_EQ(zipped->format, InputFormat::kReplayIr);
  auto broken = ConvertText(std::string_view(reinterpret_cast<const char*>(gz), 12), {});
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().find("gzip"), std::string::npos) << broken.error();
}

TEST(ConvertReport, LinesAndSummary) {
  const Json fwd = Miopen(T({1, 4, 8, 8}), T({4, 4, 3, 3}), 1, 1, 1, 1);
  const Json bwd = Backward(T({1, 4, 8, 8}), T({1, 4, 8, 8}), T({4, 4, 3, 3}), Ints({1, 1}),
                            Ints({1, 1}), false, Ints({0, 0}), 1, Bools({true, true, false}));
  const Json other = Rec("aten::addmm", {});
  auto conv = ConvertText(Json::array({fwd, bwd, other}).dump(), {});
  ASSERT_TRUE(conv.ok()) << conv.error();
  // Operations add up (2 converted + 1 skipped), configs add up (1 + 1 + 1), one column.
  const std::string summary =
      "Total PyTorch operations:         3\n"
      "  ✓ Converted:                    2\n"
      "  ⚠ Skipped:                      1\n"
      "Total CK profiler configs:        3\n"
      "  ✓ Forward convolutions:         1\n"
      "  ✓ Backward data convolutions:   1\n"
      "  ✓ Backward weight convolutions: 1\n";
  EXPECT_EQ(FormatConversionReport(*conv, /*quiet=*/true), summary);
  EXPECT_EQ(FormatConversionReport(*conv, /*quiet=*/false),
            "✓ [1/3] Converted: aten::miopen_convolution (rank 1) → fwd\n"
            "✓ [2/3] Converted: aten::convolution_backward (rank 2) → bwd_data + bwd_weight\n"
            "⚠ [3/3] Skipped: aten::addmm (rank 3): not a convolution\n"
            "\n" +
                summary);
}

// One forward and one backward call: three configs (fwd, bwd_data, bwd_weight).
std::vector<CkConfig> FwdAndBwdConfigs() {
  const Json fwd = Miopen(T({1, 4, 8, 8}), T({4, 4, 3, 3}), 1, 1, 1, 1);
  const Json bwd = Backward(T({1, 4, 8, 8}), T({1, 4, 8, 8}), T({4, 4, 3, 3}), Ints({1, 1}),
                            Ints({1, 1}), false, Ints({0, 0}), 1, Bools({true, true, false}));
  auto conv = ConvertText(Json::array({fwd, bwd}).dump(), {});
  EXPECT_TRUE(conv.ok()) << conv.error();
  return conv.ok() ? conv->configs : std::vector<CkConfig>{};
}

TEST(ConvertOutput, ConfigsTextMatchesConfigsToText) {
  std::vector<CkConfig> configs = FwdAndBwdConfigs();
  ASSERT_EQ(configs.size(), 3u);
  // Free-form metadata (nested, unicode, empty containers) and a numeric split_k.
  configs[0].metadata["extra"] = Json::parse(R"({"a": [1, {"b": "µs ✓"}], "e": {}, "l": []})");
  configs[1].split_k = "4";
  configs.push_back(configs[0]);
  configs.back().metadata = Json::object();
  EXPECT_EQ(FormatConfigsText(configs), ConfigsToText(configs));
  EXPECT_EQ(FormatConfigsText({}), ConfigsToText({}));
}

TEST(ConvertOutput, ConfigJsonTextMatchesCompactDump) {
  std::vector<CkConfig> configs = FwdAndBwdConfigs();
  ASSERT_EQ(configs.size(), 3u);
  // Strings with blanks, newlines, escaped quotes and backslashes must keep them all.
  configs[0].metadata["extra"] =
      Json::parse(R"({"a": [1, {"b": "µs ✓ \" \\ x\n y"}], "e": {}, "l": [], "f": 1.5})");
  configs[1].split_k = "4";
  configs.push_back(configs[1]);
  configs.back().split_k = "all";
  configs.back().metadata = Json::object();
  for (const auto& c : configs) EXPECT_EQ(ConfigJsonText(c), DumpJson(ConfigToJson(c)));
}

TEST(JsonText, AppendJsonStringMatchesDump) {
  std::string every_ascii_byte;
  for (int c = 0; c < 0x80; ++c) every_ascii_byte += static_cast<char>(c);
  const std::string cases[] = {
      "",
      "plain text",
      every_ascii_byte,
      "Perf: 0.1 ms, 12.5 TFlops\n\"quoted\" \\path\\ \x1b[31mred\x1b[0m\x7f",
      "\xc2\xb5s \xe2\x9c\x93",       // valid UTF-8
      "bad \xff\xfe bytes \xc3 end",  // invalid UTF-8: replaced, as DumpJson does
  };
  for (const auto& text : cases) {
    std::string out = "prefix";
    AppendJsonString(out, text);
    EXPECT_EQ(out, "prefix" + DumpJson(Json(text))) << text;
  }
  // Plain text is scanned 8 bytes at a time: every kind of byte at every offset of a word,
  // near the end, and alone; a multibyte character after plain text already copied.
  const std::string plain = "Perf: 0.123 ms, 45.6 TFlops, 789 GB/s, DeviceGroupedConv<256>";
  for (const std::string& special : std::vector<std::string>{
           "\"", "\\", "\n", std::string(1, '\0'), "\x1f", "\x7f", "\xc2\xb5", "\xff", " "}) {
    for (size_t at = 0; at <= 20; ++at) {
      for (size_t len : {at, at + 1, at + 7, at + 9, size_t{40}}) {
        std::string text = plain.substr(0, len);
        text.insert(std::min(at, text.size()), special);
        std::string out = "x";
        AppendJsonString(out, text);
        EXPECT_EQ(out, "x" + DumpJson(Json(text))) << at << " " << len;
      }
    }
  }
}

TEST(JsonText, NumbersReadBackAsDumpWritesThem) {
  const double doubles[] = {0.0,
                            -0.0,
                            1.0,
                            0.5,
                            1e15,
                            1e16,
                            1e300,
                            -2.5e-7,
                            0.1,
                            123456.789,
                            1e-310,
                            3.0e8,
                            std::numeric_limits<double>::max(),
                            std::numeric_limits<double>::infinity(),
                            std::nan("")};
  for (double d : doubles) {
    std::string out;
    AppendJsonNumber(out, d);
    const Json back = Json::parse(out);
    EXPECT_EQ(back, Json::parse(DumpJson(Json(d)))) << out;  // the same value, and null for inf
    if (std::isfinite(d)) {
      EXPECT_TRUE(back.is_number_float()) << out;  // whole numbers stay floats
      EXPECT_EQ(back.get<double>(), d) << out;
    }
  }
  for (int64_t i : {int64_t{0}, int64_t{-1}, std::numeric_limits<int64_t>::min(),
                    std::numeric_limits<int64_t>::max()}) {
    std::string out;
    AppendJsonNumber(out, i);
    EXPECT_EQ(out, DumpJson(Json(i)));
  }
  std::string out;
  AppendJsonNumber(out, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(out, DumpJson(Json(std::numeric_limits<uint64_t>::max())));
}

TEST(JsonText, ObjectWriterWritesWhatTheDomWould) {
  std::string out;
  {
    JsonObjectWriter w(out);
    w.Field("s", "a \"quoted\"\nline").Field("i", 42).Field("u", uint32_t{7}).Field("d", 0.25);
    w.Field("b", true).Field("v", std::vector<int>{3, -1}).Field("e", std::vector<int>{});
    w.RawField("raw", R"({"x":[1]})");
    JsonObjectWriter nested(w.Key("o"));
    nested.Field("k", "v");
  }
  EXPECT_EQ(Json::parse(out), Json::parse(R"({"s": "a \"quoted\"\nline", "i": 42, "u": 7,
      "d": 0.25, "b": true, "v": [3, -1], "e": [], "raw": {"x": [1]}, "o": {"k": "v"}})"));
  std::string empty;
  JsonObjectWriter(empty).Close();
  EXPECT_EQ(empty, "{}");
}

}  // namespace
}  // namespace ckprof

// Tests of profiler-trace conversion: nesting, GPU time through External id, merging and
// ranking on small hand-made traces, then the real ResNet (MI300X) and ViT (H100) traces and
// the equivalence of the ResNet trace with its replay-IR form.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/convert.h"
#include "common/trace_reader.h"
#include "tests/util/files.h"

namespace ckprof {
namespace {

using Json = nlohmann::ordered_json;
using ckprof::testing::DataPath;

std::string List(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// A config's profiler arguments in one line (same form as convert_test.cpp).
std::string Sig(const CkConfig& c) {
  std::string s = std::string(ShortOpName(c.op)) + " dt=" + std::to_string(c.data_type) +
                  " lay=" + std::to_string(c.layout);
  if (c.op == ConvOp::kFwd) s += " idx=" + std::to_string(c.index_type.value_or(-1));
  s += " G=" + std::to_string(c.G) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
       " C=" + std::to_string(c.C) + " f=" + List(c.filter_spatial) +
       " in=" + List(c.input_spatial) + " s=" + List(c.strides) + " d=" + List(c.dilations) +
       " p=" + List(c.left_pads) + "/" + List(c.right_pads);
  if (c.op != ConvOp::kFwd) s += " k=" + c.split_k;
  return s;
}

// Kineto-style events. The args of a forward conv 2-D of [n, c, hw, hw] by [k, c, 3, 3].
Json ConvArgs(const std::string& op, int64_t ext, int n, int c, int hw, int k) {
  const Json x = {n, c, hw, hw}, w = {k, c, 3, 3};
  const Json xs = {c * hw * hw, hw * hw, hw, 1}, ws = {c * 9, 9, 3, 1};
  Json a = {{"External id", ext}};
  if (op == "aten::conv2d") {
    a["Concrete Inputs"] = {"", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"};
    a["Input type"] = {"c10::Half",  "c10::Half",  "",      "ScalarList",
                       "ScalarList", "ScalarList", "Scalar"};
    a["Input Strides"] = {
        xs, ws, Json::array(), Json::array(), Json::array(), Json::array(), Json::array()};
    a["Input Dims"] = {
        x, w, Json::array(), Json::array(), Json::array(), Json::array(), Json::array()};
  } else if (op == "aten::convolution" || op == "aten::_convolution") {
    a["Concrete Inputs"] = {"", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"};
    a["Input type"] = {"c10::Half",  "c10::Half", "",           "ScalarList", "ScalarList",
                       "ScalarList", "Scalar",    "ScalarList", "Scalar"};
    a["Input Strides"] = {xs,
                          ws,
                          Json::array(),
                          Json::array(),
                          Json::array(),
                          Json::array(),
                          Json::array(),
                          Json::array(),
                          Json::array()};
    a["Input Dims"] = {x,
                       w,
                       Json::array(),
                       Json::array(),
                       Json::array(),
                       Json::array(),
                       Json::array(),
                       Json::array(),
                       Json::array()};
    if (op == "aten::_convolution") {
      for (const char* v : {"False", "False", "True", "True"}) {
        a["Concrete Inputs"].push_back(v);
        a["Input type"].push_back("Scalar");
        a["Input Strides"].push_back(Json::array());
        a["Input Dims"].push_back(Json::array());
      }
    }
  } else if (op == "aten::miopen_convolution") {
    a["Concrete Inputs"] = {"", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "False", "False"};
    a["Input type"] = {"c10::Half",  "c10::Half", "",       "ScalarList", "ScalarList",
                       "ScalarList", "Scalar",    "Scalar", "Scalar"};
    a["Input Strides"] = {xs,
                          ws,
                          Json::array(),
                          Json::array(),
                          Json::array(),
                          Json::array(),
                          Json::array(),
                          Json::array(),
                          Json::array()};
    a["Input Dims"] = {x,
                       w,
                       Json::array(),
                       Json::array(),
                       Json::array(),
                       Json::array(),
                       Json::array(),
                       Json::array(),
                       Json::array()};
  } else if (op == "aten::convolution_backward") {
    const Json gs = {k * hw * hw, hw * hw, hw, 1};
    a["Concrete Inputs"] = {"",
                            "",
                            "",
                            "[0]",
                            "[1, 1]",
                            "[1, 1]",
                            "[1, 1]",
                            "False",
                            "[0, 0]",
                            "1",
                            "[True, True, False]"};
    a["Input type"] = {"c10::Half",  "c10::Half",  "c10::Half",  "ScalarList",
                       "ScalarList", "ScalarList", "ScalarList", "Scalar",
                       "ScalarList", "Scalar",     "ScalarList"};
    a["Input Strides"] = {gs, xs, ws};
    a["Input Dims"] = {Json{n, k, hw, hw}, x, w};
    for (int i = 0; i < 8; ++i) {
      a["Input Strides"].push_back(Json::array());
      a["Input Dims"].push_back(Json::array());
    }
  }
  return a;
}

Json CpuOp(const std::string& name, double ts, double dur, Json args, int tid = 1) {
  return Json{{"ph", "X"},  {"cat", "cpu_op"}, {"name", name}, {"pid", 7},
              {"tid", tid}, {"ts", ts},        {"dur", dur},   {"args", std::move(args)}};
}

Json Kernel(double dur, std::optional<int64_t> ext) {
  Json args = {{"device", 0}, {"stream", 7}};
  if (ext) args["External id"] = *ext;
  return Json{{"ph", "X"}, {"cat", "kernel"}, {"name", "k"}, {"pid", 0},
              {"tid", 7},  {"ts", 1.0},       {"dur", dur},  {"args", args}};
}

// A 4-level forward nest starting at ts, External ids ext..ext+3.
std::vector<Json> ForwardNest(double ts, int64_t ext, int c, int hw, int tid = 1) {
  const char* ops[] = {"aten::conv2d", "aten::convolution", "aten::_convolution",
                       "aten::miopen_convolution"};
  std::vector<Json> out;
  for (int i = 0; i < 4; ++i) {
    out.push_back(CpuOp(ops[i], ts + i, 100 - 2 * i, ConvArgs(ops[i], ext + i, 2, c, hw, c), tid));
  }
  return out;
}

Result<Conversion> ConvertEvents(const std::vector<Json>& events) {
  Json trace = {{"schemaVersion", 1}, {"traceEvents", events}};
  return ConvertText(trace.dump(), {});
}

TEST(ConvertTrace, NestIsOneCallDescribedByTheBackendOp) {
  std::vector<Json> ev = ForwardNest(1000, 10, 8, 16);
  ev.push_back(Kernel(10.5, 13));           // the miopen_convolution's kernel
  ev.push_back(Kernel(2.25, 10));           // one launched by conv2d itself
  ev.push_back(Kernel(100, std::nullopt));  // no External id: ignored
  ev.push_back(Kernel(50, 99));             // another op's kernel
  ev.push_back(CpuOp("aten::add_", 1010, 1, Json{{"External id", 99}}));
  auto conv = ConvertEvents(ev);
  ASSERT_TRUE(conv.ok()) << conv.error();
  EXPECT_EQ(conv->format, InputFormat::kTrace);
  EXPECT_EQ(conv->trace_calls, 1u);
  ASSERT_EQ(conv->records.size(), 1u);
  EXPECT_EQ(conv->records[0].op_name, "aten::miopen_convolution");
  EXPECT_DOUBLE_EQ(conv->records[0].gpu_time_us, 12.75);
  EXPECT_EQ(conv->records[0].count, 1);
  ASSERT_EQ(conv->configs.size(), 1u);
  EXPECT_EQ(Sig(conv->configs[0]),
            "fwd dt=1 lay=3 idx=0 G=1 N=2 K=8 C=8 f=[3,3] in=[16,16] s=[1,1] d=[1,1] "
            "p=[1,1]/[1,1]");
  EXPECT_EQ(conv->configs[0].metadata.dump(),
            R"({"priority_rank":1,"pytorch_op":"aten::miopen_convolution","description":)"
            R"("Forward conv: G=1, N=2, K=8, C=8, [3, 3] kernel, [16, 16] input",)"
            R"("gpu_time_us":12.75,"count":1})");
}

TEST(ConvertTrace, AnExternalIdSharedWithinANestCountsOnce) {
  std::vector<Json> ev = ForwardNest(1000, 10, 8, 16);
  ev[1]["args"]["External id"] = 10;  // the same id as the outer event
  ev.push_back(Kernel(5, 10));
  auto conv = ConvertEvents(ev);
  ASSERT_TRUE(conv.ok()) << conv.error();
  ASSERT_EQ(conv->records.size(), 1u);
  EXPECT_DOUBLE_EQ(conv->records[0].gpu_time_us, 5);
}

TEST(ConvertTrace, WithoutBackendOpTheInnermostConvEventDescribes) {
  std::vector<Json> ev = ForwardNest(1000, 10, 8, 16);
  ev.pop_back();  // no miopen_convolution (a CPU run)
  auto conv = ConvertEvents(ev);
  ASSERT_TRUE(conv.ok()) << conv.error();
  ASSERT_EQ(conv->records.size(), 1u);
  EXPECT_EQ(conv->records[0].op_name, "aten::_convolution");
  EXPECT_EQ(conv->configs.size(), 1u);
}

TEST(ConvertTrace, IdenticalProblemsMergeAndRankByGpuTime) {
  std::vector<Json> ev;
  auto add = [&](std::vector<Json> v) { ev.insert(ev.end(), v.begin(), v.end()); };
  // Problem A (c=8): three calls of 10 us. Problem B (c=16): one call of 40 us.
  // Problem C (c=32) and D (c=4): 5 us each, a tie: C appears first.
  add(ForwardNest(1000, 10, 8, 16));
  add(ForwardNest(2000, 20, 32, 16));
  add(ForwardNest(3000, 30, 8, 16));
  add(ForwardNest(4000, 40, 16, 16));
  add(ForwardNest(5000, 50, 8, 16));
  add(ForwardNest(6000, 60, 4, 16));
  for (int64_t ext : {13, 33, 53}) ev.push_back(Kernel(10, ext));
  ev.push_back(Kernel(40, 43));
  ev.push_back(Kernel(5, 23));
  ev.push_back(Kernel(5, 63));
  auto conv = ConvertEvents(ev);
  ASSERT_TRUE(conv.ok()) << conv.error();
  EXPECT_EQ(conv->trace_calls, 6u);
  ASSERT_EQ(conv->records.size(), 4u);
  std::vector<std::pair<int64_t, int64_t>> c_and_count;
  for (const auto& c : conv->configs)
    c_and_count.emplace_back(c.C, c.metadata["count"].get<int64_t>());
  EXPECT_EQ(c_and_count,
            (std::vector<std::pair<int64_t, int64_t>>{{16, 1}, {8, 3}, {32, 1}, {4, 1}}));
  EXPECT_DOUBLE_EQ(conv->records[1].gpu_time_us, 30);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(conv->records[i].priority_rank, static_cast<int64_t>(i + 1));
    EXPECT_EQ(conv->configs[i].priority_rank(), static_cast<int64_t>(i + 1));
  }
}

TEST(ConvertTrace, ThreadsAndTimeDecideNesting) {
  std::vector<Json> ev;
  // A backward on another thread, overlapping the forward nest in time: its own call.
  ev.push_back(CpuOp("aten::convolution_backward", 1001, 50,
                     ConvArgs("aten::convolution_backward", 100, 2, 8, 16, 8), /*tid=*/2));
  auto fwd = ForwardNest(1000, 10, 8, 16);
  ev.insert(ev.end(), fwd.begin(), fwd.end());
  // Two sequential convolutions on the same thread: two calls.
  ev.push_back(CpuOp("aten::miopen_convolution", 2000, 10,
                     ConvArgs("aten::miopen_convolution", 200, 2, 4, 8, 4)));
  ev.push_back(CpuOp("aten::miopen_convolution", 2010, 10,
                     ConvArgs("aten::miopen_convolution", 201, 2, 4, 8, 4)));
  ev.push_back(Kernel(30, 100));
  auto conv = ConvertEvents(ev);
  ASSERT_TRUE(conv.ok()) << conv.error();
  EXPECT_EQ(conv->trace_calls, 4u);
  ASSERT_EQ(conv->records.size(), 3u);
  EXPECT_EQ(conv->records[0].op_name, "aten::convolution_backward");
  EXPECT_EQ(conv->records[0].produced, (std::vector<ConvOp>{ConvOp::kBwdData, ConvOp::kBwdWeight}));
  EXPECT_EQ(conv->records[1].count, 1);
  EXPECT_EQ(conv->records[2].count, 2);
}

TEST(ConvertTrace, KeyOrderAndValueFormsDoNotMatter) {
  // args before cat and name; ts and dur as integers; pid and tid as strings.
  Json e = {{"args", ConvArgs("aten::miopen_convolution", 5, 2, 4, 8, 4)},
            {"dur", 10},
            {"ts", 100},
            {"tid", "thread 1"},
            {"pid", "proc"},
            {"name", "aten::miopen_convolution"},
            {"cat", "cpu_op"},
            {"ph", "X"}};
  auto conv = ConvertEvents({e, Kernel(1.5, 5)});
  ASSERT_TRUE(conv.ok()) << conv.error();
  ASSERT_EQ(conv->configs.size(), 1u);
  EXPECT_EQ(Sig(conv->configs[0]),
            "fwd dt=1 lay=3 idx=0 G=1 N=2 K=4 C=4 f=[3,3] in=[8,8] s=[1,1] d=[1,1] p=[1,1]/[1,1]");
  EXPECT_DOUBLE_EQ(conv->records[0].gpu_time_us, 1.5);
}

TEST(ConvertTrace, AnUnconvertibleProblemIsSkippedAndKeepsItsRank) {
  Json args = ConvArgs("aten::miopen_convolution", 5, 2, 4, 8, 4);
  args["Concrete Inputs"][6] = "3";  // groups 3 does not divide 4 channels
  auto conv = ConvertEvents({CpuOp("aten::miopen_convolution", 100, 10, args), Kernel(1, 5)});
  ASSERT_TRUE(conv.ok()) << conv.error();
  ASSERT_EQ(conv->records.size(), 1u);
  EXPECT_TRUE(conv->configs.empty());
  EXPECT_EQ(conv->records[0].skip_reason, "input channels (4) are not divisible by groups (3)");
  EXPECT_EQ(FormatRecordLine(conv->records[0], 1, conv->format),
            "⚠ [1/1] Skipped: aten::miopen_convolution (rank 1): input channels (4) are not "
            "divisible by groups (3)");
}

TEST(ConvertTrace, WithoutRecordShapesTheReasonSaysSo) {
  auto conv = ConvertEvents(
      {CpuOp("aten::cudnn_convolution", 100, 10, Json{{"External id", 5}}), Kernel(1, 5)});
  ASSERT_TRUE(conv.ok()) << conv.error();
  ASSERT_EQ(conv->records.size(), 1u);
  EXPECT_EQ(conv->records[0].skip_reason,
            "the trace has no argument shapes (profile with record_shapes=True)");
}

TEST(ConvertTrace, MicrosecondsToNanosecondsIsExact) {
  EXPECT_EQ(MicrosTextToNanos("3743411230573.532", 3743411230573.532), 3743411230573532);
  EXPECT_EQ(MicrosTextToNanos("12", 12), 12000);
  EXPECT_EQ(MicrosTextToNanos("0.1", 0.1), 100);
  EXPECT_EQ(MicrosTextToNanos("1.0005", 1.0005), 1001);
  EXPECT_EQ(MicrosTextToNanos("-2.5", -2.5), -2500);
  EXPECT_EQ(MicrosTextToNanos("1.5e3", 1.5e3), 1500000);
}

// The real ResNet training step recorded on an MI300X (bf16, MIOpen, NCHW).
TEST(ConvertRealTraces, ResnetMi300) {
  auto conv = ConvertFile(DataPath("resnet_mi300_trace.json.gz"), {});
  ASSERT_TRUE(conv.ok()) << conv.error();
  EXPECT_EQ(conv->format, InputFormat::kTrace);
  EXPECT_EQ(conv->trace_calls, 177u);  // 117 forward, 60 backward
  ASSERT_EQ(conv->records.size(), 22u);
  EXPECT_TRUE(conv->warnings.empty());
  const RecordOutcome& top = conv->records[0];
  EXPECT_EQ(top.op_name, "aten::convolution_backward");
  EXPECT_EQ(top.count, 12);
  EXPECT_DOUBLE_EQ(top.gpu_time_us, 1164.007);
  ASSERT_EQ(conv->configs.size(), 32u);
  struct Expect {
    size_t index;
    int64_t rank;
    const char* op;
    const char* sig;
  } expected[] = {
      {0, 1, "aten::convolution_backward",
       "bwd_data dt=2 lay=3 G=1 N=10 K=64 C=64 f=[3,3] in=[56,56] s=[1,1] d=[1,1] p=[1,1]/[1,1] "
       "k=all"},
      {1, 1, "aten::convolution_backward",
       "bwd_weight dt=5 lay=4 G=1 N=10 K=64 C=64 f=[3,3] in=[56,56] s=[1,1] d=[1,1] "
       "p=[1,1]/[1,1] k=all"},
      {2, 2, "aten::miopen_convolution",
       "fwd dt=2 lay=3 idx=0 G=1 N=10 K=64 C=64 f=[3,3] in=[56,56] s=[1,1] d=[1,1] "
       "p=[1,1]/[1,1]"},
      // The stem's backward needs no input gradient: weight only.
      {25, 17, "aten::convolution_backward",
       "bwd_weight dt=5 lay=4 G=1 N=10 K=64 C=3 f=[7,7] in=[224,224] s=[2,2] d=[1,1] "
       "p=[3,3]/[3,3] k=all"},
      {26, 18, "aten::miopen_convolution",
       "fwd dt=2 lay=3 idx=0 G=1 N=10 K=64 C=3 f=[7,7] in=[224,224] s=[2,2] d=[1,1] "
       "p=[3,3]/[3,3]"},
      {31, 22, "aten::miopen_convolution",
       "fwd dt=2 lay=3 idx=0 G=1 N=10 K=256 C=128 f=[1,1] in=[28,28] s=[2,2] d=[1,1] "
       "p=[0,0]/[0,0]"},
  };
  for (const auto& e : expected) {
    const CkConfig& c = conv->configs[e.index];
    EXPECT_EQ(Sig(c), e.sig) << e.index;
    EXPECT_EQ(c.priority_rank(), e.rank) << e.index;
    EXPECT_EQ(c.metadata["pytorch_op"], e.op) << e.index;
  }
  EXPECT_EQ(conv->configs[0].metadata["gpu_time_us"], 1164.007);
  EXPECT_EQ(conv->configs[0].metadata["count"], 12);
}

// The real ViT inference recorded on an H100 (bf16, cuDNN): one patch-embedding conv.
TEST(ConvertRealTraces, VitH100) {
  auto conv = ConvertFile(DataPath("vit_h100_trace.json.gz"), {});
  ASSERT_TRUE(conv.ok()) << conv.error();
  EXPECT_EQ(conv->format, InputFormat::kTrace);
  EXPECT_EQ(conv->trace_calls, 1u);
  ASSERT_EQ(conv->configs.size(), 1u);
  EXPECT_EQ(Sig(conv->configs[0]),
            "fwd dt=2 lay=3 idx=0 G=1 N=4 K=768 C=3 f=[16,16] in=[224,224] s=[16,16] d=[1,1] "
            "p=[0,0]/[0,0]");
  EXPECT_EQ(conv->configs[0].metadata["pytorch_op"], "aten::cudnn_convolution");
  // The cudnn_convolution's four kernels (layout transforms and the GEMM).
  EXPECT_EQ(conv->configs[0].metadata["gpu_time_us"], 121.248);
}

TEST(ConvertRealTraces, TraceAndItsReplayIrGiveTheSameConfigs) {
  auto from_trace = ConvertFile(DataPath("resnet_mi300_trace.json.gz"), {});
  auto from_ir = ConvertFile(DataPath("conv_repros_ir.json"), {});
  ASSERT_TRUE(from_trace.ok()) << from_trace.error();
  ASSERT_TRUE(from_ir.ok()) << from_ir.error();
  EXPECT_EQ(from_ir->format, InputFormat::kReplayIr);
  ASSERT_EQ(from_trace->configs.size(), from_ir->configs.size());
  for (size_t i = 0; i < from_ir->configs.size(); ++i) {
    const CkConfig& a = from_trace->configs[i];
    const CkConfig& b = from_ir->configs[i];
    EXPECT_EQ(a.op, b.op) << i;
    EXPECT_EQ(ConfigToJson(a)["profiler_args"], ConfigToJson(b)["profiler_args"]) << i;
    EXPECT_EQ(a.priority_rank(), b.priority_rank()) << i;
    EXPECT_EQ(a.metadata["pytorch_op"], b.metadata["pytorch_op"]) << i;
  }
  // The IR carries gpu_time_us and count too: the whole files are identical.
  EXPECT_EQ(FormatConfigsText(from_trace->configs), FormatConfigsText(from_ir->configs));
}

}  // namespace
}  // namespace ckprof

#include "common/ck_config.h"

#include <gtest/gtest.h>

namespace ckprof {
namespace {

using Json = nlohmann::ordered_json;

Json SampleFwd() {
  return Json::parse(R"({"operation_type": "profile_grouped_conv_fwd",
 "profiler_args": {"data_type": 1, "layout": 3, "index_type": 0, "verify": 0, "init": 1, "log": 0,
   "time": 1, "num_dim_spatial": 2, "G": 32, "N": 32, "K": 4, "C": 4, "filter_spatial": [3, 3],
   "input_spatial": [200, 200], "strides": [1, 1], "dilations": [1, 1], "left_pads": [1, 1],
   "right_pads": [1, 1]},
 "metadata": {"priority_rank": 1, "pytorch_op": "aten::miopen_convolution",
   "description": "Forward conv: G=32, N=32, K=4, C=4, [3, 3] kernel, [200, 200] input"}})");
}

TEST(CkConfig, RoundTripKeepsKeysAndOrder) {
  Json in = SampleFwd();
  auto c = ConfigFromJson(in, 0);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(ConfigToJson(*c).dump(), in.dump());
  EXPECT_EQ(Describe(*c), c->description());
  EXPECT_EQ(c->priority_rank(), 1);
}

TEST(CkConfig, EncodingsDifferPerOperation) {
  EXPECT_EQ(EncodeDataType(ConvOp::kFwd, DataType::kBf16), 2);
  EXPECT_EQ(EncodeDataType(ConvOp::kBwdData, DataType::kBf16), 2);
  EXPECT_EQ(EncodeDataType(ConvOp::kBwdWeight, DataType::kBf16), 5);
  EXPECT_EQ(EncodeLayout(ConvOp::kFwd, Layout::kNchw), 3);
  EXPECT_EQ(EncodeLayout(ConvOp::kBwdData, Layout::kNchw), 3);
  EXPECT_EQ(EncodeLayout(ConvOp::kBwdWeight, Layout::kNchw), 4);
  EXPECT_EQ(EncodeLayout(ConvOp::kBwdWeight, Layout::kNhwc), 2);
}

TEST(CkConfig, OperationTypeWithOrWithoutPrefix) {
  EXPECT_EQ(ParseOperationType("profile_grouped_conv_bwd_data"), ConvOp::kBwdData);
  EXPECT_EQ(ParseOperationType("grouped_conv_bwd_weight"), ConvOp::kBwdWeight);
  EXPECT_FALSE(ParseOperationType("grouped_conv_sideways").has_value());
}

TEST(CkConfig, RejectsBadFieldsNamingConfigAndField) {
  struct Case {
    const char* name;
    const char* pointer;
    Json value;
    const char* expect;
  } cases[] = {
      {"list too long", "/profiler_args/strides", Json::parse("[1,1,1]"),
       "config 1: field profiler_args.strides has 3 entries but num_dim_spatial is 2"},
      {"float", "/profiler_args/G", Json(2.5),
       "config 1: field profiler_args.G must be an integer"},
      {"string", "/profiler_args/N", Json("32"),
       "config 1: field profiler_args.N must be an integer"},
      {"zero groups", "/profiler_args/G", Json(0), "profiler_args.G must be between 1"},
      {"negative", "/profiler_args/left_pads", Json::parse("[-1, 0]"), "out of range"},
      {"huge", "/profiler_args/C", Json(uint64_t{1} << 63), "out of range"},
      {"op", "/operation_type", Json("conv"), "operation_type is unknown"},
  };
  for (const auto& tc : cases) {
    Json j = SampleFwd();
    j[Json::json_pointer(tc.pointer)] = tc.value;
    auto c = ConfigFromJson(j, 0);
    ASSERT_FALSE(c.ok()) << tc.name;
    EXPECT_NE(c.error().find(tc.expect), std::string::npos) << tc.name << ": " << c.error();
  }
}

// A data type or layout the operation does not have is refused when the config is read, with
// the values that operation has (it would otherwise fail at run time and be retried).
TEST(CkConfig, RejectsDataTypeOrLayoutTheOperationDoesNotHave) {
  struct Case {
    const char* op;
    const char* field;
    int value;
    const char* expect;  // "" = accepted
  } cases[] = {
      {"profile_grouped_conv_fwd", "data_type", 8, ""},  // tf32
      {"profile_grouped_conv_fwd", "data_type", 5,
       "config 1: field profiler_args.data_type is 5, which grouped_conv_fwd does not have (its "
       "data types: 0 fp32, 1 fp16, 2 bf16, 3 int8, 8 tf32)"},
      {"profile_grouped_conv_bwd_data", "data_type", 4,
       "which grouped_conv_bwd_data does not have (its data types: 0 fp32, 1 fp16, 2 bf16, 3 "
       "tf32)"},
      {"profile_grouped_conv_bwd_weight", "data_type", 5, ""},  // bf16 for bwd_weight
      {"profile_grouped_conv_bwd_weight", "data_type", 3, "its data types: 0 fp32"},
      {"profile_grouped_conv_fwd", "layout", 4,
       "config 1: field profiler_args.layout is 4, which grouped_conv_fwd does not have (its "
       "layouts: 0 GNHWC_GKYXC_GNHWK, 1 NHWGC_GKYXC_NHWGK, 2 NGCHW_GKYXC_NGKHW, 3 "
       "NGCHW_GKCYX_NGKHW)"},
      {"profile_grouped_conv_bwd_weight", "layout", 4, ""},  // PyTorch's NCHW for bwd_weight
      {"profile_grouped_conv_bwd_weight", "layout", 5, "its layouts: 0 GNCHW_GKCYX_GNKHW"},
  };
  for (const auto& tc : cases) {
    Json j = SampleFwd();
    j["operation_type"] = tc.op;
    if (std::string(tc.op) != "profile_grouped_conv_fwd") {
      j["profiler_args"].erase("index_type");
      j["profiler_args"]["split_k"] = "all";
    }
    j["profiler_args"][tc.field] = tc.value;
    auto c = ConfigFromJson(j, 0);
    const std::string what = std::string(tc.op) + " " + tc.field + "=" + std::to_string(tc.value);
    if (std::string(tc.expect).empty()) {
      EXPECT_TRUE(c.ok()) << what << ": " << c.error();
    } else {
      ASSERT_FALSE(c.ok()) << what;
      EXPECT_NE(c.error().find(tc.expect), std::string::npos) << what << ": " << c.error();
    }
  }
}

TEST(CkConfig, BackwardSplitK) {
  Json j = SampleFwd();
  j["operation_type"] = "profile_grouped_conv_bwd_data";
  j["profiler_args"].erase("index_type");
  j["profiler_args"]["split_k"] = "all";
  auto c = ConfigFromJson(j, 0);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->split_k, "all");
  EXPECT_EQ(ConfigToJson(*c)["profiler_args"]["split_k"], "all");
  j["profiler_args"]["split_k"] = "four";
  EXPECT_FALSE(ConfigFromJson(j, 0).ok());
}

TEST(CkConfig, FlopsAndOutput) {
  auto c = ConfigFromJson(SampleFwd(), 0);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->OutputSpatial(), (std::vector<int64_t>{200, 200}));
  EXPECT_DOUBLE_EQ(c->Flops(), 2.0 * 32 * 32 * 4 * 4 * 200 * 200 * 9);
}

}  // namespace
}  // namespace ckprof

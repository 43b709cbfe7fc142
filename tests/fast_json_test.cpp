// FastJsonValue, the converter's reader of a large configs list's elements: what it accepts,
// nlohmann's parser reads to the identical value; what it cannot read alike, it declines.
#include "common/fast_json.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ckprof {
namespace {

using json = nlohmann::ordered_json;

TEST(FastJson, ReadsWhatNlohmannReadsToTheIdenticalValue) {
  const std::vector<std::string> inputs = {
      "{}",
      "[]",
      " \t\r\n{ \"a\" : 1 , \"b\" : [ 1 , -2 , 3.5 ] } \n",
      R"({"operation_type":"profile_grouped_conv_fwd","profiler_args":{"data_type":1,"layout":3,)"
      R"("filter_spatial":[3,3],"split_k":"all"},"metadata":{"priority_rank":4,)"
      R"("description":"Forward conv: G=1","gpu_time_us":12.5,"count":3}})",
      "[0, -0, 1, -1, 18446744073709551615, -9223372036854775808, 9223372036854775808]",
      "[0.0, -0.0, 1.5, -2e10, 1E+2, 2.5e-3, 1e308, 123456789.123456789]",
      R"(["", "a\"b", "\\", "\/", "\b\f\n\r\t", "x y z"])",
      "[true, false, null, [[], {}], {\"x\": {\"y\": {\"z\": [null]}}}]",
      // A repeated key keeps its first place and takes the last value.
      R"({"a": 1, "b": 2, "a": 3})",
      "7",
      "\"text\"",
  };
  for (const auto& in : inputs) {
    SCOPED_TRACE(in);
    auto fast = FastJsonParse(in);
    ASSERT_TRUE(fast.has_value());
    EXPECT_TRUE(JsonIdentical(*fast, json::parse(in))) << fast->dump();
  }
  // Types as nlohmann gives them.
  auto v = FastJsonParse("[1, -1, 1.0]");
  ASSERT_TRUE(v);
  EXPECT_TRUE((*v)[0].is_number_unsigned());
  EXPECT_TRUE((*v)[1].is_number_integer() && !(*v)[1].is_number_unsigned());
  EXPECT_TRUE((*v)[2].is_number_float());
  EXPECT_EQ((*FastJsonParse(R"({"a": 1, "b": 2, "a": 3})")).dump(), R"({"a":3,"b":2})");
}

TEST(FastJson, DeclinesWhatIsNotJson) {
  for (const char* in :
       {"",     " ",     "01",       "1.",         ".5",        "-",      "+1",       "1e",
        "1e+",  "[1,]",  "[,1]",     "{\"a\":1,}", "{\"a\" 1}", "{a:1}",  "{'a':1}",  "tru",
        "nul",  "[1 2]", "\"a\tb\"", "\"\\x\"",    "\"open",    "[1",     "{\"a\":1", "1 2",
        "[1]]", "NaN",   "Infinity", "-Infinity",  "0x10",      "[1,,2]", "1e999"}) {
    SCOPED_TRACE(in);
    EXPECT_FALSE(FastJsonParse(in).has_value());
    EXPECT_TRUE(json::parse(in, nullptr, false).is_discarded());
  }
}

TEST(FastJson, DeclinesValidJsonItDoesNotReadAsNlohmannDoes) {
  std::string many_keys = "{";
  for (int i = 0; i <= static_cast<int>(kFastJsonMaxKeys); ++i) {
    many_keys += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  }
  many_keys += "}";
  const std::string deep =
      std::string(kFastJsonMaxDepth + 1, '[') + std::string(kFastJsonMaxDepth + 1, ']');
  for (const std::string& in : {std::string("\"caf\xc3\xa9\""), std::string("\"\\u0041\""),
                                many_keys, deep, std::string("18446744073709551616"),
                                std::string("-9223372036854775809"), std::string("1e-400")}) {
    SCOPED_TRACE(in);
    EXPECT_FALSE(FastJsonParse(in).has_value());
    EXPECT_FALSE(json::parse(in, nullptr, false).is_discarded());  // valid, nlohmann's to read
  }
  // Just within the limits: read.
  std::string keys = "{";
  for (int i = 0; i < static_cast<int>(kFastJsonMaxKeys); ++i) {
    keys += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  }
  keys += ",\"k0\":true}";  // a repeat is no new key
  auto fast = FastJsonParse(keys);
  ASSERT_TRUE(fast.has_value());
  EXPECT_TRUE(JsonIdentical(*fast, json::parse(keys)));
  const std::string nested =
      std::string(kFastJsonMaxDepth, '[') + std::string(kFastJsonMaxDepth, ']');
  EXPECT_TRUE(FastJsonParse(nested).has_value());
}

TEST(FastJson, ValueReadsOneValueAndSaysWhereItEnds) {
  const std::string text = "  {\"a\": [1, 2]} , 7";
  size_t pos = 0;
  auto first = FastJsonValue(text, &pos);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->dump(), R"({"a":[1,2]})");
  EXPECT_EQ(text.substr(pos), " , 7");
  pos += 3;
  auto second = FastJsonValue(text, &pos);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(*second, 7);
  EXPECT_EQ(pos, text.size());
  pos = text.size() + 1;
  EXPECT_FALSE(FastJsonValue(text, &pos).has_value());
}

}  // namespace
}  // namespace ckprof

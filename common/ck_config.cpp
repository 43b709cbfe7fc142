#include "common/ck_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <span>

namespace ckprof {
namespace {

using json = nlohmann::ordered_json;

std::string JoinList(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  return s + "]";
}

// ASCII case-insensitive equality: "NHWC" and "Fp16" name what "nhwc" and "fp16" do.
bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// "config 4" for index 3: users count configs (and tasks, records) from 1.
std::string ConfigName(size_t index) { return "config " + std::to_string(index + 1); }

std::string Where(size_t index, std::string_view field) {
  return ConfigName(index) + ": field " + std::string(field);
}

// Reads an integer field, rejecting floats, strings, booleans and out-of-range values.
Result<int64_t> GetInt(const json& obj, std::string_view key, size_t index, std::string_view prefix,
                       int64_t min, int64_t max) {
  // (The field's name is made for an error only: this runs for every field of every config.)
  auto field = [&] { return std::string(prefix) + std::string(key); };
  auto it = obj.find(key);
  if (it == obj.end()) return MakeError(Where(index, field()) + " is missing");
  if (!it->is_number_integer()) {
    return MakeError(Where(index, field()) + " must be an integer, got " + it->dump());
  }
  int64_t v = 0;
  if (it->is_number_unsigned()) {
    auto u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return MakeError(Where(index, field()) + " is out of range: " + it->dump());
    }
    v = static_cast<int64_t>(u);
  } else {
    v = it->get<int64_t>();
  }
  if (v < min || v > max) {
    return MakeError(Where(index, field()) + " must be between " + std::to_string(min) + " and " +
                     std::to_string(max) + ", got " + std::to_string(v));
  }
  return v;
}

Result<std::vector<int64_t>> GetList(const json& obj, std::string_view key, size_t index, int nd,
                                     int64_t min) {
  auto field = [&] { return "profiler_args." + std::string(key); };
  auto it = obj.find(key);
  if (it == obj.end()) return MakeError(Where(index, field()) + " is missing");
  if (!it->is_array()) return MakeError(Where(index, field()) + " must be a list of integers");
  if (static_cast<int>(it->size()) != nd) {
    return MakeError(Where(index, field()) + " has " + std::to_string(it->size()) +
                     " entries but num_dim_spatial is " + std::to_string(nd));
  }
  std::vector<int64_t> out;
  out.reserve(it->size());
  for (const auto& e : *it) {
    if (!e.is_number_integer()) {
      return MakeError(Where(index, field()) + " must hold integers, got " + e.dump());
    }
    if (e.is_number_unsigned() &&
        e.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
      return MakeError(Where(index, field()) + " value is out of range: " + e.dump());
    }
    int64_t v = e.get<int64_t>();
    if (v < min || v > std::numeric_limits<int32_t>::max()) {
      return MakeError(Where(index, field()) + " value " + std::to_string(v) + " is out of range");
    }
    out.push_back(v);
  }
  return out;
}

constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();

}  // namespace

std::string_view OperationTypeName(ConvOp op) {
  switch (op) {
    case ConvOp::kFwd:
      return "profile_grouped_conv_fwd";
    case ConvOp::kBwdData:
      return "profile_grouped_conv_bwd_data";
    case ConvOp::kBwdWeight:
      return "profile_grouped_conv_bwd_weight";
  }
  return "";
}

std::string_view CkOperationName(ConvOp op) { return OperationTypeName(op).substr(8); }

std::string ShortOp(std::string_view operation_type) {
  if (operation_type.find("bwd_data") != std::string_view::npos) return "bwd_data";
  if (operation_type.find("bwd_weight") != std::string_view::npos) return "bwd_weight";
  return "fwd";
}

std::string_view ShortOpName(ConvOp op) {
  switch (op) {
    case ConvOp::kFwd:
      return "fwd";
    case ConvOp::kBwdData:
      return "bwd_data";
    case ConvOp::kBwdWeight:
      return "bwd_weight";
  }
  return "";
}

std::optional<ConvOp> ParseOperationType(std::string_view name) {
  for (ConvOp op : {ConvOp::kFwd, ConvOp::kBwdData, ConvOp::kBwdWeight}) {
    if (name == OperationTypeName(op) || name == CkOperationName(op) || name == ShortOpName(op)) {
      return op;
    }
  }
  return std::nullopt;
}

std::string_view DataTypeName(DataType t) {
  switch (t) {
    case DataType::kFp32:
      return "fp32";
    case DataType::kFp16:
      return "fp16";
    case DataType::kBf16:
      return "bf16";
  }
  return "";
}

std::optional<DataType> ParseDataTypeName(std::string_view name) {
  for (DataType t : {DataType::kFp32, DataType::kFp16, DataType::kBf16}) {
    if (EqualsIgnoringCase(name, DataTypeName(t))) return t;
  }
  return std::nullopt;
}

std::string_view LayoutName(Layout l) { return l == Layout::kNchw ? "nchw" : "nhwc"; }

std::optional<Layout> ParseLayoutName(std::string_view name) {
  if (EqualsIgnoringCase(name, "nchw")) return Layout::kNchw;
  if (EqualsIgnoringCase(name, "nhwc")) return Layout::kNhwc;
  return std::nullopt;
}

int EncodeDataType(ConvOp op, DataType t) {
  switch (t) {
    case DataType::kFp32:
      return 0;
    case DataType::kFp16:
      return 1;
    case DataType::kBf16:
      return op == ConvOp::kBwdWeight ? 5 : 2;
  }
  return 1;
}

int EncodeLayout(ConvOp op, Layout l) {
  const bool bwd_weight = op == ConvOp::kBwdWeight;
  if (l == Layout::kNchw) return bwd_weight ? 4 : 3;
  return bwd_weight ? 2 : 1;
}

int64_t CkConfig::priority_rank() const {
  auto it = metadata.find("priority_rank");
  if (it != metadata.end() && it->is_number_integer()) return it->get<int64_t>();
  return 0;
}

std::string CkConfig::description() const {
  auto it = metadata.find("description");
  if (it != metadata.end() && it->is_string()) return it->get<std::string>();
  return Describe(*this);
}

std::vector<int64_t> CkConfig::OutputSpatial() const {
  std::vector<int64_t> out;
  for (int i = 0; i < num_dim_spatial; ++i) {
    auto at = [&](const std::vector<int64_t>& v, int64_t dflt) {
      return i < static_cast<int>(v.size()) ? v[i] : dflt;
    };
    int64_t span = at(dilations, 1) * (at(filter_spatial, 1) - 1) + 1;
    int64_t stride = std::max<int64_t>(1, at(strides, 1));
    int64_t padded = at(input_spatial, 1) + at(left_pads, 0) + at(right_pads, 0);
    out.push_back(padded < span ? 0 : (padded - span) / stride + 1);
  }
  return out;
}

double CkConfig::Flops() const {
  double f = 2.0 * G * N * K * C;
  for (int64_t o : OutputSpatial()) f *= static_cast<double>(o);
  for (int64_t x : filter_spatial) f *= static_cast<double>(x);
  return f;
}

double CkConfig::Bytes(int bytes_per_element) const {
  double in = static_cast<double>(G) * N * C, wei = static_cast<double>(G) * K * C,
         out = static_cast<double>(G) * N * K;
  for (int64_t x : input_spatial) in *= static_cast<double>(x);
  for (int64_t x : filter_spatial) wei *= static_cast<double>(x);
  for (int64_t x : OutputSpatial()) out *= static_cast<double>(x);
  return (in + wei + out) * bytes_per_element;
}

std::string Describe(const CkConfig& c) {
  std::string head;
  switch (c.op) {
    case ConvOp::kFwd:
      head = "Forward conv: ";
      break;
    case ConvOp::kBwdData:
      head = "Backward data conv: ";
      break;
    case ConvOp::kBwdWeight:
      head = "Backward weight conv: ";
      break;
  }
  return head + "G=" + std::to_string(c.G) + ", N=" + std::to_string(c.N) +
         ", K=" + std::to_string(c.K) + ", C=" + std::to_string(c.C) + ", " +
         JoinList(c.filter_spatial) + " kernel, " + JoinList(c.input_spatial) + " input";
}

nlohmann::ordered_json ConfigToJson(const CkConfig& c) {
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  args["data_type"] = c.data_type;
  args["layout"] = c.layout;
  if (c.op == ConvOp::kFwd) args["index_type"] = c.index_type.value_or(0);
  args["verify"] = c.verify;
  args["init"] = c.init;
  args["log"] = c.log;
  args["time"] = c.time;
  args["num_dim_spatial"] = c.num_dim_spatial;
  args["G"] = c.G;
  args["N"] = c.N;
  args["K"] = c.K;
  args["C"] = c.C;
  args["filter_spatial"] = c.filter_spatial;
  args["input_spatial"] = c.input_spatial;
  args["strides"] = c.strides;
  args["dilations"] = c.dilations;
  args["left_pads"] = c.left_pads;
  args["right_pads"] = c.right_pads;
  if (c.op != ConvOp::kFwd) {
    if (c.split_k.empty() || c.split_k == "all") {
      args["split_k"] = "all";
    } else {
      args["split_k"] = std::stoll(c.split_k);
    }
  }
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["operation_type"] = OperationTypeName(c.op);
  j["profiler_args"] = std::move(args);
  j["metadata"] = c.metadata;
  return j;
}

namespace {

// One value of a ckProfiler enum argument and what it means.
struct EnumValue {
  int value;
  const char* meaning;
};

// ckProfiler's data_type and layout enums, per operation (ck-profiler.md).
std::span<const EnumValue> DataTypeEnum(ConvOp op) {
  static constexpr EnumValue kFwd[] = {
      {0, "fp32"}, {1, "fp16"}, {2, "bf16"}, {3, "int8"}, {8, "tf32"}};
  static constexpr EnumValue kBwdData[] = {{0, "fp32"}, {1, "fp16"}, {2, "bf16"}, {3, "tf32"}};
  static constexpr EnumValue kBwdWeight[] = {
      {0, "fp32"}, {1, "fp16"}, {2, "bf16 data, fp32 weights"},
      {4, "int8"}, {5, "bf16"}, {6, "tf32"}};
  switch (op) {
    case ConvOp::kFwd:
      return kFwd;
    case ConvOp::kBwdData:
      return kBwdData;
    case ConvOp::kBwdWeight:
      return kBwdWeight;
  }
  return {};
}

std::span<const EnumValue> LayoutEnum(ConvOp op) {
  static constexpr EnumValue kFwdOrData[] = {{0, "GNHWC_GKYXC_GNHWK"},
                                             {1, "NHWGC_GKYXC_NHWGK"},
                                             {2, "NGCHW_GKYXC_NGKHW"},
                                             {3, "NGCHW_GKCYX_NGKHW"}};
  static constexpr EnumValue kBwdWeight[] = {{0, "GNCHW_GKCYX_GNKHW"},
                                             {1, "GNHWC_GKYXC_GNHWK"},
                                             {2, "NHWGC_GKYXC_NHWGK"},
                                             {3, "NGCHW_GKYXC_NGKHW"},
                                             {4, "NGCHW_GKCYX_NGKHW"}};
  return op == ConvOp::kBwdWeight ? std::span<const EnumValue>(kBwdWeight)
                                  : std::span<const EnumValue>(kFwdOrData);
}

bool IsEnumValue(std::span<const EnumValue> values, int v) {
  return std::any_of(values.begin(), values.end(),
                     [v](const EnumValue& e) { return e.value == v; });
}

// "0 fp32, 1 fp16, 2 bf16".
std::string DescribeEnum(std::span<const EnumValue> values) {
  std::string out;
  for (const auto& e : values) {
    if (!out.empty()) out += ", ";
    out += std::to_string(e.value) + " " + e.meaning;
  }
  return out;
}

Result<CkConfig> ConfigFromJsonImpl(const json& j, size_t index, json* metadata_to_move) {
  const std::string who = ConfigName(index);
  if (!j.is_object()) return MakeError(who + ": must be a JSON object, got " + j.type_name());
  auto op_it = j.find("operation_type");
  if (op_it == j.end()) return MakeError(Where(index, "operation_type") + " is missing");
  if (!op_it->is_string()) return MakeError(Where(index, "operation_type") + " must be a string");
  auto op = ParseOperationType(op_it->get<std::string>());
  if (!op) {
    return MakeError(Where(index, "operation_type") + " is unknown: \"" +
                     op_it->get<std::string>() +
                     "\" (expected profile_grouped_conv_fwd, profile_grouped_conv_bwd_data or "
                     "profile_grouped_conv_bwd_weight)");
  }
  auto args_it = j.find("profiler_args");
  if (args_it == j.end()) return MakeError(Where(index, "profiler_args") + " is missing");
  if (!args_it->is_object()) return MakeError(Where(index, "profiler_args") + " must be an object");
  const json& a = *args_it;
  CkConfig c;
  c.op = *op;
  const std::string_view p = "profiler_args.";
#define CKPROF_GET_INT(target, key, lo, hi)     \
  do {                                          \
    auto r = GetInt(a, key, index, p, lo, hi);  \
    if (!r) return Error{r.error()};            \
    target = static_cast<decltype(target)>(*r); \
  } while (0)
  CKPROF_GET_INT(c.data_type, "data_type", 0, 64);
  CKPROF_GET_INT(c.layout, "layout", 0, 64);
  // A value outside the operation's enum would fail only at run time (and be retried as a
  // failure): refuse it here, with the values this operation has.
  if (!IsEnumValue(DataTypeEnum(c.op), c.data_type)) {
    return MakeError(Where(index, "profiler_args.data_type") + " is " +
                     std::to_string(c.data_type) + ", which " + std::string(CkOperationName(c.op)) +
                     " does not have (its data types: " + DescribeEnum(DataTypeEnum(c.op)) + ")");
  }
  if (!IsEnumValue(LayoutEnum(c.op), c.layout)) {
    return MakeError(Where(index, "profiler_args.layout") + " is " + std::to_string(c.layout) +
                     ", which " + std::string(CkOperationName(c.op)) +
                     " does not have (its layouts: " + DescribeEnum(LayoutEnum(c.op)) + ")");
  }
  if (c.op == ConvOp::kFwd) {
    if (a.contains("index_type")) {
      int it = 0;
      CKPROF_GET_INT(it, "index_type", 0, 1);
      c.index_type = it;
    } else {
      c.index_type = 0;
    }
  }
  CKPROF_GET_INT(c.verify, "verify", 0, 1);
  CKPROF_GET_INT(c.init, "init", 0, 2);
  CKPROF_GET_INT(c.log, "log", 0, 1);
  CKPROF_GET_INT(c.time, "time", 0, 1);
  CKPROF_GET_INT(c.num_dim_spatial, "num_dim_spatial", 1, 3);
  CKPROF_GET_INT(c.G, "G", 1, kMaxDim);
  CKPROF_GET_INT(c.N, "N", 1, kMaxDim);
  CKPROF_GET_INT(c.K, "K", 1, kMaxDim);
  CKPROF_GET_INT(c.C, "C", 1, kMaxDim);
#undef CKPROF_GET_INT
  struct ListField {
    const char* key;
    std::vector<int64_t>* target;
    int64_t min;
  } lists[] = {{"filter_spatial", &c.filter_spatial, 1},
               {"input_spatial", &c.input_spatial, 1},
               {"strides", &c.strides, 1},
               {"dilations", &c.dilations, 1},
               {"left_pads", &c.left_pads, 0},
               {"right_pads", &c.right_pads, 0}};
  for (const auto& f : lists) {
    auto r = GetList(a, f.key, index, c.num_dim_spatial, f.min);
    if (!r) return Error{r.error()};
    *f.target = std::move(*r);
  }
  if (c.op != ConvOp::kFwd) {
    auto sk = a.find("split_k");
    if (sk == a.end() || (sk->is_string() && sk->get<std::string>() == "all")) {
      c.split_k = "all";
    } else if (sk->is_number_integer() && sk->get<int64_t>() >= -1 &&
               sk->get<int64_t>() <= 1 << 20) {
      c.split_k = std::to_string(sk->get<int64_t>());
    } else if (sk->is_string()) {
      const std::string s = sk->get<std::string>();
      char* end = nullptr;
      long v = std::strtol(s.c_str(), &end, 10);
      if (s.empty() || *end != '\0' || v < -1 || v > (1 << 20)) {
        return MakeError(Where(index, "profiler_args.split_k") +
                         " must be \"all\" or an integer >= -1, got \"" + s + "\"");
      }
      c.split_k = std::to_string(v);
    } else {
      return MakeError(Where(index, "profiler_args.split_k") +
                       " must be \"all\" or an integer >= -1, got " + sk->dump());
    }
  }
  for (int64_t o : c.OutputSpatial()) {
    if (o <= 0) return MakeError(who + ": the output would be empty (check sizes, pads, strides)");
  }
  auto md = j.find("metadata");
  if (md != j.end()) {
    if (!md->is_object()) return MakeError(Where(index, "metadata") + " must be an object");
    if (metadata_to_move) {
      c.metadata = std::move(*metadata_to_move);
    } else {
      c.metadata = *md;
    }
  }
  if (!c.metadata.contains("priority_rank")) c.metadata["priority_rank"] = index + 1;
  return c;
}

}  // namespace

namespace {

std::string JoinDims(const std::vector<int64_t>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "x" : "") + std::to_string(v[i]);
  return out;
}

std::string EnumMeaning(std::span<const EnumValue> values, int v) {
  for (const auto& e : values) {
    if (e.value == v) return e.meaning;
  }
  return std::to_string(v);
}

}  // namespace

std::string ProblemKey(const CkConfig& c) {
  std::string dt = EnumMeaning(DataTypeEnum(c.op), c.data_type);
  for (char& ch : dt) ch = ch == ' ' ? '_' : ch;  // one word: "bf16_data,_fp32_weights"
  std::string k = std::string(ShortOpName(c.op)) + " " + dt + " " +
                  EnumMeaning(LayoutEnum(c.op), c.layout) + " G=" + std::to_string(c.G) +
                  " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
                  " C=" + std::to_string(c.C) + " filter=" + JoinDims(c.filter_spatial) +
                  " input=" + JoinDims(c.input_spatial) + " stride=" + JoinDims(c.strides) +
                  " dilation=" + JoinDims(c.dilations) + " pad=" + JoinDims(c.left_pads) + "+" +
                  JoinDims(c.right_pads);
  if (c.op != ConvOp::kFwd) k += " split_k=" + c.split_k;
  if (c.index_type.value_or(0) != 0) k += " index=64bit";
  if (c.verify != 0) k += " verify";
  if (c.init != 1) k += " init=" + std::to_string(c.init);
  if (c.time == 0) k += " untimed";
  return k;
}

Result<CkConfig> ConfigFromJson(const json& j, size_t index) {
  return ConfigFromJsonImpl(j, index, nullptr);
}

Result<CkConfig> ConfigFromJson(json&& j, size_t index) {
  // The metadata is taken, not copied (a configs file of 100,000 records has as many).
  json* md = nullptr;
  if (j.is_object()) {
    auto it = j.find("metadata");
    if (it != j.end()) md = &*it;
  }
  return ConfigFromJsonImpl(j, index, md);
}

Result<std::vector<CkConfig>> ConfigsFromJson(const json& j) {
  if (!j.is_array()) {
    return MakeError(std::string("a configs file must be a JSON array of configs, got ") +
                     j.type_name());
  }
  std::vector<CkConfig> out;
  out.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    auto c = ConfigFromJson(j[i], i);
    if (!c) return Error{c.error()};
    out.push_back(std::move(*c));
  }
  return out;
}

std::string ConfigsToText(const std::vector<CkConfig>& configs) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const auto& c : configs) arr.push_back(ConfigToJson(c));
  return arr.dump(2, ' ', /*ensure_ascii=*/false) + "\n";
}

}  // namespace ckprof

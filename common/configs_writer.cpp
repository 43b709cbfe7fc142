// The configs file's writer (see configs_writer.h).
#include "common/configs_writer.h"

#include <charconv>
#include <cstdio>

#include "common/file_util.h"
#include "common/json_util.h"

namespace ckprof {
namespace {

using json = nlohmann::ordered_json;

void AppendInt(std::string* out, int64_t v) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  (void)ec;
  out->append(buf, p);
}

// A config's text in the configs file's layout (2-space indentation, nlohmann's) or compact,
// as DumpJson writes it (a stored task): the same tokens, with or without the whitespace.
class ConfigWriter {
 public:
  ConfigWriter(std::string* out, bool compact) : out_(out), compact_(compact) {}

  void Config(const CkConfig& c) {
    Put("  {\n    \"operation_type\": \"", "{\"operation_type\":\"");
    out_->append(OperationTypeName(c.op));
    Put("\",\n    \"profiler_args\": {\n", "\",\"profiler_args\":{");
    auto scalar = [&](std::string_view key, int64_t v) {
      Key(key);
      AppendInt(out_, v);
      Put(",\n", ",");
    };
    scalar("data_type", c.data_type);
    scalar("layout", c.layout);
    if (c.op == ConvOp::kFwd) scalar("index_type", c.index_type.value_or(0));
    scalar("verify", c.verify);
    scalar("init", c.init);
    scalar("log", c.log);
    scalar("time", c.time);
    scalar("num_dim_spatial", c.num_dim_spatial);
    scalar("G", c.G);
    scalar("N", c.N);
    scalar("K", c.K);
    scalar("C", c.C);
    const std::pair<std::string_view, const std::vector<int64_t>*> lists[] = {
        {"filter_spatial", &c.filter_spatial},
        {"input_spatial", &c.input_spatial},
        {"strides", &c.strides},
        {"dilations", &c.dilations},
        {"left_pads", &c.left_pads},
        {"right_pads", &c.right_pads}};
    for (size_t i = 0; i < std::size(lists); ++i) {
      List(lists[i].first, *lists[i].second);
      const bool last = i + 1 == std::size(lists) && c.op == ConvOp::kFwd;
      Put(last ? "\n" : ",\n", last ? "" : ",");
    }
    if (c.op != ConvOp::kFwd) {
      Key("split_k");
      int64_t k = 0;
      auto [p, ec] = std::from_chars(c.split_k.data(), c.split_k.data() + c.split_k.size(), k);
      if (c.split_k.empty() || ec != std::errc() || p != c.split_k.data() + c.split_k.size()) {
        out_->append("\"all\"");
      } else {
        AppendInt(out_, k);
      }
      Put("\n", "");
    }
    Put("    },\n    \"metadata\": ", "},\"metadata\":");
    if (compact_) {
      out_->append(c.metadata.dump(-1, ' ', false, json::error_handler_t::replace));
    } else {
      // The metadata is free-form: let nlohmann lay it out, then indent it to its place.
      const std::string md = c.metadata.dump(2, ' ', false, json::error_handler_t::replace);
      for (char ch : md) {
        out_->push_back(ch);
        if (ch == '\n') out_->append("    ");
      }
    }
    Put("\n  }", "}");
  }

 private:
  void Put(std::string_view pretty, std::string_view compact) {
    out_->append(compact_ ? compact : pretty);
  }
  // `"key": ` at the indentation of profiler_args' members.
  void Key(std::string_view key) {
    Put("      \"", "\"");
    out_->append(key);
    Put("\": ", "\":");
  }
  void List(std::string_view key, const std::vector<int64_t>& v) {
    Key(key);
    if (v.empty()) {
      out_->append("[]");
      return;
    }
    Put("[\n", "[");
    for (size_t i = 0; i < v.size(); ++i) {
      Put("        ", "");
      AppendInt(out_, v[i]);
      const bool last = i + 1 == v.size();
      Put(last ? "\n" : ",\n", last ? "" : ",");
    }
    Put("      ]", "]");
  }

  std::string* out_;
  bool compact_;
};

}  // namespace

std::string FormatConfigsText(const std::vector<CkConfig>& configs) {
  if (configs.empty()) return "[]\n";
  std::string out = "[\n";
  for (size_t i = 0; i < configs.size(); ++i) {
    ConfigWriter(&out, false).Config(configs[i]);
    out.append(i + 1 < configs.size() ? ",\n" : "\n");
  }
  out.append("]\n");
  return out;
}

std::string ConfigJsonText(const CkConfig& c) {
  std::string out;
  out.reserve(512);
  ConfigWriter(&out, true).Config(c);
  return out;
}

Status WriteConfigsFile(const std::string& path, const std::vector<CkConfig>& configs) {
  AtomicFileWriter w;
  if (Status s = w.Open(path); !s) return s;
  if (configs.empty()) {
    if (Status s = w.Write("[]\n"); !s) return s;
    return w.Commit();
  }
  std::string chunk = "[\n";
  for (size_t i = 0; i < configs.size(); ++i) {
    ConfigWriter(&chunk, false).Config(configs[i]);
    chunk.append(i + 1 < configs.size() ? ",\n" : "\n");
    if (chunk.size() >= (1 << 16)) {
      if (Status s = w.Write(chunk); !s) return s;
      chunk.clear();
    }
  }
  chunk.append("]\n");
  if (Status s = w.Write(chunk); !s) return s;
  return w.Commit();
}

}  // namespace ckprof

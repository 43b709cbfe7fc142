// ckprof compare: two runs of the same configs side by side — typically a CK job and a job of the
// PyTorch baseline profiler (tools/torch-conv-profiler) — per config both times and the speedup,
// ranked by priority_rank, with a geometric-mean summary. Each side is a job id (fetched from the
// daemon) or a results file (profiler_results.json).
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>

#include "client/args.h"
#include "client/client_util.h"
#include "client/commands.h"
#include "common/ck_config.h"
#include "common/file_util.h"
#include "common/results_file.h"
#include "common/terminal_text.h"
#include "common/text_table.h"
#include "common/wire_fields.h"

namespace ckprof {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// One config's result on one side.
struct Entry {
  int64_t position = 0;  // 1-based
  int64_t rank = 0;      // priority_rank
  std::string op;        // fwd, bwd_data, bwd_weight
  std::string description;
  std::string signature;  // the problem from the config's profiler_args; empty when absent
  // A TaskState's name (succeeded, failed, ...), a results file's "status", or "no time".
  std::string state;
  std::string data_type;  // "fp16", "bf16", ... from the config; empty when unknown
  std::string layout;     // "nchw", "nhwc", or CK's name of another layout; empty when unknown
  double avg_ms = 0;
  double tflops = 0;
  std::string best;
  bool contended = false;  // a foreign process used its GPU while it ran
  // Run several times (--repeat): avg_ms is the median of `runs` timed runs, from min_ms to
  // max_ms, with coefficient of variation cv. runs <= 1: run once, no spread known.
  int runs = 1;
  double min_ms = 0, max_ms = 0, cv = 0;
  bool noisy = false;
  bool has_spread() const { return runs > 1 && comparable(); }
  // A time that can be compared: a success with a positive, finite time (time=0 runs have none).
  bool comparable() const {
    return state == EnumName(TaskState::kSucceeded) && avg_ms > 0 && std::isfinite(avg_ms);
  }
};

// One side of the comparison: where it came from and what it holds.
struct Side {
  std::string label;  // "job 12 (resnet)" or the file path, for the legend
  std::string name;   // "job 12" or the file's base name, for columns
  std::string source;
  int64_t job_id = 0;
  std::vector<Entry> entries;
};

// CK's data_type enum, which differs per operation (docs: ck-profiler.md), as a name.
std::string DataTypeName(const std::string& op, int64_t v) {
  static const std::map<int64_t, const char*> fwd = {
      {0, "fp32"}, {1, "fp16"}, {2, "bf16"}, {3, "int8"}, {8, "tf32"}};
  static const std::map<int64_t, const char*> bwd_data = {
      {0, "fp32"}, {1, "fp16"}, {2, "bf16"}, {3, "tf32"}};
  static const std::map<int64_t, const char*> bwd_weight = {
      {0, "fp32"}, {1, "fp16"}, {2, "bf16 with fp32 weights"},
      {4, "int8"}, {5, "bf16"}, {6, "tf32"}};
  const auto& names = op == "bwd_weight" ? bwd_weight : op == "bwd_data" ? bwd_data : fwd;
  auto it = names.find(v);
  return it != names.end() ? it->second : "data_type " + std::to_string(v);
}

// CK's layout enum, likewise: PyTorch's two as "nchw" and "nhwc", the others by CK's names.
std::string LayoutName(const std::string& op, int64_t v) {
  static const std::map<int64_t, const char*> fwd = {
      {0, "GNHWC"}, {1, "nhwc"}, {2, "NGCHW_GKYXC"}, {3, "nchw"}};
  static const std::map<int64_t, const char*> bwd_weight = {
      {0, "GNCHW"}, {1, "GNHWC"}, {2, "nhwc"}, {3, "NGCHW_GKYXC"}, {4, "nchw"}};
  const auto& names = op == "bwd_weight" ? bwd_weight : fwd;
  auto it = names.find(v);
  return it != names.end() ? it->second : "layout " + std::to_string(v);
}

// Sets e's data type and layout from its config (left empty when the config does not say).
void SetTypeAndLayout(const json& config, Entry* e) {
  if (!config.is_object()) return;
  auto args = config.find("profiler_args");
  if (args == config.end() || !args->is_object()) return;
  auto type = args->find("data_type");
  if (type != args->end() && type->is_number_integer()) {
    e->data_type = DataTypeName(e->op, type->get<int64_t>());
  }
  auto layout = args->find("layout");
  if (layout != args->end() && layout->is_number_integer()) {
    e->layout = LayoutName(e->op, layout->get<int64_t>());
  }
}

// The values of one property over a side's configs, most frequent first: "bf16" when all
// agree, "fp16 (30), bf16 (2)" when not, "unknown" when no config says.
std::string Census(const Side& side, std::string Entry::*field) {
  std::map<std::string, int64_t> counts;
  for (const Entry& e : side.entries) {
    if (!(e.*field).empty()) ++counts[e.*field];
  }
  if (counts.empty()) return "unknown";
  if (counts.size() == 1) return counts.begin()->first;
  std::vector<std::pair<std::string, int64_t>> by_count(counts.begin(), counts.end());
  std::stable_sort(by_count.begin(), by_count.end(),
                   [](const auto& x, const auto& y) { return x.second > y.second; });
  std::string out;
  for (const auto& [value, n] : by_count) {
    out += (out.empty() ? "" : ", ") + value + " (" + std::to_string(n) + ")";
  }
  return out;
}

// "data type bf16, layout nchw": what a side's legend line says of its configs.
std::string TypeAndLayout(const Side& side) {
  return "data type " + Census(side, &Entry::data_type) + ", layout " +
         Census(side, &Entry::layout);
}

// The problem a config describes, as a canonical string: what identifies it beyond its
// description (which omits strides, pads and the data type).
std::string Signature(const json& config) {
  if (!config.is_object()) return "";
  auto args = config.find("profiler_args");
  if (args == config.end() || !args->is_object()) return "";
  json sig = json::object();
  for (const char* key :
       {"data_type", "layout", "num_dim_spatial", "G", "N", "K", "C", "filter_spatial",
        "input_spatial", "strides", "dilations", "left_pads", "right_pads"}) {
    if (auto it = args->find(key); it != args->end()) sig[key] = *it;
  }
  return sig.dump();
}

void SetSpread(const RepeatStats& r, Entry* e) {
  e->runs = r.succeeded;
  e->min_ms = r.min_ms;
  e->max_ms = r.max_ms;
  e->cv = r.cv;
  e->noisy = r.noisy;
}

Entry FromTask(const TaskResult& t) {
  Entry e;
  e.position = t.position;
  e.rank = t.priority_rank;
  e.op = ShortOp(t.operation);
  e.description = t.description;
  const json config = json::parse(t.config.dump());
  e.signature = Signature(config);
  SetTypeAndLayout(config, &e);
  e.state = EnumName(t.state);
  if (t.ok()) {
    e.avg_ms = t.avg_ms;
    e.tflops = t.tflops;
  }
  e.best = t.best_name;
  e.contended = !t.contended.empty();
  if (t.repeats) SetSpread(*t.repeats, &e);
  return e;
}

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Reads a profiler_results.json ({"results": [...]}, or the bare array).
Result<Side> LoadFile(const std::string& path) {
  auto text = ReadInputFile(path);
  if (!text) return Error{text.error()};
  json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return MakeError(path +
                     ": not valid JSON (expected a profiler_results.json from 'ckprof run' "
                     "or 'ckprof results JOB --format json')");
  }
  const json* results = &doc;
  if (doc.is_object()) {
    auto it = doc.find("results");
    if (it == doc.end()) {
      return MakeError(path +
                       ": no \"results\" array (expected a profiler_results.json from "
                       "'ckprof run' or 'ckprof results JOB --format json')");
    }
    results = &*it;
  }
  if (!results->is_array()) return MakeError(path + ": \"results\" is not an array");
  Side side;
  side.label = path;
  side.name = BaseName(path);
  side.source = path;
  int64_t index = 0;
  for (const json& r : *results) {
    ++index;
    const std::string where = path + ": results[" + std::to_string(index - 1) + "]";
    if (!r.is_object()) return MakeError(where + " is not an object");
    Entry e;
    auto op = r.find("operation");
    if (op == r.end() || !op->is_string()) {
      return MakeError(where + ": \"operation\" is missing or not a string");
    }
    e.op = ShortOp(op->get<std::string>());
    e.description =
        r.value("description", json()).is_string() ? r["description"].get<std::string>() : "";
    auto number = [&](const char* key, int64_t dflt) -> int64_t {
      auto it = r.find(key);
      return it != r.end() && it->is_number_integer() ? it->get<int64_t>() : dflt;
    };
    e.position = number("position", index);
    e.rank = number("priority_rank", e.position);
    const bool success = r.value("success", json(false)).is_boolean() && r["success"].get<bool>();
    auto status = r.find("status");
    const std::string succeeded(EnumName(TaskState::kSucceeded));
    const std::string failed(EnumName(TaskState::kFailed));
    e.state = status != r.end() && status->is_string() ? status->get<std::string>()
                                                       : (success ? succeeded : failed);
    if (!success && e.state == succeeded) e.state = failed;
    auto ms = r.find("avg_time_ms");
    if (success && ms != r.end() && ms->is_number()) e.avg_ms = ms->get<double>();
    if (success && e.avg_ms <= 0) e.state = "no time";  // the original tool's results: no ms
    auto tflops = r.find("tflops");
    if (tflops != r.end() && tflops->is_number()) e.tflops = tflops->get<double>();
    auto best = r.find("best_instance");
    if (best != r.end() && best->is_string()) e.best = best->get<std::string>();
    auto contended = r.find("contended");
    e.contended = contended != r.end() && contended->is_boolean() && contended->get<bool>();
    if (auto rep = r.find("repeats"); rep != r.end() && rep->is_object()) {
      if (auto stats = FromDom<RepeatStats>(*rep, "repeats")) SetSpread(*stats, &e);
    }
    if (auto c = r.find("config"); c != r.end()) {
      e.signature = Signature(*c);
      SetTypeAndLayout(*c, &e);
    }
    side.entries.push_back(std::move(e));
  }
  return side;
}

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

// A matched (or unmatched) row: a or b may be null.
struct Row {
  const Entry* a = nullptr;
  const Entry* b = nullptr;
  int64_t rank() const { return a ? a->rank : b->rank; }
  int64_t position() const { return a ? a->position : b->position; }
  bool compared() const { return a && b && a->comparable() && b->comparable(); }
  double speedup() const { return compared() ? a->avg_ms / b->avg_ms : std::nan(""); }
  // "a", "b", "tie", or "" when not compared.
  std::string faster() const {
    if (!compared()) return "";
    const double s = speedup();
    return s > 1 ? "b" : s < 1 ? "a" : "tie";
  }  // Both sides were run several times and their ranges (min to max) overlap: which is faster
  // is within the runs' spread.
  bool within_spread() const {
    return compared() && a->has_spread() && b->has_spread() && a->min_ms <= b->max_ms &&
           b->min_ms <= a->max_ms;
  }
};

// Pairs the configs of a and b: first by (op, description, problem) where both sides know the
// problem, then by (op, description), then by (op, position) for descriptions that are absent
// or ambiguous — each key used only where it is unique on both sides.
std::vector<Row> Match(const Side& a, const Side& b) {
  std::vector<int> b_of_a(a.entries.size(), -1);
  std::vector<bool> b_used(b.entries.size(), false);
  using KeyFn = std::optional<std::string> (*)(const Entry&);
  auto pass = [&](KeyFn key) {
    std::map<std::string, std::vector<size_t>> ka, kb;
    for (size_t i = 0; i < a.entries.size(); ++i) {
      if (b_of_a[i] >= 0) continue;
      if (auto k = key(a.entries[i])) ka[*k].push_back(i);
    }
    for (size_t j = 0; j < b.entries.size(); ++j) {
      if (b_used[j]) continue;
      if (auto k = key(b.entries[j])) kb[*k].push_back(j);
    }
    for (const auto& [k, ia] : ka) {
      auto it = kb.find(k);
      if (ia.size() != 1 || it == kb.end() || it->second.size() != 1) continue;
      b_of_a[ia[0]] = static_cast<int>(it->second[0]);
      b_used[it->second[0]] = true;
    }
  };
  pass([](const Entry& e) -> std::optional<std::string> {
    if (e.signature.empty()) return std::nullopt;
    return e.op + "\n" + e.description + "\n" + e.signature;
  });
  pass([](const Entry& e) -> std::optional<std::string> {
    if (e.description.empty()) return std::nullopt;
    return e.op + "\n" + e.description;
  });
  pass([](const Entry& e) -> std::optional<std::string> {
    return e.op + "\n" + std::to_string(e.position) + "\n" + e.description;
  });

  std::vector<Row> rows;
  for (size_t i = 0; i < a.entries.size(); ++i) {
    rows.push_back(
        Row{&a.entries[i], b_of_a[i] >= 0 ? &b.entries[static_cast<size_t>(b_of_a[i])] : nullptr});
  }
  for (size_t j = 0; j < b.entries.size(); ++j) {
    if (!b_used[j]) rows.push_back(Row{nullptr, &b.entries[j]});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) {
    return std::make_pair(x.rank(), x.position()) < std::make_pair(y.rank(), y.position());
  });
  return rows;
}

struct Summary {
  int64_t compared = 0, a_faster = 0, b_faster = 0, ties = 0;
  int64_t a_failed = 0, b_failed = 0, only_a = 0, only_b = 0;
  double geomean = std::nan("");  // of the speedups; nan when nothing was compared
};

// Warnings for times that measure different problems: the sides' data types or layouts
// differ, overall or in matched configs. Empty when they agree (or nothing says).
std::vector<std::string> TypeWarnings(const std::vector<Row>& rows, const Side& a, const Side& b) {
  std::vector<std::string> out;
  int64_t matched = 0, type_differs = 0, layout_differs = 0;
  for (const Row& r : rows) {
    if (!r.a || !r.b) continue;
    ++matched;
    auto differs = [](const std::string& x, const std::string& y) {
      return !x.empty() && !y.empty() && x != y;
    };
    type_differs += differs(r.a->data_type, r.b->data_type) ? 1 : 0;
    layout_differs += differs(r.a->layout, r.b->layout) ? 1 : 0;
  }
  const std::string a_type = Census(a, &Entry::data_type), b_type = Census(b, &Entry::data_type);
  const std::string a_layout = Census(a, &Entry::layout), b_layout = Census(b, &Entry::layout);
  auto known = [](const std::string& x) { return x != "unknown"; };
  const bool types = type_differs > 0 || (known(a_type) && known(b_type) && a_type != b_type);
  const bool layouts =
      layout_differs > 0 || (known(a_layout) && known(b_layout) && a_layout != b_layout);
  if (!types && !layouts) return out;
  std::string what;
  if (types) what = "data type (A: " + a_type + "; B: " + b_type + ")";
  if (layouts) {
    what += (what.empty() ? "" : " and ") + std::string("layout (A: ") + a_layout +
            "; B: " + b_layout + ")";
  }
  std::string w = "A and B differ in " + what;
  const int64_t differing = std::max(type_differs, layout_differs);
  if (differing > 0) {
    w += ", in " + std::to_string(differing) + " of the " + std::to_string(matched) +
         " matched configs: their speedups compare different problems";
  }
  out.push_back(w);
  return out;
}

Summary Summarize(const std::vector<Row>& rows) {
  Summary s;
  double log_sum = 0;
  for (const Row& r : rows) {
    if (!r.a) {
      ++s.only_b;
    } else if (!r.b) {
      ++s.only_a;
    } else if (r.compared()) {
      ++s.compared;
      log_sum += std::log(r.speedup());
      const std::string f = r.faster();
      ++(f == "a" ? s.a_faster : f == "b" ? s.b_faster : s.ties);
    } else {
      if (!r.a->comparable()) ++s.a_failed;
      if (!r.b->comparable()) ++s.b_failed;
    }
  }
  if (s.compared > 0) s.geomean = std::exp(log_sum / static_cast<double>(s.compared));
  return s;
}

std::string Problem(const std::string& description) {
  auto colon = description.find(": ");
  return colon == std::string::npos ? description : description.substr(colon + 2);
}

// The ms cell of one side: the time, the state when it did not succeed, "-" when absent.
// A repeated config's time is its median with the runs' CV ("0.1234 ±1.2%"), "~" when noisy.
std::string MsCell(const Entry* e) {
  if (!e) return "-";
  if (!e->comparable()) return e->state;
  std::string cell = FormatNumber(e->avg_ms, 5);
  if (e->has_spread()) {
    // Runs alike to the last digit give a CV of rounding noise (1.76e-14%): that is 0.
    const double percent = e->cv * 100;
    cell += " ±" + (percent < 0.0005 ? std::string("0") : FormatNumber(percent, 3)) + "%" +
            (e->noisy ? "~" : "");
  }
  return cell;
}

std::string Note(const Row& r, const Side& a, const Side& b) {
  if (!r.a) return "only in " + b.name;
  if (!r.b) return "only in " + a.name;
  const std::string f = r.faster();
  const std::string spread = r.within_spread() ? " (within spread)" : "";
  if (f == "a") return a.name + spread;
  if (f == "b") return b.name + spread;
  if (f == "tie") return "tie";
  return "not compared";
}

// `width`: the problem column gives way to fit it; 0 = unlimited.
std::string Table(const std::vector<Row>& rows, const Summary& s, const Side& a, const Side& b,
                  size_t width) {
  std::ostringstream out;
  out << "A: " << a.label << ": " << TypeAndLayout(a) << "\nB: " << b.label << ": "
      << TypeAndLayout(b) << "\nspeedup = A ms / B ms (above 1: B is faster)\n";
  const bool spread = std::any_of(rows.begin(), rows.end(), [](const Row& r) {
    return (r.a && r.a->has_spread()) || (r.b && r.b->has_spread());
  });
  if (spread) {
    out << "repeated configs: the median ms ± the runs' coefficient of variation, ~ noisy; "
           "(within spread): the two sides' min-max ranges overlap\n";
  }
  out << "\n";
  TextTable table({{"rank", true},
                   {"op"},
                   {"problem", false, true, 16},
                   {a.name + " ms", true},
                   {b.name + " ms", true},
                   {"speedup", true},
                   {"faster"}});
  for (const Row& r : rows) {
    const Entry& any = r.a ? *r.a : *r.b;
    table.AddRow({std::to_string(r.rank()), any.op, Problem(any.description), MsCell(r.a),
                  MsCell(r.b), r.compared() ? FormatNumber(r.speedup(), 4) + "x" : "-",
                  Note(r, a, b)});
  }
  out << table.Render(width);
  out << "\nCompared: " << s.compared << " config(s) that succeeded on both sides\n";
  if (s.compared > 0) {
    out << "Geometric mean speedup (A ms / B ms): " << FormatNumber(s.geomean, 4) << "x"
        << (s.geomean > 1   ? " (" + b.name + " faster on average)"
            : s.geomean < 1 ? " (" + a.name + " faster on average)"
                            : " (even)")
        << "\n";
  } else {
    out << "Geometric mean speedup: - (no config succeeded on both sides)\n";
  }
  out << "Faster: " << a.name << " " << s.a_faster << ", " << b.name << " " << s.b_faster
      << ", ties " << s.ties << "\n";
  out << "Not compared: " << s.a_failed << " without a time in " << a.name << ", " << s.b_failed
      << " without a time in " << b.name << ", " << s.only_a << " only in " << a.name << ", "
      << s.only_b << " only in " << b.name << "\n";
  // The labels hold job names and paths: shown escaped, as the table's cells are.
  return EscapeControl(out.str(), LineBreaks::kKeep);
}

ojson SideJson(const Side& side) {
  ojson j = {{"label", side.label}, {"name", side.name}, {"source", side.source}};
  j["job_id"] = side.job_id > 0 ? ojson(side.job_id) : ojson(nullptr);
  j["data_type"] = Census(side, &Entry::data_type);
  j["layout"] = Census(side, &Entry::layout);
  return j;
}

ojson NumberOrNull(double v) { return std::isfinite(v) ? ojson(v) : ojson(nullptr); }

ojson Json(const std::vector<Row>& rows, const Summary& s, const Side& a, const Side& b,
           const std::vector<std::string>& warnings) {
  ojson out = ojson::object();
  out["a"] = SideJson(a);
  out["b"] = SideJson(b);
  out["warnings"] = warnings;
  out["speedup_definition"] = "a_ms / b_ms (above 1: b is faster)";
  ojson list = ojson::array();
  for (const Row& r : rows) {
    const Entry& any = r.a ? *r.a : *r.b;
    ojson j = ojson::object();
    j["priority_rank"] = r.rank();
    j["operation"] = any.op;
    j["description"] = any.description;
    j["position_a"] = r.a ? ojson(r.a->position) : ojson(nullptr);
    j["position_b"] = r.b ? ojson(r.b->position) : ojson(nullptr);
    j["a_status"] = r.a ? ojson(r.a->state) : ojson(nullptr);
    j["b_status"] = r.b ? ojson(r.b->state) : ojson(nullptr);
    j["a_data_type"] = r.a && !r.a->data_type.empty() ? ojson(r.a->data_type) : ojson(nullptr);
    j["b_data_type"] = r.b && !r.b->data_type.empty() ? ojson(r.b->data_type) : ojson(nullptr);
    j["a_layout"] = r.a && !r.a->layout.empty() ? ojson(r.a->layout) : ojson(nullptr);
    j["b_layout"] = r.b && !r.b->layout.empty() ? ojson(r.b->layout) : ojson(nullptr);
    j["a_ms"] = r.a && r.a->comparable() ? ojson(r.a->avg_ms) : ojson(nullptr);
    j["b_ms"] = r.b && r.b->comparable() ? ojson(r.b->avg_ms) : ojson(nullptr);
    j["a_best"] = r.a && !r.a->best.empty() ? ojson(r.a->best) : ojson(nullptr);
    j["b_best"] = r.b && !r.b->best.empty() ? ojson(r.b->best) : ojson(nullptr);
    // The runs' spread of a config run several times (--repeat); null: run once.
    for (const auto& [prefix, e] : {std::pair<const char*, const Entry*>{"a", r.a}, {"b", r.b}}) {
      const bool spread = e && e->has_spread();
      const std::string p = prefix;
      j[p + "_runs"] = spread ? ojson(e->runs) : ojson(nullptr);
      j[p + "_min_ms"] = spread ? ojson(e->min_ms) : ojson(nullptr);
      j[p + "_max_ms"] = spread ? ojson(e->max_ms) : ojson(nullptr);
      j[p + "_cv"] = spread ? ojson(e->cv) : ojson(nullptr);
      j[p + "_noisy"] = e ? ojson(e->noisy) : ojson(nullptr);
    }
    j["within_spread"] = r.within_spread();
    j["speedup"] = NumberOrNull(r.speedup());
    j["faster"] = r.faster().empty() ? ojson(nullptr) : ojson(r.faster());
    j["matched"] = r.a && r.b;
    list.push_back(std::move(j));
  }
  out["rows"] = std::move(list);
  out["summary"] = {{"compared", s.compared},
                    {"geomean_speedup", NumberOrNull(s.geomean)},
                    {"a_faster", s.a_faster},
                    {"b_faster", s.b_faster},
                    {"ties", s.ties},
                    {"a_without_time", s.a_failed},
                    {"b_without_time", s.b_failed},
                    {"only_a", s.only_a},
                    {"only_b", s.only_b}};
  return out;
}

std::string CsvField(const std::string& v) {
  if (v.find_first_of(",\"\n\r") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string Csv(const std::vector<Row>& rows) {
  std::string out =
      "priority_rank,operation,description,a_ms,b_ms,speedup,faster,a_status,b_status,a_best,"
      "b_best\n";
  for (const Row& r : rows) {
    const Entry& any = r.a ? *r.a : *r.b;
    auto ms = [](const Entry* e) {
      return e && e->comparable() ? FormatNumber(e->avg_ms, 9) : std::string();
    };
    out += std::to_string(r.rank()) + "," + any.op + "," + CsvField(any.description) + "," +
           ms(r.a) + "," + ms(r.b) + "," + (r.compared() ? FormatNumber(r.speedup(), 9) : "") +
           "," + r.faster() + "," + (r.a ? r.a->state : "") + "," + (r.b ? r.b->state : "") + "," +
           CsvField(r.a ? r.a->best : "") + "," + CsvField(r.b ? r.b->best : "") + "\n";
  }
  return out;
}

}  // namespace

int RunCompareCommand(const GlobalOptions& global, const Args& args) {
  std::string first, second, format;
  bool as_json = false, wide = false, include_contended = false;
  ArgParser p("ckprof compare",
              "Compare two runs of the same configs: per config both times and the speedup "
              "(A ms / B ms; above 1, B is faster), ranked by priority_rank, and the geometric "
              "mean of the speedups.",
              "A and B are each a job id (fetched from the daemon) or a results file\n"
              "(profiler_results.json from 'ckprof run' or 'ckprof results JOB --format json').\n"
              "An existing file wins over a job id of the same name. Configs are matched by\n"
              "operation and problem, then by description, then by position; configs without a\n"
              "time on either side, and those on one side only, are listed but not averaged.\n"
              "Each side's data type and layout are shown; a warning says when they differ\n"
              "(the times are then of different problems).\n\n"
              "examples:\n"
              "  ckprof compare 12 13              # a CK job against a torch-conv-profiler job\n"
              "  ckprof compare ck.json torch.json --format csv");
  p.Positional("A", &first, true, "the first job id or results file");
  p.Positional("B", &second, true, "the second job id or results file");
  p.Flag("--json", &as_json, "print the comparison as JSON (same as --format json)");
  p.Flag("--wide", &wide, "table: never shorten the problem (it fits the terminal otherwise)");
  p.Option("--format", &format, "F", "table (default), json or csv");
  p.Flag("--include-contended", &include_contended,
         "compare results taken while another process used the GPU too (left out otherwise: "
         "their times are not to be trusted)");
  if (auto code = p.Parse(args)) return *code;
  if (as_json) {
    if (!format.empty() && format != "json") {
      PrintError("compare", "--json and --format " + format + " contradict each other");
      return 2;
    }
    format = "json";
  }
  if (format.empty()) format = "table";
  if (format != "table" && format != "json" && format != "csv") {
    PrintError("compare", "--format must be table, json or csv, got '" + format + "'");
    return 2;
  }

  // Decide what each argument is before any work, so that usage errors come first.
  static const std::regex digits(R"(\d+)");
  struct Source {
    std::string text;
    std::optional<int64_t> job;
  };
  Source sources[2] = {{first, std::nullopt}, {second, std::nullopt}};
  for (Source& src : sources) {
    if (IsFile(src.text) || !std::regex_match(src.text, digits)) continue;
    src.job = ParseJobId(src.text, "compare");
    if (!src.job) return 2;
  }

  std::unique_ptr<Connection> conn;
  Side sides[2];
  for (int i = 0; i < 2; ++i) {
    const Source& src = sources[i];
    if (!src.job) {
      auto side = LoadFile(src.text);
      if (!side) {
        PrintError("compare", side.error());
        return 1;
      }
      sides[i] = std::move(*side);
      continue;
    }
    if (!conn) {
      conn = ConnectOrReport(global, "compare");
      if (!conn) return kExitUnreachable;
    }
    auto fetched = FetchResults(*conn, *src.job, /*with_output=*/true);
    if (!fetched) {
      PrintError("compare", "job " + std::to_string(*src.job) + ": " + fetched.error());
      return conn->lost() ? kExitUnreachable : 1;
    }
    const JobSummary& summary = fetched->job;
    Side& side = sides[i];
    side.job_id = *src.job;
    side.name = "job " + std::to_string(*src.job);
    side.label = side.name + (summary.name.empty() ? "" : " (" + summary.name + ")");
    side.source = side.name;
    for (const TaskResult& t : fetched->tasks) side.entries.push_back(FromTask(t));
  }
  if (sides[0].name == sides[1].name) {  // the same file name twice: tell the columns apart
    sides[0].name = "A:" + sides[0].name;
    sides[1].name = "B:" + sides[1].name;
  }

  // A time taken beside another process on the GPU is no time to compare.
  int64_t contended = 0;
  for (Side& side : sides) {
    for (Entry& e : side.entries) {
      if (!e.contended) continue;
      ++contended;
      if (!include_contended && e.comparable()) e.state = "contended";
    }
  }
  const std::vector<Row> rows = Match(sides[0], sides[1]);
  const Summary summary = Summarize(rows);
  std::vector<std::string> warnings = TypeWarnings(rows, sides[0], sides[1]);
  if (contended > 0) {
    warnings.push_back(std::to_string(contended) +
                       " result(s) were taken while another process used the GPU (contended): " +
                       (include_contended ? "compared anyway (--include-contended)"
                                          : "left out; --include-contended compares them"));
  }
  for (const auto& w : warnings) PrintError("compare", "warning: " + w);
  if (format == "json") {
    std::cout << JsonForTerminal(Json(rows, summary, sides[0], sides[1], warnings).dump(2)) << "\n";
  } else if (format == "csv") {
    std::cout << Csv(rows);
  } else {
    std::cout << Table(rows, summary, sides[0], sides[1], TerminalWidth(wide));
  }
  return 0;
}

}  // namespace ckprof

#include "common/ck_command.h"

#include <cerrno>
#include <cstdlib>

namespace ckprof {
namespace {

std::string Who(const CkConfig& c) {
  std::string s = "config";
  if (c.priority_rank() > 0) s += " (rank " + std::to_string(c.priority_rank()) + ")";
  return s + " " + std::string(OperationTypeName(c.op));
}

bool IsShellSafe(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         std::string_view("_-./=:,+@%^").find(ch) != std::string_view::npos;
}

}  // namespace

Result<std::vector<std::string>> BuildProfilerArgs(const CkConfig& c) {
  const int nd = c.num_dim_spatial;
  if (nd < 1 || nd > 3) {
    return MakeError(Who(c) + ": field num_dim_spatial must be 1, 2 or 3, got " +
                     std::to_string(nd));
  }
  struct ListField {
    const char* name;
    const std::vector<int64_t>* values;
  } lists[] = {{"filter_spatial", &c.filter_spatial},
               {"input_spatial", &c.input_spatial},
               {"strides", &c.strides},
               {"dilations", &c.dilations},
               {"left_pads", &c.left_pads},
               {"right_pads", &c.right_pads}};
  for (const auto& f : lists) {
    if (static_cast<int>(f.values->size()) != nd) {
      return MakeError(Who(c) + ": field " + f.name + " has " + std::to_string(f.values->size()) +
                       " entries but num_dim_spatial is " + std::to_string(nd));
    }
  }
  std::vector<std::string> a;
  a.reserve(13 + 6 * nd);
  auto add = [&a](int64_t v) { a.push_back(std::to_string(v)); };
  add(c.data_type);
  add(c.layout);
  if (c.op == ConvOp::kFwd) add(c.index_type.value_or(0));
  add(c.verify);
  add(c.init);
  add(c.log);
  add(c.time);
  add(nd);
  add(c.G);
  add(c.N);
  add(c.K);
  add(c.C);
  for (const auto& f : lists) {
    for (int64_t v : *f.values) add(v);
  }
  if (c.op != ConvOp::kFwd) {
    if (c.split_k.empty() || c.split_k == "all") {
      // bwd_data parses split_k with std::stoi: "all" aborts it; -1 sweeps the same values.
      a.push_back(c.op == ConvOp::kBwdData ? "-1" : "all");
    } else {
      char* end = nullptr;
      errno = 0;
      long v = std::strtol(c.split_k.c_str(), &end, 10);
      if (*end != '\0' || errno != 0 || v < -1 || v > (1 << 20)) {
        return MakeError(Who(c) + ": field split_k must be \"all\" or an integer >= -1, got \"" +
                         c.split_k + "\"");
      }
      a.push_back(std::to_string(v));
    }
  }
  return a;
}

Result<std::vector<std::string>> BuildCommand(const ProfilerTarget& target, const CkConfig& c) {
  auto args = BuildProfilerArgs(c);
  if (!args) return Error{args.error()};
  if (!target.Supports(c.op)) {
    return MakeError(Who(c) + ": " + target.Describe() + " has no " +
                     std::string(OperationTypeName(c.op)));
  }
  std::vector<std::string> argv;
  argv.reserve(args->size() + 2);
  argv.push_back(target.ExecutableFor(c.op));
  if (target.form == ProfilerTarget::Form::kCkProfiler) {
    argv.emplace_back(CkOperationName(c.op));
  }
  for (auto& s : *args) argv.push_back(std::move(s));
  return argv;
}

Result<std::vector<std::string>> BuildCommandFromJson(const ProfilerTarget& target,
                                                      const nlohmann::ordered_json& config,
                                                      size_t index) {
  auto c = ConfigFromJson(config, index);
  if (!c) return Error{c.error()};
  return BuildCommand(target, *c);
}

std::string FormatCommandLine(const std::vector<std::string>& argv) {
  std::string out;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (i) out += ' ';
    const std::string& w = argv[i];
    bool safe = !w.empty();
    for (char ch : w) safe = safe && IsShellSafe(ch);
    if (safe) {
      out += w;
      continue;
    }
    out += '\'';
    for (char ch : w) {
      if (ch == '\'') {
        out += "'\\''";
      } else {
        out += ch;
      }
    }
    out += '\'';
  }
  return out;
}

}  // namespace ckprof

#include "common/command_plan.h"

#include <filesystem>

namespace ckprof {

ProfilerTarget ResolveOrAssumeProfiler(const std::string& path, std::string* note) {
  auto resolved = ResolveProfiler(path);
  if (resolved.ok()) {
    if (note) *note = "profiler: " + resolved->Describe();
    return *resolved;
  }
  ProfilerTarget t;
  t.form = ProfilerTarget::Form::kCkProfiler;
  std::filesystem::path p(path);
  if (p.filename() == "ckProfiler") {
    t.path = path;
  } else {
    std::string base = path;
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    t.path = base + "/ckProfiler";
  }
  if (note) *note = "no CK profiler found at " + path + "; commands assume " + t.path;
  return t;
}

std::vector<PlannedCommand> PlanCommands(const ProfilerTarget& target,
                                         const std::vector<CkConfig>& configs) {
  std::vector<PlannedCommand> out;
  out.reserve(configs.size());
  int64_t position = 0;
  for (const auto& c : configs) {
    PlannedCommand p;
    p.position = ++position;
    p.priority_rank = c.priority_rank() > 0 ? c.priority_rank() : position;
    p.op = c.op;
    p.description = c.description();
    auto cmd = BuildCommand(target, c);
    if (cmd) {
      p.argv = std::move(*cmd);
    } else {
      p.error = cmd.error();
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace ckprof

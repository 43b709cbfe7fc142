#include "daemon/executor.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace ckprof {

using json = nlohmann::json;

int ExecutorConfig::RemoteSlots() const { return kind == "slurm" ? slurm.max_in_flight : 0; }

std::string ParseExecutor(const json& v, ExecutorConfig* c) {
  SlurmSettings s;
  std::string kind;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    const json& e = it.value();
    auto text = [&](std::string* out) -> std::string {
      if (!e.is_string()) return "field '" + k + "' must be a string";
      *out = e.get<std::string>();
      return "";
    };
    std::string err;
    if (k == "kind") {
      err = text(&kind);
      if (err.empty() && kind != "slurm" && kind != "local") {
        err = "field 'kind' must be \"slurm\" or \"local\", not \"" + kind + "\"";
      }
    } else if (k == "partition") {
      err = text(&s.partition);
    } else if (k == "gres") {
      err = text(&s.gres);
    } else if (k == "work_dir") {
      err = text(&s.work_dir);
    } else if (k == "bin_dir") {
      err = text(&s.bin_dir);
    } else if (k == "max_in_flight") {
      if (!e.is_number_integer() || e.get<int64_t>() < 1 || e.get<int64_t>() > 10000) {
        err = "field 'max_in_flight' must be an integer from 1 to 10000";
      } else {
        s.max_in_flight = static_cast<int>(e.get<int64_t>());
      }
    } else if (k == "poll_ms") {
      if (!e.is_number() || e.get<double>() < 10 || e.get<double>() > 600e3) {
        err = "field 'poll_ms' must be a number from 10 to 600000";
      } else {
        s.poll_ms = e.get<double>();
      }
    } else if (k == "sbatch_args") {
      if (!e.is_array() ||
          !std::all_of(e.begin(), e.end(), [](const json& a) { return a.is_string(); })) {
        err = "field 'sbatch_args' must be a list of strings";
      } else {
        s.sbatch_args = e.get<std::vector<std::string>>();
      }
    } else {
      err = "has no field '" + k +
            "' (known: kind, partition, gres, max_in_flight, sbatch_args, work_dir, poll_ms, "
            "bin_dir)";
    }
    if (!err.empty()) return err;
  }
  if (kind.empty()) return "needs a field 'kind' (\"slurm\")";
  if (kind == "local") {
    *c = ExecutorConfig{};
    return "";
  }
  if (s.work_dir.empty()) {
    return "needs 'work_dir': a directory on a filesystem this host and the nodes share";
  }
  if (s.work_dir[0] != '/') return "field 'work_dir' must be an absolute path";
  c->kind = "slurm";
  c->slurm = std::move(s);
  return "";
}

Result<std::unique_ptr<Launcher>> MakeLauncher(const ExecutorConfig& config,
                                               const LauncherContext& context) {
  if (config.kind == "slurm") {
    auto slurm =
        std::make_unique<SlurmLauncher>(context.io, config.slurm, context.tag, context.pin_env);
    if (Status s = slurm->Check(); !s) return Error{s.error()};
    spdlog::info("executor slurm: partition {}, gres {}, at most {} task(s) in flight, work dir {}",
                 config.slurm.partition.empty() ? "(default)" : config.slurm.partition,
                 config.slurm.gres.empty() ? "(none)" : config.slurm.gres,
                 config.slurm.max_in_flight, config.slurm.work_dir);
    return std::unique_ptr<Launcher>(std::move(slurm));
  }
  return std::unique_ptr<Launcher>(std::make_unique<ProcessLauncher>(context.io, context.cgroups));
}

}  // namespace ckprof

#include "daemon/executor.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "daemon/slurm_allocations.h"

namespace ckprof {

using json = nlohmann::json;

int ExecutorConfig::RemoteSlots() const {
  if (kind != "slurm") return 0;
  return slurm.Allocations() ? slurm.max_allocations * slurm.GpusPerAllocation()
                             : slurm.max_in_flight;
}

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
    } else if (k == "mode") {
      err = text(&s.mode);
      if (err.empty() && s.mode != "tasks" && s.mode != "allocations") {
        err = "field 'mode' must be \"tasks\" or \"allocations\", not \"" + s.mode + "\"";
      }
    } else if (k == "max_allocations") {
      if (!e.is_number_integer() || e.get<int64_t>() < 1 || e.get<int64_t>() > 10000) {
        err = "field 'max_allocations' must be an integer from 1 to 10000";
      } else {
        s.max_allocations = static_cast<int>(e.get<int64_t>());
      }
    } else if (k == "allocation_time") {
      err = text(&s.allocation_time);
      if (err.empty()) {
        auto t = ParseSlurmTime(s.allocation_time);
        if (!t || *t < 60) {
          err =
              "field 'allocation_time' must be a Slurm time of a minute or more (\"2:00:00\", "
              "\"90\" minutes, \"1-00:00:00\"), not \"" +
              s.allocation_time + "\"";
        } else {
          s.allocation_time_s = *t;
        }
      }
    } else if (k == "idle_release_s") {
      if (!e.is_number() || e.get<double>() < 0 || e.get<double>() > 86400) {
        err = "field 'idle_release_s' must be a number of seconds from 0 to 86400";
      } else {
        s.idle_release_s = e.get<double>();
      }
    } else if (k == "agent_host") {
      err = text(&s.agent_host);
    } else if (k == "agent_listen") {
      err = text(&s.agent_listen);
    } else if (k == "agent_port") {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > 65535) {
        err = "field 'agent_port' must be a port number from 0 (any free one) to 65535";
      } else {
        s.agent_port = static_cast<int>(e.get<int64_t>());
      }
    } else if (k == "agent_bin") {
      err = text(&s.agent_bin);
      if (err.empty() && !s.agent_bin.empty() && s.agent_bin[0] != '/') {
        err = "field 'agent_bin' must be an absolute path";
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
            "' (known: kind, mode, partition, gres, max_in_flight, sbatch_args, work_dir, "
            "poll_ms, bin_dir, max_allocations, allocation_time, idle_release_s, agent_host, "
            "agent_listen, agent_port, agent_bin)";
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
  if (config.kind == "slurm" && config.slurm.Allocations()) {
    auto alloc = std::make_unique<AllocationLauncher>(context.io, config.slurm, context.tag,
                                                      context.pin_env);
    if (Status s = alloc->Check(); !s) return Error{s.error()};
    spdlog::info(
        "executor slurm, allocations: partition {}, gres {} each, at most {} at once for {}, "
        "let go after {} s idle, work dir {}",
        config.slurm.partition.empty() ? "(default)" : config.slurm.partition,
        config.slurm.gres.empty() ? "(none)" : config.slurm.gres, config.slurm.max_allocations,
        config.slurm.allocation_time, config.slurm.idle_release_s, config.slurm.work_dir);
    return std::unique_ptr<Launcher>(std::move(alloc));
  }
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

// The executor (config key `executor`): where ckprofd runs its tasks. Each kind's settings are
// read here (ParseExecutor, for the config file), and its Launcher (daemon/launcher.h) is made
// here (MakeLauncher), so that above the Launcher nothing names an executor: a new one is its
// launcher's files, its settings below, its case in executor.cpp and its line in CMakeLists.
//
// Plain functions; MakeLauncher on the io thread (the launcher's).
#pragma once

#include <asio/any_io_executor.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/cgroup.h"
#include "daemon/launcher.h"
#include "daemon/slurm_executor.h"

namespace ckprof {

struct ExecutorConfig {
  std::string kind = "local";  // "local" (this host's GPUs) or "slurm" (each task a Slurm job)
  SlurmSettings slurm;         // kind "slurm"
  // A remote executor's slots (the tasks it is handed at once, which the QueuePolicy fills as
  // it fills GPUs); 0 for a local one, whose GPUs are the host's.
  int RemoteSlots() const;
};

// Reads the config's `executor` object (`{"kind": "slurm", ...}`) into `out`: "" when it is
// fine, else what is wrong (said after "key 'executor' ").
std::string ParseExecutor(const nlohmann::json& v, ExecutorConfig* out);

// What a launcher is made with: the io thread's executor, each local run's cgroups (may be
// null), this daemon's name in a remote executor's jobs (host and state dir), and the pin
// variables.
struct LauncherContext {
  asio::any_io_executor io;
  TaskCgroups* cgroups = nullptr;
  std::string tag;
  std::vector<std::string> pin_env;
};

// The launcher the config asks for, checked (a remote executor's commands and work dir) and
// described in the log; an error says why it cannot run tasks.
Result<std::unique_ptr<Launcher>> MakeLauncher(const ExecutorConfig& config,
                                               const LauncherContext& context);

}  // namespace ckprof

// RunResult: how one profiler run ended and what it left (outcome, parsed figures, bounded
// captures, what it used, and where it ran), as a Launcher reports it (daemon/launcher.h) and
// the Store keeps it (daemon/task_result_codec.h), with RunContext, what the daemon saw of its
// GPU meanwhile (daemon/gpu_board.h). Below all of them, so that the Store's codec does not
// depend on the process runner. Plain value types; any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/ck_output.h"
#include "common/outcome.h"
#include "common/protocol.h"

namespace ckprof {

struct RunResult {
  Outcome outcome;
  CkPerf perf;
  std::string stdout_capture, stderr_capture;  // head + "\n[... N bytes omitted ...]\n" + tail
  uint64_t stdout_bytes = 0, stderr_bytes = 0;
  pid_t pid = -1;  // also the process group id; -1 when the spawn failed before fork
  std::chrono::system_clock::time_point started_at, ended_at;
  double elapsed_s = 0;
  // What the run used. CPU time: of all its processes from its cgroup (usage_from "cgroup"),
  // else of the leader and the children it waited for (wait4's rusage, "rusage"). Peak memory:
  // the cgroup's memory.peak where the memory controller is on, else the largest resident set
  // of the leader and those children. nullopt when nothing says.
  std::optional<double> cpu_s;
  std::optional<uint64_t> peak_memory_bytes;
  std::string usage_from;              // "cgroup", "rusage" or ""
  std::optional<Placement> placement;  // a remote run's: where it ran
};

// What the daemon saw of a run's GPU beside the run itself.
struct RunContext {
  std::vector<GpuUser> contended;     // foreign processes seen on the GPU while it ran
  std::optional<GpuState> gpu_state;  // what the GPU is, before and after
};

}  // namespace ckprof

// TaskCgroups: one cgroup (v2) per profiler run, so that a run is stopped whole — cgroup.kill
// also reaches what left its process group (setsid, a double fork) — and its peak memory and
// CPU time are read from the kernel's own account.
//
// The runs' cgroups live under the daemon's own cgroup (systemd gives it one it may manage with
// Delegate=yes; on a hybrid host, in the unified hierarchy): <own>/ckprofd-runs/run-<id>. With
// a memory limit asked for and the memory controller available, the daemon moves itself into
// <own>/ckprofd-daemon first (a cgroup whose children get controllers holds no process).
// Where cgroups cannot be written (no cgroup2, not root and nothing delegated), Open says why
// and the runner uses process groups alone.
//
// Plain blocking file operations; call on the io thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/result.h"

namespace ckprof {

class TaskCgroups {
 public:
  // Finds this process's cgroup v2 and makes the runs' parent there. `memory_max` (bytes; 0 =
  // none) limits each run where the memory controller can be enabled; `note` says what was
  // set up (or, with an error, why nothing).
  static Result<std::unique_ptr<TaskCgroups>> Open(uint64_t memory_max, std::string* note);
  // The runs' parent stays: another ckprofd in the same cgroup (a test's, a user's) may be
  // making a run's cgroup in it right now.

  // A new cgroup for one run (its directory), with the memory limit when there is one.
  Result<std::string> Create(const std::string& name);
  // Kills every process in it at once (cgroup.kill); false when that cannot be written.
  bool Kill(const std::string& dir) const;
  // True when no process is left in it (cgroup.events says populated 0).
  bool Empty(const std::string& dir) const;
  // What the kernel counted for it: its processes' CPU time (cpu.stat), and their peak memory
  // (memory.peak; nullopt without the memory controller).
  struct Usage {
    std::optional<double> cpu_s;
    std::optional<uint64_t> peak_memory_bytes;
  };
  Usage Read(const std::string& dir) const;
  // Removes it (it must be empty); false when it cannot be.
  bool Remove(const std::string& dir) const;

  const std::string& parent() const { return parent_; }
  bool memory_limited() const { return memory_max_ > 0; }

 private:
  TaskCgroups(std::string parent, uint64_t memory_max)
      : parent_(std::move(parent)), memory_max_(memory_max) {}
  std::string parent_;   // <own cgroup>/ckprofd-runs
  uint64_t memory_max_;  // 0 = no limit (or no memory controller)
};

// The cgroup v2 directory of this process ("" when there is none): the cgroup2 mount point
// (from /proc/self/mountinfo) joined with the "0::" line of /proc/self/cgroup.
std::string OwnCgroupDir();

}  // namespace ckprof

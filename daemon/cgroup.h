// TaskCgroups: one cgroup (v2) per profiler run, so that a run is stopped whole — cgroup.kill
// also reaches what left its process group (setsid, a double fork) — and its peak memory and
// CPU time are read from the kernel's own account.
//
// The runs' cgroups live under the daemon's own cgroup (systemd gives it one it may manage with
// Delegate=yes; on a hybrid host, in the unified hierarchy): <own>/ckprofd-runs/run-<daemon
// pid>-<n>. With a memory limit asked for and the memory controller available, the daemon
// moves itself into <own>/ckprofd-daemon first (a cgroup whose children get controllers holds
// no process).
// Where cgroups cannot be written (no cgroup2, not root and nothing delegated), Open says why
// and the runner uses process groups alone.
//
// A run's cgroup is made once and used again: once a run is over and its cgroup is empty
// (every process of it gone; the runner waits for that), the cgroup goes back to a pool and
// the next run gets it, checked empty again, with its files still open: a run costs a few
// reads and writes on open files instead of a mkdir, an rmdir and their files' opens (issue
// 34: these were a third of the daemon's CPU per task). What a run is told of its usage is
// its own: the CPU time counted since it got the cgroup. A cgroup with the memory controller
// (memory.peak: the whole cgroup's life; memory.current: page cache charged by a previous
// run counts against memory.max) is never used again: it is made for one run and removed.
//
// Plain blocking file operations; call on the io thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/unique_fd.h"

namespace ckprof {

// One run's cgroup, its files open. Handed out by TaskCgroups::Acquire, given back with
// Release; the caller owns it in between (its owner's thread only).
class RunCgroup {
 public:
  RunCgroup(const RunCgroup&) = delete;
  RunCgroup& operator=(const RunCgroup&) = delete;

  const std::string& dir() const { return dir_; }
  // cgroup.procs, open for writing: a process joins the cgroup by writing its pid there (the
  // spawned child does, before it execs). Valid until Release.
  int procs_fd() const { return procs_.get(); }
  // Kills every process in it at once (cgroup.kill); false when that cannot be written.
  bool Kill() const;
  // True when no process is left in it (cgroup.events says populated 0).
  bool Empty() const;
  // What the kernel counted for it since Acquire: its processes' CPU time (cpu.stat), and
  // their peak memory (memory.peak; nullopt without the memory controller).
  struct Usage {
    std::optional<double> cpu_s;
    std::optional<uint64_t> peak_memory_bytes;
  };
  Usage Read() const;

 private:
  friend class TaskCgroups;
  explicit RunCgroup(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
  UniqueFd procs_, kill_, events_, cpu_stat_, memory_peak_;
  uint64_t cpu_base_usec_ = 0;  // cpu.stat's usage_usec when handed out
  bool reusable_ = false;       // no memory controller: may serve another run once empty
};

class TaskCgroups {
 public:
  // Finds this process's cgroup v2 and makes the runs' parent there. `memory_max` (bytes; 0 =
  // none) limits each run where the memory controller can be enabled; `note` says what was
  // set up (or, with an error, why nothing).
  static Result<std::unique_ptr<TaskCgroups>> Open(uint64_t memory_max, std::string* note);
  // Removes the pooled cgroups (empty). The runs' parent stays: another ckprofd in the same
  // cgroup (a test's, a user's) may be making a run's cgroup in it right now.
  ~TaskCgroups();
  TaskCgroups(const TaskCgroups&) = delete;
  TaskCgroups& operator=(const TaskCgroups&) = delete;

  // A cgroup for one run, holding no process: a pooled one (found empty) or a new one
  // (run-<daemon pid>-<n>), with the memory limit when there is one.
  Result<std::unique_ptr<RunCgroup>> Acquire();
  // Takes a run's cgroup back once its run is over: into the pool when it may serve again and
  // is empty; else removed (a cgroup still holding a process is killed and removed later, at
  // an Acquire).
  void Release(std::unique_ptr<RunCgroup> cgroup);

  const std::string& parent() const { return parent_; }
  // The same as a cgroup path ("/system.slice/ckprofd.service/ckprofd-runs"), as
  // /proc/PID/cgroup names a process's: one under it is in a run of this daemon's.
  const std::string& runs_path() const { return runs_path_; }
  bool memory_limited() const { return memory_max_ > 0; }
  // Cgroups in the pool now (for tests).
  size_t pooled() const { return pool_.size(); }

 private:
  TaskCgroups(std::string parent, std::string runs_path, uint64_t memory_max)
      : parent_(std::move(parent)), runs_path_(std::move(runs_path)), memory_max_(memory_max) {}
  Result<std::unique_ptr<RunCgroup>> Make();
  void RemoveRetired();

  std::string parent_;                            // <own cgroup>/ckprofd-runs
  std::string runs_path_;                         // the same, from the cgroup2 root
  uint64_t memory_max_;                           // 0 = no limit (or no memory controller)
  uint64_t made_ = 0;                             // cgroups made so far (names them)
  std::vector<std::unique_ptr<RunCgroup>> pool_;  // empty, ready for a run
  std::vector<std::string> retired_;  // not empty when given back: removed once they are
};

// The cgroup v2 directory of this process ("" when there is none): the cgroup2 mount point
// (from /proc/self/mountinfo) joined with the "0::" line of /proc/self/cgroup.
std::string OwnCgroupDir();

}  // namespace ckprof

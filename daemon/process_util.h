// The one place that reads /proc: process state, groups, environment markers and memory, for
// the runner, the daemon's startup recovery, and the tests and benchmarks that watch processes.
//
// Plain blocking functions; any thread. Only KillProcessGroupAndWait sleeps (bounded).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace ckprof {

// A /proc or /sys file, whole, read with read(2) ("" when it cannot be read): these files are
// small, made on each read, and must not be read through a buffered stream that stops early.
std::string ReadKernelFile(const std::string& path);
// The cgroup v2 path of `pid` ("0::" line of /proc/PID/cgroup: "/system.slice/x.service"; ""
// when it has none or is gone). Only root may move a process into a cgroup another user made.
std::string ProcessCgroupPath(pid_t pid);

// What /proc/<pid>/stat says of a process; CPU times in seconds.
struct ProcStat {
  char state = 0;  // R, S, D, Z (zombie), X (dead), ...
  pid_t ppid = 0, pgrp = 0;
  double utime_s = 0, stime_s = 0;    // its own user and system time
  double cutime_s = 0, cstime_s = 0;  // that of the children it has reaped
};
// nullopt when the process does not exist (or /proc cannot be read).
std::optional<ProcStat> ReadProcStat(pid_t pid);

// True when `pid` exists and is not a zombie (a killed child waiting for its parent to reap it).
bool ProcessIsLive(pid_t pid);

// A "VmRSS"/"VmHWM"-style field of /proc/<pid>/status, in KiB; -1 when absent.
int64_t ProcStatusKiB(pid_t pid, const std::string& field);

// Processes (not this one, nor init) whose environment holds `entry` ("K=V") whole: the marker
// every profiler of a daemon carries (CKPROFD_STATE=<state dir>), found even when its process
// group never reached the store.
std::vector<pid_t> ProcessesWithEnv(const std::string& entry);

// True when `pid`'s environment holds `entry` ("K=V") whole (false when it cannot be read: the
// process is gone, or another user's and this one is not root).
bool ProcessHasEnv(pid_t pid, const std::string& entry);

// Who runs `pid` and what: its real uid (nullopt when the process is gone) and its command
// line, arguments joined by spaces ("python3 train.py"; the comm name when cmdline is empty).
struct ProcOwner {
  uint32_t uid = 0;
  std::string command;
};
std::optional<ProcOwner> ReadProcOwner(pid_t pid);

// `pid`'s command name (/proc/<pid>/comm: "python3"); "" when it is gone or unreadable.
std::string ProcessName(pid_t pid);

// The process that holds a flock(2) lock on the file (device, inode), from the kernel's lock
// table (/proc/locks: what a process says in the file itself proves nothing); nullopt when
// none does, or the table cannot be read. A lock taken by a process that has since exited
// while a child it started keeps the descriptor open names the process that took it.
std::optional<pid_t> FlockHolder(dev_t device, ino_t inode);

// The live (not zombie) processes whose process group is `pgid`, read from /proc. When /proc
// cannot be read, falls back to kill(-pgid, 0) and returns {pgid} if the group exists.
std::vector<pid_t> LiveProcessesInGroup(pid_t pgid);

// True when some live process is in process group `pgid`.
bool ProcessGroupAlive(pid_t pgid);

// For startup recovery: signals a process group left by a dead daemon (SIGTERM, then SIGKILL
// after up to `grace`) and waits (blocking, bounded by grace + 5 s) until no live process of
// the group remains. Ok if the group did not exist. Zombies waiting for their parent to reap
// them count as gone.
Status KillProcessGroupAndWait(pid_t pgid, std::chrono::milliseconds grace);

}  // namespace ckprof

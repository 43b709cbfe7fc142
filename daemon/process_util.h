// Small process-group helpers for the runner and for the daemon's startup recovery.
//
// Plain blocking functions; any thread. Only KillProcessGroupAndWait sleeps (bounded).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <vector>

#include "common/result.h"

namespace ckprof {

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

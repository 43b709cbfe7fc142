// Processes the tests look for and clean up: those carrying a daemon's marker in their
// environment (CKPROFD_STATE=<state dir>), and process groups. Reads /proc through the daemon's
// own reader (daemon/process_util). Test threads only.
#pragma once

#include <sys/types.h>

#include <string>

#include "daemon/process_util.h"

namespace ckprof::testing {

// Processes whose environment holds `needle` ("CKPROFD_STATE=/dir"): the daemon's own reader.
using ckprof::ProcessesWithEnv;
// True when `pid` exists and is not a zombie.
using ckprof::ProcessIsLive;

// SIGKILLs every process whose environment holds `marker` ("CKPROFD_STATE=/dir"), with its
// process group: the profilers a daemon killed with SIGKILL leaves behind.
void KillMarkedProcesses(const std::string& marker);

// True when some live (non-zombie) process is in process group `pgid`.
inline bool GroupHasLiveProcess(pid_t pgid) { return pgid > 1 && ProcessGroupAlive(pgid); }

}  // namespace ckprof::testing

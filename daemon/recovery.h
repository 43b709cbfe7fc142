// Recovery: what ckprofd does before it hands out a GPU after a stop or a crash.
//
// Scheduler::Recover (defined in recovery.cpp) loads the Store into the Scheduler, stops the
// profilers a dead daemon left running (StopLeftoverProfilers), requeues the tasks that were
// running (up to max_attempts; a cancelled job's are ended as cancelled) and ends what a crash
// between two commits left half done. This header holds the part that needs no Scheduler.
//
// Blocking; called once, on the io thread, before the daemon serves anyone.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/store.h"

namespace ckprof {

// Stops every process group of a dead daemon: the groups of the processes that carry its marker
// (CKPROFD_STATE=<state_dir> in their environment), SIGTERM then SIGKILL after `grace`, and
// waits until they are gone. A stored group (`was_running`'s pgid) is signalled only while one
// of its processes carries the marker: pids wrap, and the id may be an unrelated program's by
// now. A marked process whose group never reached the Store (a crash right after the spawn) is
// stopped too when it is the process of a user who had such a task running (`unrecorded_owners`):
// the marker alone names nobody, since any user may copy it from her profiler's environment
// onto a process of hers. Logs what it finds. An error names the group that would not stop.
Status StopLeftoverProfilers(const std::string& state_dir,
                             const std::vector<TaskRecord>& was_running,
                             const std::set<uint32_t>& unrecorded_owners,
                             std::chrono::milliseconds grace);

}  // namespace ckprof

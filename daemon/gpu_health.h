// GPU health: which profiler ends say that the GPU (or its runtime), not the config, failed.
// The Scheduler counts them per GPU (health_failures in a row) and drains a GPU whose count
// is reached once another GPU shows that the profiler works (see Scheduler::NoteHealth).
#pragma once

#include <string>

#include "daemon/run_result.h"

namespace ckprof {

// The line of the run's output (stderr first) that names a HIP/CUDA device or runtime error
// ("HIP runtime error", "hipErrorNoDevice", "Memory access fault by GPU", "HSA_STATUS_ERROR",
// "CUDA error", ...), trimmed, without libstdc++'s "what():", and at most 200 characters, when
// the run failed or crashed; "" otherwise.
// Out of memory and invalid values are the config's, not counted; nor is a crash without such
// a line (CK's own argument-parsing aborts look the same).
std::string DeviceErrorIn(const RunResult& r);

}  // namespace ckprof

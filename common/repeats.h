// Repeats (submit --repeat N): a job runs each config N times, as N tasks with the same
// position and runs 1..N. MergeRepeats turns those runs into one result per config: the median
// run's, with the median time, and the runs' spread (RepeatStats). ckprofd merges when it
// answers `results`; every view shows the merged rows. Plain functions; any thread.
#pragma once

#include <vector>

#include "common/protocol.h"

namespace ckprof {

// The noise_threshold ckprofd applies when its config does not set one: a CV above 5% is noisy.
inline constexpr double kDefaultNoiseThreshold = 0.05;

// One result per config, in the order the configs first appear in `tasks`. Tasks with run 0
// (not repeated) pass through unchanged. The runs of one config (same position, run > 0)
// become one result:
// - its time is the median of the succeeded runs' times (the mean of the two middle ones for
//   an even count), TFlops and GB/s scaled to it; its kernel, GPU and GPU state are those of
//   the run nearest the median (the lower middle one);
// - its state: succeeded when a run succeeded and every run has ended; queued or running while
//   a run still is; else the first run's end (its error says how many runs failed);
// - contended when any run was; `repeats` holds the spread, noisy when cv > noise_threshold.
std::vector<TaskResult> MergeRepeats(const std::vector<TaskResult>& tasks, double noise_threshold);

// The sample coefficient of variation of `values` (standard deviation with n-1 over the
// mean); 0 with fewer than two values or a mean of 0.
double CoefficientOfVariation(const std::vector<double>& values);

// The median of `values` (the mean of the two middle ones for an even count); 0 when empty.
double Median(std::vector<double> values);

}  // namespace ckprof

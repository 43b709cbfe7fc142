// RunResult as JSON, for a run that ended elsewhere: an allocation's agent (issue 35) runs the
// profiler with a ProcessRunner of its own and sends the RunResult it reported to ckprofd, which
// reads it back and goes on as for a local run. Every field round-trips (the outcome, the parsed
// figures with their top instances, the bounded captures, times, usage); where the run ran
// (`placement`) is the daemon's to fill, not the sender's. Plain functions; any thread.
#pragma once

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/run_result.h"

namespace ckprof {

nlohmann::json RunResultToJson(const RunResult& r);
// Errors name the field: "run result field 'outcome' must be one of succeeded, ...".
Result<RunResult> RunResultFromJson(const nlohmann::json& j);

}  // namespace ckprof

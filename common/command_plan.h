// Command plans: the CK command lines a set of configs would run, without running anything.
// Used by dry runs in the client and the daemon. Plain functions; any thread.
#pragma once

#include <string>
#include <vector>

#include "common/ck_command.h"
#include "common/ck_config.h"
#include "common/profiler_path.h"

namespace ckprof {

struct PlannedCommand {
  int64_t position = 0;  // 1-based
  int64_t priority_rank = 0;
  ConvOp op = ConvOp::kFwd;
  std::string description;
  std::vector<std::string> argv;  // empty when `error` says why no command could be built
  std::string error;
};

// Resolves `path`; when nothing is there (a dry run on a machine without CK), assumes the
// ckProfiler form: `path` itself when it names a file called ckProfiler, else path/ckProfiler.
// `note` (optional) receives a sentence saying which happened.
ProfilerTarget ResolveOrAssumeProfiler(const std::string& path, std::string* note);

std::vector<PlannedCommand> PlanCommands(const ProfilerTarget& target,
                                         const std::vector<CkConfig>& configs);

}  // namespace ckprof

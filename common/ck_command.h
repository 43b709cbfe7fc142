// Command building: a CkConfig and a profiler target become the exact argv ckProfiler takes
// (docs/ck-profiler.md): index_type only for fwd, split_k last for the backward ops,
// "all" passed to bwd_data as -1 (real CK aborts on "all" there).
//
// Plain functions; any thread. They never touch the file system.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/ck_config.h"
#include "common/profiler_path.h"
#include "common/result.h"

namespace ckprof {

// The positional arguments after the operation name, e.g. for fwd
// {"1", "3", "0", "0", "1", "0", "1", "2", "32", "32", "4", "4", "3", "3", ...}.
// Errors name the config (its priority rank) and the field: a list whose length is not
// num_dim_spatial, num_dim_spatial outside 1..3, a bad split_k.
Result<std::vector<std::string>> BuildProfilerArgs(const CkConfig& config);

// The whole argv: {target.path, "grouped_conv_fwd", args...} for ckProfiler, or
// {dir/profile_grouped_conv_fwd, args...} for per-operation executables. Fails as
// BuildProfilerArgs does, and when the target lacks the executable for config.op.
Result<std::vector<std::string>> BuildCommand(const ProfilerTarget& target, const CkConfig& config);

// Reads config `index` (0-based) of a configs file (operation_type with or without "profile_";
// integer checks by ConfigFromJson, errors such as "config 3: field profiler_args.G must be an
// integer, got 2.5" for index 2) and builds its argv.
Result<std::vector<std::string>> BuildCommandFromJson(const ProfilerTarget& target,
                                                      const nlohmann::ordered_json& config,
                                                      size_t index);

// Space-joined argv, each word shell-quoted only where needed ('it'\''s'), for display and the
// results file's "command".
std::string FormatCommandLine(const std::vector<std::string>& argv);

}  // namespace ckprof

// The configs file (ck_profiler_configs.json) written as text, without a JSON document in
// between: what `ckprof convert` saves and what ckprofd stores per task.
#pragma once

#include <string>
#include <vector>

#include "common/ck_config.h"
#include "common/result.h"

namespace ckprof {

// The configs file text for `configs`, byte for byte what ConfigsToText gives, built directly
// rather than through one big JSON document (faster, less memory). Never throws.
std::string FormatConfigsText(const std::vector<CkConfig>& configs);

// One config as compact JSON, byte for byte DumpJson(ConfigToJson(c)), built directly (what
// ckprofd stores per task: a 100,000-config submit spent seconds in the JSON library).
std::string ConfigJsonText(const CkConfig& c);

// Writes the configs file to `path` atomically (temporary file, fsync, rename), streamed: a
// failed run never leaves a partial file, and memory does not double for large outputs.
Status WriteConfigsFile(const std::string& path, const std::vector<CkConfig>& configs);

}  // namespace ckprof

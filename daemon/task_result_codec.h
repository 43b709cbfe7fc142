// A task's stored result: ResultJson writes it (the outcome, command, parsed perf and bounded
// captures, as the Store keeps it), TaskResultFromRecord reads a stored task row back into the
// TaskResult that clients see. Both the `task_finished` event and `results` are made by
// TaskResultFromRecord, so that they cannot disagree (returncode, error, perf).
// Plain functions; any thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/outcome.h"
#include "common/protocol.h"
#include "daemon/run_result.h"
#include "daemon/store.h"

namespace ckprof {

// The result JSON of a run that ended with `o` on `gpu` (-1: none); `r` is null when no process
// ran (a spawn failure, a cancelled queued task, an interruption found at restart); `context`
// may be null (nothing seen).
std::string ResultJson(const Outcome& o, const std::string& command, int gpu, const RunResult* r,
                       const RunContext* context = nullptr);

// The TaskResult of a stored task row. The description comes from the row's config; a row
// read without its config (the scheduler's own) has none, and the caller fills it in. The
// captures and the config are included only `with_output`.
TaskResult TaskResultFromRecord(const TaskRecord& t, bool with_output);

}  // namespace ckprof

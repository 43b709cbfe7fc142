// The results formats: the original tools' profiler_results.json (its keys keep their meaning,
// ours follow), a CSV with one row per task, and a readable table ranked by priority_rank.
// Plain functions; any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/protocol.h"

namespace ckprof {

struct ResultStats {
  int64_t total = 0, success = 0, failed = 0, skipped = 0;  // the original's four
  TaskCounts counts;  // ours: each task once, in the words every view uses
  // Some tasks are still queued or running: the results are not all there yet.
  bool partial() const { return counts.queued + counts.running > 0; }
};

// The original's four: success: succeeded; skipped: cancelled; failed: every other end
// (unsupported included: CK exits 0 when no instance supports a problem, which is no result).
// Queued and running tasks are none of the three (a job still running has partial results).
ResultStats ComputeStats(const std::vector<TaskResult>& tasks);

// {"timestamp", "stats", "results": [...]} in the original's layout. `owner` is recorded per
// result. `timestamp` is local time "YYYY-MM-DDTHH:MM:SS". `stopped`: the run was stopped
// before its end (Ctrl-C on `run`): stats.partial is true also when every task has ended.
nlohmann::ordered_json ResultsFileJson(const std::vector<TaskResult>& tasks,
                                       const std::string& owner, const std::string& timestamp,
                                       bool stopped = false);
std::string LocalTimestamp();

// One header row, then one row per task in position order; RFC 4180 quoting.
std::string ResultsCsv(const std::vector<TaskResult>& tasks);

// Ranked by priority_rank: the task (#N, its place in the job), rank, op, problem, outcome,
// ms, TFlops, GB/s and the best kernel (or why there is none).
// `width` bounds the line length: the problem and the kernel name are shortened with "..."
// to fit; 0 = unlimited (nothing is cut).
// `by_trace`: the most trace GPU time first (else by priority_rank). Configs converted from a
// trace or an IR list that kept its times get "trace ms" (per call) and "calls" columns.
std::string ResultsTable(const std::vector<TaskResult>& tasks, size_t width = 0,
                         bool by_trace = false);

// "1.23 ms" style helpers shared by the console outputs.
std::string FormatNumber(double v, int precision = 4);
// A CSV field, quoted where it holds a comma, a quote or a line break (RFC 4180).
std::string CsvField(const std::string& s);

}  // namespace ckprof

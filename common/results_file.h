// The results formats: the original tools' profiler_results.json (its keys keep their meaning,
// ours follow), a CSV with one row per task, and a readable table ranked by priority_rank.
// Plain functions; any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/protocol.h"
#include "common/text_table.h"

namespace ckprof {

struct ResultStats {
  int64_t total = 0, success = 0, failed = 0, skipped = 0;  // the original's four
  TaskCounts counts;  // ours: each task once, in the words every view uses
  // Some tasks are still queued or running: the results are not all there yet.
  bool partial() const { return counts.queued() + counts.running() > 0; }
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

// Rows told apart in a narrow table (issue 31.11): when `rows` do not fit `width` (0: unlimited,
// they do), the parts every row's problem cell (`problem_col`) shares ("G=1, N=32") and the
// template name every kernel cell (`kernel_col`, rows with `has_kernel`) shares are taken out of
// the cells (TakeCommonParts, TakeCommonTemplate); returns the lines that say what they were
// ("" when nothing was taken).
std::string ShareCommonCells(const std::vector<TextTable::Column>& header,
                             std::vector<std::vector<std::string>>* rows, size_t problem_col,
                             size_t kernel_col, const std::vector<bool>& has_kernel, size_t width);

// split_k as CK printed it ("64", "64 (best occupancy)") as a number; nullopt when there is none
// (fwd has no split_k) or it is no number. JSON writes the number or null.
std::optional<int64_t> SplitKNumber(const std::string& split_k);
// split_k as CSVs and tables write it: the number alone ("64"), else as printed, "" when none.
std::string SplitKText(const std::string& split_k);

// A unix time as ISO 8601 in local time with its UTC offset: "2026-12-03T09:24:33+01:00"
// (CSV and file timestamps); "" for 0 (no time).
std::string Iso8601(double unix_time);

// "1.23 ms" style helpers shared by the console outputs.
std::string FormatNumber(double v, int precision = 4);
// A CSV field, quoted where it holds a comma, a quote or a line break (RFC 4180); other control
// characters (ESC, BEL, CR, C1) escaped as EscapeControl shows them (common/terminal_text.h).
std::string CsvField(const std::string& s);

}  // namespace ckprof

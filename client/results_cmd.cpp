// ckprof results: a job's results as the original profiler_results.json, CSV, or a table.
#include <iostream>

#include "client/args.h"
#include "client/client_util.h"
#include "client/commands.h"
#include "common/file_util.h"
#include "common/results_file.h"
#include "common/terminal_text.h"

namespace ckprof {

int RunResultsCommand(const GlobalOptions& global, const Args& args) {
  std::string job, output, format, sort;
  bool wide = false, runs = false, json_out = false;
  ArgParser p("ckprof results",
              "Fetch a job's results. json is the original tools' profiler_results.json (with "
              "our added keys); table is ranked by priority_rank; csv has one row per task. A "
              "job submitted with --repeat has one row per config: the median run, with its "
              "runs and CV (min and max too in json and csv).",
              "The format is --format, else the extension of --output (.json, .csv, .txt: the\n"
              "table), else the table, on a terminal or not (piped: the same table, unshortened;\n"
              "colour alone depends on the terminal). An --output named otherwise (res, res.dat)\n"
              "needs --format.\n\n"
              "example:\n  ckprof results 12\n  ckprof results 12 --output profiler_results.json\n"
              "  ckprof results 12 --output results.csv\n  ckprof results 12 --json | jq .stats");
  p.Positional("JOB", &job, true, "the job id");
  p.Option("--output", &output, "FILE", "write to FILE (atomically) instead of stdout");
  p.Option("--format", &format, "F",
           "table, json or csv (default: by --output's extension, else table)");
  p.Flag("--json", &json_out, "the same as --format json");
  p.Flag("--wide", &wide,
         "table: never shorten the problem or the kernel name (the table fits the terminal "
         "otherwise)");
  p.Flag("--runs", &runs,
         "a job submitted with --repeat N: one row per run (the default: one per config, its "
         "runs' median with their spread)");
  p.Option("--sort", &sort, "KEY",
           "table: rank (priority_rank, the default) or trace (the most GPU time in the trace "
           "first)");
  if (auto code = p.Parse(args)) return *code;
  if (!sort.empty() && sort != "rank" && sort != "trace") {
    PrintError("results", "--sort must be rank or trace, got '" + sort + "'");
    return 2;
  }
  auto id = ParseJobId(job, "results");
  if (!id) return 2;
  if (auto picked = PickFormat(format, json_out, output, {"table", "json", "csv"}); !picked) {
    PrintError("results", picked.error());
    return 2;
  } else {
    format = *picked;
  }
  auto conn = ConnectOrReport(global, "results");
  if (!conn) return kExitUnreachable;
  auto fetched = FetchResults(*conn, *id, format == "json", runs);
  if (!fetched) {
    PrintError("results", fetched.error());
    return conn->lost() ? kExitUnreachable : 1;
  }
  const JobSummary& summary = fetched->job;
  // --runs of a job that was not repeated: its tasks are its runs.
  const std::vector<TaskResult>* tasks =
      runs && !fetched->runs.empty() ? &fetched->runs : &fetched->tasks;
  // Not all there yet: said on stderr, so that the results on stdout stay what they are.
  if (std::string partial = PartialNote(summary); !partial.empty()) {
    PrintError("results", partial + " (" + std::to_string(summary.counts.queued()) + " queued, " +
                              std::to_string(summary.counts.running()) + " running)");
  }
  std::string text;
  if (format == "json") {
    text = JsonForTerminal(ResultsFileJson(*tasks, summary.owner, LocalTimestamp()).dump(2)) + "\n";
  } else if (format == "csv") {
    text = ResultsCsv(*tasks);
  } else {
    text = ResultsTable(*tasks, output.empty() ? TerminalWidth(wide) : 0, sort == "trace");
  }
  if (output.empty()) {
    std::cout << text;
    return 0;
  }
  if (Status s = WriteFileAtomic(output, text); !s) {
    PrintError("results", s.error());
    return 1;
  }
  std::cerr << "results of job " << *id << " written to " << output << "\n";
  return 0;
}

}  // namespace ckprof

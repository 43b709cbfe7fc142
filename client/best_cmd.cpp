// ckprof best: the tuning table, every problem's fastest measured kernel, from ckprofd's
// stored measurements (Store::Best).
#include <iostream>
#include <optional>
#include <type_traits>

#include "client/args.h"
#include "client/client_util.h"
#include "client/commands.h"
#include "common/ck_config.h"
#include "common/file_util.h"
#include "common/results_file.h"
#include "common/terminal_text.h"
#include "common/text_table.h"
#include "common/wire_fields.h"

namespace ckprof {
namespace {

// A row as `best --format json` writes it: the daemon's fields, split_k a number (null: none).
struct BestJsonRow {
  const BestRow* row;
  std::optional<int64_t> split_k;
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, BestJsonRow>
void VisitFields(S& s, V& v) {
  const BestRow& r = *s.row;
  v("operation", r.operation);
  v("problem", r.problem);
  v("profiler", r.profiler);
  v("profiler_build", r.profiler_build);
  v.Nullable("gpu_model", r.gpu_model, !r.gpu_model.empty());
  v("best_name", r.best_name);
  v("avg_ms", r.avg_ms);
  v("tflops", r.tflops);
  v("gbps", r.gbps);
  v("split_k", s.split_k);
  v("measured", r.measured);
  v("first_at", r.first_at);
  v("last_at", r.last_at);
  v("best_at", r.best_at);
  v("job_id", r.job_id);
  v("task_id", r.task_id);
}

// Times as ISO 8601 (local, with the offset), split_k as a number (empty: none, as fwd).
std::string BestCsv(const std::vector<BestRow>& rows) {
  std::string out =
      "operation,problem,gpu_model,profiler,profiler_build,best_instance,avg_time_ms,tflops,"
      "gb_per_s,split_k,measured,first_measured,last_measured,best_measured,job_id,task_id\n";
  for (const auto& r : rows) {
    out += CsvField(r.operation) + ',' + CsvField(r.problem) + ',' + CsvField(r.gpu_model) + ',' +
           CsvField(r.profiler) + ',' + CsvField(r.profiler_build) + ',' + CsvField(r.best_name) +
           ',' + FormatNumber(r.avg_ms, 6) + ',' + FormatNumber(r.tflops, 6) + ',' +
           FormatNumber(r.gbps, 6) + ',' + CsvField(SplitKText(r.split_k)) + ',' +
           std::to_string(r.measured) + ',' + Iso8601(r.first_at) + ',' + Iso8601(r.last_at) + ',' +
           Iso8601(r.best_at) + ',' + std::to_string(r.job_id) + ',' + std::to_string(r.task_id) +
           '\n';
  }
  return out;
}

std::string BestTable(const std::vector<BestRow>& rows, size_t width) {
  const std::vector<TextTable::Column> columns = {{"op"},
                                                  {"problem", false, true, 16},
                                                  {"GPU model", false, true, 8},
                                                  {"ms", true},
                                                  {"TFlops", true},
                                                  {"GB/s", true},
                                                  {"split_k", true},
                                                  {"best kernel", false, true, 12},
                                                  {"n", true},
                                                  {"last measured"},
                                                  {"job", true}};
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : rows) {
    // The key starts with the op: the column says it already.
    std::string problem = r.problem.substr(r.problem.find(' ') + 1);
    cells.push_back({ShortOp(r.operation), problem, r.gpu_model.empty() ? "unknown" : r.gpu_model,
                     FormatNumber(r.avg_ms, 5), FormatNumber(r.tflops, 4), FormatNumber(r.gbps, 4),
                     r.split_k.empty() ? "-" : SplitKText(r.split_k), r.best_name,
                     std::to_string(r.measured), FormatClock(r.last_at), std::to_string(r.job_id)});
  }
  const std::string shared =
      ShareCommonCells(columns, &cells, 1, 7, std::vector<bool>(cells.size(), true), width);
  TextTable table(columns);
  for (auto& row : cells) table.AddRow(std::move(row));
  return table.Render(width) + shared;
}

}  // namespace

int RunBestCommand(const GlobalOptions& global, const Args& args) {
  std::string op, profiler, gpu_model, format, output;
  bool wide = false, json_out = false;
  ArgParser p("ckprof best",
              "The tuning table: for every problem ever measured on this daemon (an operation "
              "and every profiler argument that changes the work), per profiler build and GPU "
              "model, its fastest kernel instance, time, TFlops, GB/s and split_k, how many "
              "times it was measured and when.",
              "Rows come from successful runs with a best kernel and no foreign process on\n"
              "the GPU; reused results are not counted again. Where the daemon sets\n"
              "share_results: false, each user sees their own measurements (admins: all).\n\n"
              "example:\n  ckprof best --op fwd --gpu-model MI300X\n"
              "  ckprof best --profiler /opt/ck/build/bin --format csv --output tuning.csv");
  p.Option("--op", &op, "OP", "fwd, bwd_data or bwd_weight (default: all)");
  p.Option("--profiler", &profiler, "P",
           "only builds at this path: ckProfiler, or the directory of per-operation "
           "executables (default: all)");
  p.Option("--gpu-model", &gpu_model, "M",
           "only GPU models whose name holds M, in any case: MI300X, H100 (default: all)");
  p.Option("--format", &format, "F",
           "table, csv or json (default: by --output's extension, .json, .csv or .txt, else "
           "table, on a terminal or not; an --output named otherwise needs --format)");
  p.Flag("--json", &json_out, "the same as --format json");
  p.Option("--output", &output, "FILE", "write to FILE (atomically) instead of stdout");
  p.Flag("--wide", &wide, "table: never shorten the problem or the kernel name");
  if (auto code = p.Parse(args)) return *code;
  if (!op.empty() && !ParseOperationType(op)) {
    PrintError("best", "--op must be fwd, bwd_data or bwd_weight, got '" + op + "'");
    return 2;
  }
  if (auto picked = PickFormat(format, json_out, output, {"table", "csv", "json"}); !picked) {
    PrintError("best", picked.error());
    return 2;
  } else {
    format = *picked;
  }
  BestRequest r;
  r.op = op;
  r.profiler_path = AbsolutePath(profiler);
  r.gpu_model = gpu_model;
  BestReply a;
  if (int code = Ask(global, "best", r, &a)) return code;
  std::string text;
  if (format == "json") {
    // One row per line, written straight as text: tens of thousands of rows through a DOM and
    // its indentation cost more than the daemon's answer.
    text = std::string("{\"shared\": ") + (a.shared ? "true" : "false") + ", \"rows\": [";
    for (size_t i = 0; i < a.rows.size(); ++i) {
      text += i ? ",\n  " : "\n  ";
      AppendObject(text, BestJsonRow{&a.rows[i], SplitKNumber(a.rows[i].split_k)});
    }
    text += a.rows.empty() ? "]}\n" : "\n]}\n";
    text = JsonForTerminal(std::move(text));
  } else if (format == "csv") {
    text = BestCsv(a.rows);
  } else if (a.rows.empty()) {
    text = "no measurement matches" + std::string(a.shared ? "" : " (your own only)") +
           ": a successful run of a job records one\n";
  } else {
    text = BestTable(a.rows, output.empty() ? TerminalWidth(wide) : 0) +
           std::to_string(a.rows.size()) + " problem(s)" +
           (a.shared ? "" : ", your own measurements only (share_results is off)") + "\n";
  }
  if (output.empty()) {
    std::cout << text;
    return 0;
  }
  if (Status s = WriteFileAtomic(output, text); !s) {
    PrintError("best", s.error());
    return 1;
  }
  std::cerr << a.rows.size() << " row(s) written to " << output << "\n";
  return 0;
}

}  // namespace ckprof

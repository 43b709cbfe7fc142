// ckprof report: a job's results as one self-contained HTML page (or Markdown): the verdict on
// the model's convolution time with CK's best kernels, per problem, a roofline, the job's
// timeline, its failures, settings and GPU state. The job comes from the daemon, or from a file:
// a results file (profiler_results.json) or the data a report was made from (--format json).
// The page itself is client/report.cpp.
#include <sys/stat.h>

#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>

#include "client/args.h"
#include "client/client_util.h"
#include "client/commands.h"
#include "client/report.h"
#include "common/file_util.h"
#include "common/results_file.h"
#include "common/terminal_text.h"
#include "common/wire_fields.h"

namespace ckprof {

namespace {

using json = nlohmann::json;

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// One side of the report, as read.
struct Loaded {
  ResultsReply reply;
  std::string label;  // "job 12 (resnet)" or the file's path
  std::string stem;   // "12" or the file's base name without .json, for the default output
  bool has_start_times = true;
};

template <typename T>
std::optional<T> Field(const json& r, const char* key) {
  auto it = r.find(key);
  if (it == r.end() || it->is_null()) return std::nullopt;
  if constexpr (std::is_same_v<T, std::string>) {
    if (it->is_string()) return it->get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (it->is_boolean()) return it->get<bool>();
  } else {
    if (it->is_number()) return it->get<T>();
  }
  return std::nullopt;
}

// A results file's row (the keys ResultsFileJson writes) as a task's result.
Result<TaskResult> FromResultsRow(const json& r, const std::string& where, int64_t index) {
  if (!r.is_object()) return MakeError(where + " is not an object");
  TaskResult t;
  auto op = Field<std::string>(r, "operation");
  if (!op) return MakeError(where + ": \"operation\" is missing or not a string");
  t.operation = *op;
  t.description = Field<std::string>(r, "description").value_or("");
  t.position = Field<int64_t>(r, "position").value_or(index);
  t.priority_rank = Field<int64_t>(r, "priority_rank").value_or(t.position);
  t.task_id = Field<int64_t>(r, "task_id").value_or(t.position);
  t.job_id = Field<int64_t>(r, "job_id").value_or(0);
  const bool success = Field<bool>(r, "success").value_or(false);
  t.state = success ? TaskState::kSucceeded : TaskState::kFailed;
  if (auto status = Field<std::string>(r, "status")) {
    TaskState s;
    if (ParseEnum(*status, &s) && (s == TaskState::kSucceeded) == success) t.state = s;
  }
  t.gpu = static_cast<int>(Field<int64_t>(r, "gpu").value_or(-1));
  t.elapsed_s = Field<double>(r, "elapsed_time").value_or(0);
  t.returncode = static_cast<int>(Field<int64_t>(r, "returncode").value_or(0));
  t.best_name = Field<std::string>(r, "best_instance").value_or("");
  t.avg_ms = Field<double>(r, "avg_time_ms").value_or(0);
  t.tflops = Field<double>(r, "tflops").value_or(0);
  t.gbps = Field<double>(r, "gb_per_s").value_or(0);
  t.error = Field<std::string>(r, "error").value_or("");
  if (auto c = r.find("config"); c != r.end() && c->is_object()) {
    t.config = nlohmann::ordered_json::parse(c->dump());
  }
  if (auto by = r.find("contended_by"); by != r.end() && by->is_array()) {
    for (const json& u : *by) {
      if (auto user = FromDom<GpuUser>(u, "contended_by")) t.contended.push_back(*user);
    }
  }
  if (t.contended.empty() && Field<bool>(r, "contended").value_or(false)) {
    t.contended.push_back(GpuUser{});  // contended, by someone the file does not name
  }
  if (auto g = r.find("gpu_state"); g != r.end() && g->is_object()) {
    if (auto s = FromDom<GpuState>(*g, "gpu_state")) t.gpu_state = *s;
  }
  if (auto rep = r.find("repeats"); rep != r.end() && rep->is_object()) {
    if (auto s = FromDom<RepeatStats>(*rep, "repeats")) t.repeats = *s;
  }
  t.trace_gpu_us = Field<double>(r, "trace_gpu_time_us");
  t.trace_count = Field<int64_t>(r, "trace_count");
  if (auto reused = r.find("reused_from"); reused != r.end() && reused->is_object()) {
    if (auto s = FromDom<ReusedFrom>(*reused, "reused_from")) t.reused_from = *s;
  }
  return t;
}

const char* kExpected =
    " (expected a results file from 'ckprof results JOB --format json' or 'ckprof run', or "
    "the data of a report from 'ckprof report JOB --format json')";

// A file: the data of a report ({"job": ..., "tasks": [...]}) or a results file.
Result<Loaded> LoadFile(const std::string& path) {
  auto text = ReadInputFile(path);
  if (!text) return Error{text.error()};
  json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return MakeError(path + ": not valid JSON" + kExpected);
  Loaded out;
  out.label = path;
  out.stem = BaseName(path);
  if (out.stem.size() > 5 && out.stem.ends_with(".json")) out.stem.resize(out.stem.size() - 5);
  if (doc.is_object() && doc.contains("tasks") && doc.contains("job")) {
    if (!doc["tasks"].is_array()) return MakeError(path + ": \"tasks\" is not an array");
    auto reply = FromDom<ResultsReply>(doc, path);
    if (!reply) return Error{reply.error()};
    out.reply = std::move(*reply);
    if (out.reply.job.id > 0) {
      out.label = "job " + std::to_string(out.reply.job.id) +
                  (out.reply.job.name.empty() ? "" : " (" + out.reply.job.name + ")");
    }
    return out;
  }
  const json* results = &doc;
  if (doc.is_object()) {
    auto it = doc.find("results");
    if (it == doc.end()) return MakeError(path + ": no \"results\" array" + kExpected);
    results = &*it;
  }
  if (!results->is_array()) return MakeError(path + ": \"results\" is not an array");
  int64_t index = 0;
  for (const json& r : *results) {
    ++index;
    auto t = FromResultsRow(r, path + ": results[" + std::to_string(index - 1) + "]", index);
    if (!t) return Error{t.error()};
    out.reply.tasks.push_back(std::move(*t));
  }
  // The job's counts, as the daemon would give them.
  JobSummary& s = out.reply.job;
  s.state = JobState::kFinished;
  for (const TaskResult& t : out.reply.tasks) {
    ++s.total;
    s.counts.Add(t.state);
    if (t.reused_from) ++s.reused;
  }
  out.has_start_times = false;
  return out;
}

// A JOB argument: an existing file wins over a job id of the same name.
struct Source {
  std::string text;
  std::optional<int64_t> job;
};

std::optional<Source> ParseSource(const std::string& text) {
  static const std::regex digits(R"(\d+)");
  Source s{text, std::nullopt};
  if (IsFile(text)) return s;
  if (!std::regex_match(text, digits)) {
    PrintError("report", "'" + text + "' is neither a job id nor a file");
    return std::nullopt;
  }
  s.job = ParseJobId(text, "report");
  if (!s.job) return std::nullopt;
  return s;
}

// A positive number; nullopt when not given, -1 when malformed.
std::optional<double> ParsePeak(const std::string& text) {
  if (text.empty()) return std::nullopt;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !std::isfinite(v) || v <= 0) return -1.0;
  return v;
}

}  // namespace

int RunReportCommand(const GlobalOptions& global, const Args& args) {
  std::string job_arg, baseline_arg, peak_tflops, peak_gbps, output, format;
  ArgParser p(
      "ckprof report",
      "Write a job's report: one self-contained HTML page (no network, no scripts; inline SVG "
      "charts; prints well) with the verdict on the model's convolution time with CK's best "
      "kernel per problem, the problems ranked by trace GPU time, a roofline, the job's "
      "timeline, its failures, settings and GPU state.",
      "JOB is a job id (fetched from the daemon), a results file ('ckprof results JOB --format\n"
      "json', 'ckprof run'; it has no start times, so the timeline is approximate) or the data\n"
      "of a report ('ckprof report JOB --format json'). An existing file wins over a job id.\n"
      "Without --baseline, CK's best time per problem is compared with the trace's own time\n"
      "per call (what PyTorch's kernels took), weighted by the calls; a backward record's\n"
      "bwd_data and bwd_weight results are summed against its trace time. Problems CK could not\n"
      "do keep their trace time in the total, and the coverage says so. With --baseline (e.g.\n"
      "a tools/torch-conv-profiler job of the same configs), the baseline's times are the\n"
      "reference. Peaks: --peak-tflops (for every data type) and --peak-gbps, else the known\n"
      "dense peaks of the GPU model (MI300X, MI250X, H100, H200) per data type, else none.\n\n"
      "examples:\n"
      "  ckprof report 12                              # writes report-12.html\n"
      "  ckprof report 12 --baseline 13 --output resnet.html\n"
      "  ckprof report 12 --format md -o - >> pr-description.md\n"
      "  ckprof report profiler_results.json --peak-tflops 1307 --peak-gbps 5300");
  p.Positional("JOB", &job_arg, true, "the job id, a results file or a report's data file");
  p.Option("--baseline", &baseline_arg, "JOB",
           "compare with this job (or results file) instead of the trace's times");
  p.Option("--peak-tflops", &peak_tflops, "X", "the GPU's peak TFlops, for the roofline");
  p.Option("--peak-gbps", &peak_gbps, "Y", "the GPU's peak memory bandwidth in GB/s");
  p.Option("--output", &output, "FILE",
           "write to FILE (atomically; - for stdout); default report-JOB.html (.md, .json) in "
           "the current directory");
  p.Alias("-o", "--output");
  p.Option("--format", &format, "F",
           "html, md (Markdown tables, for a pull request) or json (the data the report is made "
           "from, which 'ckprof report FILE' reads back); default: by --output's extension "
           "(.html, .md, .json; another needs --format), else html");
  bool json_out = false;
  p.Flag("--json", &json_out, "the same as --format json");
  if (auto code = p.Parse(args)) return *code;
  if (auto picked = PickFormat(format, json_out, output, {"html", "md", "json"}); !picked) {
    PrintError("report", picked.error());
    return 2;
  } else {
    format = *picked;
  }
  ReportOptions options;
  for (const auto& [text, name, target] :
       {std::tuple{&peak_tflops, "--peak-tflops", &options.peak_tflops},
        std::tuple{&peak_gbps, "--peak-gbps", &options.peak_gbps}}) {
    auto v = ParsePeak(*text);
    if (v && *v <= 0) {
      PrintError("report", std::string(name) + " must be a positive number, got '" + *text + "'");
      return 2;
    }
    *target = v;
  }
  auto main_source = ParseSource(job_arg);
  if (!main_source) return 2;
  std::optional<Source> baseline_source;
  if (!baseline_arg.empty()) {
    baseline_source = ParseSource(baseline_arg);
    if (!baseline_source) return 2;
  }

  std::unique_ptr<Connection> conn;
  auto load = [&](const Source& src) -> std::optional<Loaded> {
    if (!src.job) {
      auto loaded = LoadFile(src.text);
      if (!loaded) {
        PrintError("report", loaded.error());
        return std::nullopt;
      }
      return std::move(*loaded);
    }
    if (!conn) {
      conn = ConnectOrReport(global, "report");
      if (!conn) return std::nullopt;
    }
    auto fetched = FetchResults(*conn, *src.job, /*with_output=*/true);
    if (!fetched) {
      PrintError("report", "job " + std::to_string(*src.job) + ": " + fetched.error());
      return std::nullopt;
    }
    Loaded out;
    out.reply = std::move(*fetched);
    // The captures are not shown: drop them (a large job's would only cost memory).
    for (TaskResult& t : out.reply.tasks) t.stdout_text.clear(), t.stderr_text.clear();
    out.reply.runs.clear();
    out.label = "job " + std::to_string(*src.job) +
                (out.reply.job.name.empty() ? "" : " (" + out.reply.job.name + ")");
    out.stem = std::to_string(*src.job);
    if (std::string partial = PartialNote(out.reply.job); !partial.empty()) {
      PrintError("report", partial + ": the report shows the results so far");
    }
    return out;
  };
  auto failed = [&]() { return conn && conn->lost() ? kExitUnreachable : 1; };
  if (main_source->job && !conn) {
    conn = ConnectOrReport(global, "report");
    if (!conn) return kExitUnreachable;
  }
  auto job = load(*main_source);
  if (!job) return failed();
  std::optional<Loaded> baseline;
  if (baseline_source) {
    baseline = load(*baseline_source);
    if (!baseline) return failed();
  }

  if (output.empty()) output = "report-" + job->stem + "." + format;
  std::string text;
  if (format == "json") {
    text = JsonForTerminal(ToDom(job->reply).dump(1)) + "\n";
  } else {
    options.job_label = job->label;
    if (baseline) options.baseline_label = baseline->label;
    options.approximate_timeline = !job->has_start_times;
    options.generated_at = LocalTimestamp();
    const ResultsReply* base = baseline ? &baseline->reply : nullptr;
    text = format == "md" ? RenderReportMarkdown(job->reply, base, options)
                          : RenderReportHtml(job->reply, base, options);
  }
  if (IsStdio(output)) {
    std::cout << text << std::flush;
    return 0;
  }
  if (Status s = WriteFileAtomic(output, text); !s) {
    PrintError("report", s.error());
    return 1;
  }
  std::cerr << "report of " << EscapeControl(job->label) << " written to " << output << "\n";
  return 0;
}

}  // namespace ckprof

#include "common/results_file.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <iomanip>
#include <sstream>

#include "common/ck_config.h"
#include "common/terminal_text.h"
#include "common/text_table.h"
#include "common/wire_fields.h"

namespace ckprof {
std::string CsvField(const std::string& text) {
  // CSV has no escapes of its own: a control character (ESC, BEL, CR) is shown escaped, as on
  // every text view; line breaks and tabs stay, quoted.
  const std::string s =
      HasControl(text, LineBreaks::kKeep) ? EscapeControl(text, LineBreaks::kKeep) : text;
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

namespace {

using ojson = nlohmann::ordered_json;

// split_k as a number when CK printed one ("4", "4 (best occupancy)"), else as printed; null
// when there is none.
ojson SplitKJson(const std::string& split_k) {
  if (split_k.empty()) return nullptr;
  if (auto v = SplitKNumber(split_k)) return *v;
  return split_k;
}

}  // namespace

std::optional<int64_t> SplitKNumber(const std::string& split_k) {
  if (split_k.empty()) return std::nullopt;
  char* end = nullptr;
  const long long v = std::strtoll(split_k.c_str(), &end, 10);
  if (end != split_k.c_str() && (*end == '\0' || *end == ' ')) return v;
  return std::nullopt;
}

std::string SplitKText(const std::string& split_k) {
  if (auto v = SplitKNumber(split_k)) return std::to_string(*v);
  return split_k;
}

std::string Iso8601(double unix_time) {
  if (!(unix_time > 0)) return "";
  const std::time_t t = static_cast<std::time_t>(unix_time);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z", &tm);
  std::string out = buf;  // +0100 -> +01:00, as ISO 8601's extended form
  if (out.size() >= 5) out.insert(out.size() - 2, ":");
  return out;
}

std::string FormatNumber(double v, int precision) {
  if (!std::isfinite(v)) return v > 0 ? "inf" : "-";
  std::ostringstream ss;
  ss << std::setprecision(precision) << v;
  return ss.str();
}

ResultStats ComputeStats(const std::vector<TaskResult>& tasks) {
  ResultStats s;
  for (const auto& t : tasks) s.counts.Add(t.state);
  s.total = static_cast<int64_t>(tasks.size());
  s.success = s.counts.succeeded();
  s.skipped = s.counts.of(TaskState::kCancelled);
  s.failed = s.counts.ran() - s.counts.succeeded();
  return s;
}

std::string LocalTimestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

ojson ResultsFileJson(const std::vector<TaskResult>& tasks, const std::string& owner,
                      const std::string& timestamp, bool stopped) {
  ResultStats s = ComputeStats(tasks);
  ojson out = ojson::object();
  out["timestamp"] = timestamp;
  ojson stats = {
      {"total", s.total}, {"success", s.success}, {"failed", s.failed}, {"skipped", s.skipped}};
  // Ours: the other columns by name ("unsupported", "timed_out", ...), queued, running.
  for (TaskState c : FinalColumns()) {
    if (c != TaskState::kSucceeded && c != TaskState::kFailed) stats[EnumName(c)] = s.counts.of(c);
  }
  stats["queued"] = s.counts.queued();
  stats["running"] = s.counts.running();
  stats["partial"] = stopped || s.partial();
  out["stats"] = std::move(stats);
  ojson results = ojson::array();
  std::vector<const TaskResult*> ordered;
  for (const auto& t : tasks) ordered.push_back(&t);
  std::stable_sort(ordered.begin(), ordered.end(), [](const TaskResult* a, const TaskResult* b) {
    return a->position < b->position;
  });
  for (const TaskResult* t : ordered) {
    ojson r = ojson::object();
    r["operation"] = t->operation;
    r["description"] = t->description;
    r["priority_rank"] = t->priority_rank;
    r["success"] = t->ok();
    r["returncode"] = t->returncode;
    r["elapsed_time"] = std::round(t->elapsed_s * 1000) / 1000;
    r["command"] = t->command;
    r["error"] = t->ok() ? ojson(nullptr)
                         : ojson(t->error.empty() ? std::string(EnumName(t->state)) : t->error);
    r["stdout"] = t->stdout_text;
    // Ours, after the original's keys.
    r["status"] = t->state;
    r["gpu"] = t->gpu >= 0 ? ojson(t->gpu) : ojson(nullptr);
    // Only a success has a best instance (a failed run may have printed one before failing).
    r["best_instance"] = t->ok() && !t->best_name.empty() ? ojson(t->best_name) : ojson(nullptr);
    r["avg_time_ms"] = t->ok() ? ojson(t->avg_ms) : ojson(nullptr);
    r["tflops"] = t->ok() ? ojson(t->tflops) : ojson(nullptr);
    r["gb_per_s"] = t->ok() ? ojson(t->gbps) : ojson(nullptr);
    r["split_k"] = t->ok() ? SplitKJson(t->split_k) : ojson(nullptr);
    r["valid_instances"] = t->valids >= 0 ? ojson(t->valids) : ojson(nullptr);
    r["attempts"] = t->attempts;
    r["owner"] = owner;
    r["job_id"] = t->job_id;
    r["task_id"] = t->task_id;
    r["position"] = t->position;
    r["stderr"] = t->stderr_text;
    if (!t->config.is_null()) r["config"] = t->config;
    // Whether its timing can be trusted: foreign processes seen on its GPU while it ran, and
    // what the GPU was and how (null: not known).
    r["contended"] = !t->contended.empty();
    ojson by = ojson::array();
    for (const auto& u : t->contended) by.push_back(ojson::parse(ToDom(u).dump()));
    r["contended_by"] = std::move(by);
    r["gpu_state"] = t->gpu_state ? ojson::parse(ToDom(*t->gpu_state).dump()) : ojson(nullptr);
    r["cpu_s"] = t->cpu_s ? ojson(*t->cpu_s) : ojson(nullptr);
    r["peak_memory_bytes"] = t->peak_memory_bytes ? ojson(*t->peak_memory_bytes) : ojson(nullptr);
    // A config run several times (--repeat): avg_time_ms is the runs' median; here is their
    // spread (null: run once).
    r["run"] = t->run > 0 ? ojson(t->run) : ojson(nullptr);  // one run of it (results --runs)
    r["noisy"] = t->noisy();
    r["repeats"] = t->repeats ? ojson::parse(ToDom(*t->repeats).dump()) : ojson(nullptr);
    // What PyTorch took for it in the trace (null: the input did not say).
    r["trace_gpu_time_us"] = t->trace_gpu_us ? ojson(*t->trace_gpu_us) : ojson(nullptr);
    r["trace_count"] = t->trace_count ? ojson(*t->trace_count) : ojson(nullptr);
    // Not run: copied from an earlier run of the same problem and profiler build (null: run).
    r["reused_from"] =
        t->reused_from ? ojson::parse(ToDom(*t->reused_from).dump()) : ojson(nullptr);
    // Run through a remote executor (e.g. "slurm"): its name, job and node; gpu is the GPU it
    // granted (null, null, null: run here).
    const Placement none;
    const Placement& at = t->placement ? *t->placement : none;
    r["executor"] = at.executor.empty() ? ojson(nullptr) : ojson(at.executor);
    r["node"] = at.node.empty() ? ojson(nullptr) : ojson(at.node);
    r["executor_job_id"] = at.job_id > 0 ? ojson(at.job_id) : ojson(nullptr);
    results.push_back(std::move(r));
  }
  out["results"] = std::move(results);
  return out;
}

std::string ResultsCsv(const std::vector<TaskResult>& tasks) {
  std::string out =
      "job_id,task_id,position,priority_rank,operation,description,status,gpu,attempts,"
      "returncode,elapsed_s,best_instance,avg_time_ms,tflops,gb_per_s,split_k,valid_instances,"
      "error,command,contended_by,gpu_name,gpu_uuid,gpu_arch,gpu_driver,sclk_mhz_before,"
      "sclk_mhz_after,mclk_mhz_before,mclk_mhz_after,temperature_c_before,temperature_c_after,"
      "power_w_before,power_w_after,cpu_s,peak_memory_bytes,run,runs,runs_succeeded,min_ms,"
      "max_ms,cv,noisy,trace_gpu_time_us,trace_count,reused_from_job,reused_from_task,executor,"
      "node,executor_job_id\n";
  std::vector<const TaskResult*> ordered;
  for (const auto& t : tasks) ordered.push_back(&t);
  std::stable_sort(ordered.begin(), ordered.end(), [](const TaskResult* a, const TaskResult* b) {
    return a->position < b->position;
  });
  for (const TaskResult* t : ordered) {
    std::ostringstream row;
    row << t->job_id << ',' << t->task_id << ',' << t->position << ',' << t->priority_rank << ','
        << CsvField(t->operation) << ',' << CsvField(t->description) << ',' << EnumName(t->state)
        << ',' << (t->gpu >= 0 ? std::to_string(t->gpu) : "") << ',' << t->attempts << ','
        << t->returncode << ',' << FormatNumber(t->elapsed_s, 6) << ','
        << (t->ok() ? CsvField(t->best_name) : "") << ','
        << (t->ok() ? FormatNumber(t->avg_ms, 6) : "") << ','
        << (t->ok() ? FormatNumber(t->tflops, 6) : "") << ','
        << (t->ok() ? FormatNumber(t->gbps, 6) : "") << ','
        << (t->ok() ? CsvField(SplitKText(t->split_k)) : "") << ','
        << (t->valids >= 0 ? std::to_string(t->valids) : "") << ',' << CsvField(t->error) << ','
        << CsvField(t->command);
    std::string by;
    for (const auto& u : t->contended) by += (by.empty() ? "" : "; ") + u.Describe();
    row << ',' << CsvField(by);
    const GpuState none;
    const GpuState& g = t->gpu_state ? *t->gpu_state : none;
    row << ',' << CsvField(g.name) << ',' << CsvField(g.uuid) << ',' << CsvField(g.arch) << ','
        << CsvField(g.driver);
    // A reading that is not there is an empty cell, never 0.
    auto cell = [](const std::optional<GpuReading>& r, std::optional<double> GpuReading::*field) {
      return r && ((*r).*field) ? FormatNumber(*((*r).*field), 6) : std::string();
    };
    for (auto field : {&GpuReading::sclk_mhz, &GpuReading::mclk_mhz, &GpuReading::temperature_c,
                       &GpuReading::power_w}) {
      row << ',' << cell(g.before, field) << ',' << cell(g.after, field);
    }
    row << ',' << (t->cpu_s ? FormatNumber(*t->cpu_s, 6) : "") << ','
        << (t->peak_memory_bytes ? std::to_string(*t->peak_memory_bytes) : "") << ','
        << (t->run > 0 ? std::to_string(t->run) : "");
    // The spread of a repeated config (empty cells: run once; no time: none succeeded).
    if (const auto& rep = t->repeats) {
      const bool timed = rep->succeeded > 0;
      row << ',' << rep->runs << ',' << rep->succeeded << ','
          << (timed ? FormatNumber(rep->min_ms, 6) : "") << ','
          << (timed ? FormatNumber(rep->max_ms, 6) : "") << ','
          << (timed ? FormatNumber(rep->cv, 6) : "") << ',' << (rep->noisy ? "true" : "false");
    } else {
      row << ",,,,,,";
    }
    row << ',' << (t->trace_gpu_us ? FormatNumber(*t->trace_gpu_us, 6) : "") << ','
        << (t->trace_count ? std::to_string(*t->trace_count) : "") << ','
        << (t->reused_from ? std::to_string(t->reused_from->job_id) : "") << ','
        << (t->reused_from ? std::to_string(t->reused_from->task_id) : "") << ','
        << (t->placement
                ? CsvField(t->placement->executor) + ',' + CsvField(t->placement->node) + ',' +
                      (t->placement->job_id > 0 ? std::to_string(t->placement->job_id) : "")
                : ",,");
    row << '\n';
    out += row.str();
  }
  return out;
}

namespace {

// The widest line of `text`, in display columns.
size_t WidestLine(const std::string& text) {
  size_t widest = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    widest = std::max(widest, DisplayWidth(text.substr(at, end - at)));
    at = end + 1;
  }
  return widest;
}

}  // namespace

std::string ShareCommonCells(const std::vector<TextTable::Column>& header,
                             std::vector<std::vector<std::string>>* rows, size_t problem_col,
                             size_t kernel_col, const std::vector<bool>& has_kernel, size_t width) {
  if (width == 0 || rows->size() < 2) return "";
  TextTable whole(header);
  for (const auto& row : *rows) whole.AddRow(row);
  if (WidestLine(whole.Render(0)) <= width) return "";
  std::string said;
  std::vector<std::string> problems;
  for (const auto& row : *rows) problems.push_back(row[problem_col]);
  if (std::string common = TakeCommonParts(&problems); !common.empty()) {
    for (size_t i = 0; i < rows->size(); ++i) (*rows)[i][problem_col] = problems[i];
    said += "problem: every row has " + EscapeControl(common) + "\n";
  }
  std::vector<size_t> ok;
  std::vector<std::string> kernels;
  for (size_t i = 0; i < rows->size(); ++i) {
    if (has_kernel[i] && !(*rows)[i][kernel_col].empty()) {
      ok.push_back(i);
      kernels.push_back((*rows)[i][kernel_col]);
    }
  }
  if (std::string name = TakeCommonTemplate(&kernels); !name.empty()) {
    for (size_t k = 0; k < ok.size(); ++k) (*rows)[ok[k]][kernel_col] = kernels[k];
    said += "best kernel: every one is " + EscapeControl(name) + "<...>\n";
  }
  return said;
}

std::string ResultsTable(const std::vector<TaskResult>& tasks, size_t width, bool by_trace) {
  std::vector<const TaskResult*> ordered;
  for (const auto& t : tasks) ordered.push_back(&t);
  std::stable_sort(ordered.begin(), ordered.end(), [](const TaskResult* a, const TaskResult* b) {
    return std::tie(a->priority_rank, a->position) < std::tie(b->priority_rank, b->position);
  });
  if (by_trace) {  // the most trace GPU time first; those without last
    std::stable_sort(ordered.begin(), ordered.end(), [](const TaskResult* a, const TaskResult* b) {
      return a->trace_gpu_us.value_or(-1) > b->trace_gpu_us.value_or(-1);
    });
  }
  const bool traced = std::any_of(ordered.begin(), ordered.end(),
                                  [](const TaskResult* t) { return t->trace_gpu_us.has_value(); });
  // The problem and the kernel (or the reason it failed) give way to fit the width; the
  // numbers never do.
  // A repeated job's table says how many runs each config had and how far apart they were.
  const bool repeated = std::any_of(ordered.begin(), ordered.end(),
                                    [](const TaskResult* t) { return t->repeats.has_value(); });
  std::vector<TextTable::Column> columns = {
      {"task", true}, {"rank", true}, {"op"}, {"problem", false, true, 12}, {"outcome"}};
  if (traced) {
    columns.push_back({"trace ms", true});
    columns.push_back({"calls", true});
  }
  columns.push_back({repeated ? "median ms" : "ms", true});
  if (repeated) {
    columns.push_back({"runs", true});
    columns.push_back({"CV", true});
  }
  columns.push_back({"TFlops", true});
  columns.push_back({"GB/s", true});
  columns.push_back({"best kernel", false, true, 12});
  const std::vector<TextTable::Column> header = columns;
  std::vector<std::vector<std::string>> rows;
  int64_t contended = 0, noisy = 0, reused = 0;
  for (const TaskResult* t : ordered) {
    std::string problem = t->description;
    if (auto colon = problem.find(": "); colon != std::string::npos)
      problem = problem.substr(colon + 2);
    const bool ok = t->ok();
    contended += t->contended.empty() ? 0 : 1;
    noisy += t->noisy() ? 1 : 0;
    reused += t->reused_from ? 1 : 0;
    std::vector<std::string> row = {
        "#" + std::to_string(t->position) + (t->run > 0 ? " run " + std::to_string(t->run) : ""),
        std::to_string(t->priority_rank), ShortOp(t->operation), problem,
        std::string(EnumName(t->state)) + (t->contended.empty() ? "" : "*") +
            (t->noisy() ? "~" : "") + (t->reused_from ? "=" : "")};
    if (traced) {
      const auto per_call = t->trace_ms_per_call();
      row.push_back(per_call ? FormatNumber(*per_call, 5) : "-");
      row.push_back(t->trace_count ? std::to_string(*t->trace_count) : "-");
    }
    row.push_back(ok ? FormatNumber(t->avg_ms, 5) : "-");
    if (repeated) {
      const auto& rep = t->repeats;
      row.push_back(rep ? std::to_string(rep->succeeded) + "/" + std::to_string(rep->runs) : "1");
      row.push_back(rep && rep->succeeded > 1 ? FormatNumber(rep->cv * 100, 3) + "%" : "-");
    }
    row.push_back(ok ? FormatNumber(t->tflops, 4) : "-");
    row.push_back(ok ? FormatNumber(t->gbps, 4) : "-");
    row.push_back(ok ? t->best_name : t->error);
    rows.push_back(std::move(row));
  }
  // Rows that would be cut alike ("G=1, N=32, K=...", "DeviceGroupedConv...") lose what they
  // all share instead, said once below the table.
  std::vector<bool> has_kernel;
  for (const TaskResult* t : ordered) has_kernel.push_back(t->ok());
  const std::string shared =
      ShareCommonCells(header, &rows, 3, header.size() - 1, has_kernel, width);
  TextTable table(std::move(columns));
  for (auto& row : rows) table.AddRow(std::move(row));
  std::string out = table.Render(width) + shared;
  ResultStats s = ComputeStats(tasks);
  if (repeated) {
    const auto first = std::find_if(ordered.begin(), ordered.end(),
                                    [](const TaskResult* t) { return t->repeats.has_value(); });
    out += std::to_string(s.total) + " config(s), " + std::to_string((*first)->repeats->runs) +
           " runs each: " + s.counts.Describe() + "\n";
  } else {
    out += std::to_string(s.total) + " task(s): " + s.counts.Describe() + "\n";
  }
  if (traced) {
    out +=
        "trace ms: PyTorch's GPU time per call in the trace this came from (a backward call's "
        "covers its bwd_data and bwd_weight together); ms: CK's best kernel\n";
  }
  if (reused > 0) {
    out +=
        "= reused: not run, the result of an earlier run of the same problem with the same "
        "profiler build on the same GPU model (" +
        std::to_string(reused) +
        " task(s); from where: --format json or csv; to measure again: submit --reuse never)\n";
  }
  if (contended > 0) {
    out += "* contended: another process used the GPU while it ran (" + std::to_string(contended) +
           " task(s); who: --format json or csv)\n";
  }
  if (noisy > 0) {
    const auto threshold = std::find_if(ordered.begin(), ordered.end(),
                                        [](const TaskResult* t) { return t->noisy(); });
    out += "~ noisy: its runs' coefficient of variation is above " +
           FormatNumber((*threshold)->repeats->noise_threshold * 100, 3) + "% (" +
           std::to_string(noisy) + " config(s); each run: --runs, or --format json)\n";
  }
  return out;
}

}  // namespace ckprof

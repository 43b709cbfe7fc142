// The job report: figures (BuildReport), then HTML with inline SVG or Markdown from them.
#include "client/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>

#include "common/ck_config.h"
#include "common/terminal_text.h"

namespace ckprof {

namespace {

// ---------------------------------------------------------------------------------------------
// Formatting

std::string Printf(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// A time or rate with about three significant digits, never in exponent form above 0.001.
std::string Num(double v) {
  if (!std::isfinite(v)) return "-";
  const double a = std::fabs(v);
  if (a >= 1000) return Printf("%.0f", v);
  if (a >= 100) return Printf("%.1f", v);
  if (a >= 10) return Printf("%.2f", v);
  if (a >= 1) return Printf("%.3f", v);
  if (a >= 0.001) return Printf("%.4f", v);
  if (a == 0) return "0";
  return Printf("%.2e", v);
}
std::string Num(const std::optional<double>& v) { return v ? Num(*v) : "-"; }
std::string Speedup(const std::optional<double>& s) { return s ? Printf("%.2f", *s) + "×" : "-"; }
std::string Percent(double part, double whole) {
  return whole > 0 ? Printf("%.1f", 100.0 * part / whole) + "%" : "-";
}
// SVG coordinates: one decimal.
std::string Co(double v) { return Printf("%.1f", v); }

std::string Clock(double unix_time) {
  if (unix_time <= 0) return "-";
  const time_t t = static_cast<time_t>(unix_time);
  struct tm tm;
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string Duration(double s) {
  if (s < 0 || !std::isfinite(s)) return "-";
  if (s < 60) return Printf("%.1f", s) + " s";
  const int64_t t = static_cast<int64_t>(std::llround(s));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(t / 3600),
                static_cast<long long>(t / 60 % 60), static_cast<long long>(t % 60));
  return buf;
}

}  // namespace

int TimelineDecimals(double step_s) {
  int decimals = 0;
  for (double unit = 1; decimals < 3 && step_s < unit * (1 - 1e-9); unit /= 10) ++decimals;
  return decimals;
}

std::string TimelineTime(double s, int decimals) {
  if (s < 0 || !std::isfinite(s)) return "-";
  decimals = std::clamp(decimals, 0, 3);
  int64_t scale = 1;
  for (int i = 0; i < decimals; ++i) scale *= 10;
  const int64_t units = std::llround(s * static_cast<double>(scale));  // rounded once, carried
  const int64_t whole = units / scale;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(whole / 3600),
                static_cast<long long>(whole / 60 % 60), static_cast<long long>(whole % 60));
  std::string out = buf;
  if (decimals > 0) {
    std::snprintf(buf, sizeof buf, ".%0*lld", decimals, static_cast<long long>(units % scale));
    out += buf;
  }
  return out;
}

namespace {

// A Markdown table cell: no line breaks, pipes escaped, markup characters as entities, control
// characters escaped (EscapeControl).
std::string MdCell(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '|':
        out += "\\|";
        break;
      case '\n':
      case '\r':
        out += ' ';
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '`':
        out += "\\`";
        break;
      case '*':
        out += "\\*";
        break;
      case '_':
        out += "\\_";
        break;
      default:
        out += c;
    }
  }
  return EscapeControl(out);  // a tab or a control character: visible
}

std::string Problem(const std::string& description) {
  auto colon = description.find(": ");
  return colon == std::string::npos ? description : description.substr(colon + 2);
}

// ---------------------------------------------------------------------------------------------
// Figures

// What a task's config says: its problem key, data type, FLOPs and bytes (0 when unknown).
struct TaskFacts {
  std::string op;
  std::string key;        // ProblemKey, "" without a config
  std::string data_type;  // "" without a config
  double flops = 0;
};

TaskFacts Facts(const TaskResult& t) {
  TaskFacts f;
  f.op = ShortOp(t.operation);
  if (t.config.is_object()) {
    if (auto c = ConfigFromJson(t.config, 0)) {
      f.key = ProblemKey(*c);
      // The key's second word is the data type's name ("fwd fp16 NHWGC_...").
      const size_t a = f.key.find(' ');
      const size_t b = a == std::string::npos ? a : f.key.find(' ', a + 1);
      if (b != std::string::npos) f.data_type = f.key.substr(a + 1, b - a - 1);
      f.flops = c->Flops();
    }
  }
  return f;
}

Coverage TaskCoverage(const TaskResult& t) {
  if (t.state == TaskState::kSucceeded) {
    if (!t.contended.empty()) return Coverage::kContended;
    return t.avg_ms > 0 && std::isfinite(t.avg_ms) ? Coverage::kCovered : Coverage::kFailed;
  }
  if (t.state == TaskState::kUnsupported) return Coverage::kUnsupported;
  return IsFinal(t.state) ? Coverage::kFailed : Coverage::kNotRun;  // every other end: no kernel
}

// The worse of two coverages for a problem of several configs.
Coverage Worse(Coverage a, Coverage b) {
  auto weight = [](Coverage c) {
    switch (c) {
      case Coverage::kCovered:
        return 0;
      case Coverage::kNotRun:
        return 1;
      case Coverage::kContended:
        return 2;
      case Coverage::kUnsupported:
        return 3;
      case Coverage::kFailed:
        return 4;
    }
    return 0;
  };
  return weight(a) >= weight(b) ? a : b;
}

bool Usable(const TaskResult& t) { return TaskCoverage(t) == Coverage::kCovered; }

// Pairs each task of `a` with one of `b` (or none): by problem key, then by operation and
// description, then by operation and position, each key used only where it is unique on both
// sides (as `ckprof compare` matches).
std::vector<const TaskResult*> MatchTasks(const std::vector<TaskResult>& a,
                                          const std::vector<TaskFacts>& fa,
                                          const std::vector<TaskResult>& b,
                                          const std::vector<TaskFacts>& fb) {
  std::vector<const TaskResult*> match(a.size(), nullptr);
  std::vector<bool> used(b.size(), false);
  auto pass = [&](auto key) {
    std::map<std::string, std::vector<size_t>> ka, kb;
    for (size_t i = 0; i < a.size(); ++i) {
      if (match[i]) continue;
      if (std::string k = key(a[i], fa[i]); !k.empty()) ka[k].push_back(i);
    }
    for (size_t j = 0; j < b.size(); ++j) {
      if (used[j]) continue;
      if (std::string k = key(b[j], fb[j]); !k.empty()) kb[k].push_back(j);
    }
    for (const auto& [k, ia] : ka) {
      auto it = kb.find(k);
      if (ia.size() != 1 || it == kb.end() || it->second.size() != 1) continue;
      match[ia[0]] = &b[it->second[0]];
      used[it->second[0]] = true;
    }
  };
  pass([](const TaskResult&, const TaskFacts& f) { return f.key; });
  pass([](const TaskResult& t, const TaskFacts& f) {
    return t.description.empty() ? std::string() : f.op + "\n" + t.description;
  });
  pass([](const TaskResult& t, const TaskFacts& f) {
    return f.op + "\n" + std::to_string(t.position);
  });
  return match;
}

}  // namespace

std::string_view CoverageName(Coverage c) {
  switch (c) {
    case Coverage::kCovered:
      return "covered";
    case Coverage::kUnsupported:
      return "unsupported";
    case Coverage::kFailed:
      return "failed";
    case Coverage::kContended:
      return "contended";
    case Coverage::kNotRun:
      return "not run";
  }
  return "?";
}

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  // Control characters first: the page may be read on a terminal (report -o -).
  for (char c : EscapeControl(text, LineBreaks::kKeep)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

RooflinePeaks KnownPeaks(const std::string& gpu_name, const std::string& data_type) {
  struct Known {
    const char* match;  // a part of the model's name
    const char* label;
    // Dense (no sparsity) TFlops per data type; 0 = none known. fp32 is the higher of the
    // vector and matrix peaks (a roof bounds what a kernel can reach: CK's fp32 convolutions
    // use the matrix cores where there are some).
    double half_tf, fp32_tf, tf32_tf, gbps;
  };
  // From the vendors' data sheets.
  static const Known kKnown[] = {
      {"MI300X", "AMD Instinct MI300X", 1307.4, 163.4, 653.7, 5300},
      {"MI250X", "AMD Instinct MI250X", 383, 95.7, 0, 3277},
      {"H200", "NVIDIA H200", 989.4, 67, 494.7, 4800},
      {"H100", "NVIDIA H100 SXM", 989.4, 67, 494.7, 3350},
  };
  RooflinePeaks p;
  for (const Known& k : kKnown) {
    if (gpu_name.find(k.match) == std::string::npos) continue;
    const std::string type = data_type.empty() ? "fp16" : data_type;
    double tf = 0;
    if (type == "fp16" || type == "bf16") tf = k.half_tf;
    if (type == "fp32") tf = k.fp32_tf;
    if (type == "tf32") tf = k.tf32_tf;
    if (tf > 0) p.tflops = tf;
    p.gbps = k.gbps;
    p.source = std::string("the known dense peaks of the ") + k.label + " (" +
               (tf > 0 ? type : "no " + type + " compute peak known") +
               ", from the vendor's data sheet)";
    return p;
  }
  return p;
}

namespace {

std::vector<TaskFacts> FactsOf(const std::vector<TaskResult>& tasks) {
  std::vector<TaskFacts> facts;
  facts.reserve(tasks.size());
  for (const TaskResult& t : tasks) facts.push_back(Facts(t));
  return facts;
}

// The problems of `tasks`, each as its tasks' indexes: a task is one, but a backward trace
// record's configs (same rank, problem and trace figures; bwd_data and bwd_weight) form one.
std::vector<std::vector<size_t>> GroupProblems(const std::vector<TaskResult>& tasks,
                                               const std::vector<TaskFacts>& facts) {
  std::map<std::string, size_t> backward_record;
  std::vector<std::vector<size_t>> members;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const TaskResult& t = tasks[i];
    const std::string& op = facts[i].op;
    if (op != "fwd" && t.trace_gpu_us) {
      const std::string key = std::to_string(t.priority_rank) + "\n" + Problem(t.description) +
                              "\n" + Printf("%.6g", *t.trace_gpu_us) + "\n" +
                              std::to_string(t.trace_count.value_or(1));
      auto it = backward_record.find(key);
      if (it != backward_record.end()) {
        auto& m = members[it->second];
        const bool same_op =
            std::any_of(m.begin(), m.end(), [&](size_t j) { return facts[j].op == op; });
        if (!same_op) {
          m.push_back(i);
          continue;
        }
      }
      backward_record[key] = members.size();
    }
    members.push_back({i});
  }
  return members;
}

// The configs' coverage: how many succeeded, failed, ... (the problems' are counted apart).
void CountConfigs(const std::vector<TaskResult>& tasks, ReportCoverage* cov) {
  for (const TaskResult& t : tasks) {
    ++cov->configs;
    if (t.ok()) ++cov->succeeded;
    switch (TaskCoverage(t)) {
      case Coverage::kUnsupported:
        ++cov->unsupported;
        break;
      case Coverage::kFailed:
        ++cov->failed;
        break;
      case Coverage::kContended:
        ++cov->contended;
        break;
      case Coverage::kNotRun:
        ++cov->not_run;
        break;
      case Coverage::kCovered:
        break;
    }
    if (t.noisy()) ++cov->noisy;
    if (t.reused_from) ++cov->reused;
  }
}

// One problem from its tasks (`members`): CK's time per call where every part is covered, the
// baseline's where every part has a usable match (`matched`, by task index; `has_baseline`).
ReportProblem MakeProblem(const std::vector<size_t>& members, const std::vector<TaskResult>& tasks,
                          const std::vector<TaskFacts>& facts,
                          const std::vector<const TaskResult*>& matched, bool has_baseline) {
  ReportProblem p;
  std::vector<size_t> order = members;  // bwd_data before bwd_weight
  std::sort(order.begin(), order.end(),
            [&](size_t x, size_t y) { return facts[x].op < facts[y].op; });
  const TaskResult& first = tasks[order[0]];
  p.rank = first.priority_rank;
  p.group = facts[order[0]].op == "fwd" ? "fwd" : "bwd";
  p.problem = Problem(first.description);
  p.data_type = facts[order[0]].data_type;
  p.calls = std::max<int64_t>(first.trace_count.value_or(1), 1);
  p.trace_ms_per_call = first.trace_ms_per_call();
  double ck = 0, base = 0;
  bool base_ok = has_baseline;
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t i = order[k];
    const TaskResult& t = tasks[i];
    p.parts.push_back(&t);
    p.ops += (k ? "+" : "") + facts[i].op;
    p.coverage = k ? Worse(p.coverage, TaskCoverage(t)) : TaskCoverage(t);
    p.noisy = p.noisy || t.noisy();
    p.reused = p.reused || t.reused_from.has_value();
    if (t.ok() && !t.best_name.empty()) p.best += (p.best.empty() ? "" : " + ") + t.best_name;
    ck += t.avg_ms;
    if (has_baseline) {
      if (matched[i]) p.baseline_parts.push_back(matched[i]);
      if (!matched[i] || !Usable(*matched[i])) {
        base_ok = false;
      } else {
        base += matched[i]->avg_ms;
      }
    }
  }
  if (p.coverage == Coverage::kCovered) p.ck_ms_per_call = ck;
  if (base_ok) p.baseline_ms_per_call = base;
  p.reference_ms_per_call = has_baseline ? p.baseline_ms_per_call : p.trace_ms_per_call;
  return p;
}

// Counts a problem in the coverage and, where it has trace figures, in the trace's total.
void CountProblem(const ReportProblem& p, Report* r) {
  ReportCoverage& cov = r->coverage;
  if (r->has_baseline && !p.baseline_ms_per_call) ++cov.baseline_unmatched;
  ++cov.problems;
  switch (p.coverage) {
    case Coverage::kCovered:
      ++cov.problems_covered;
      break;
    case Coverage::kUnsupported:
      ++cov.problems_unsupported;
      break;
    case Coverage::kFailed:
      ++cov.problems_failed;
      break;
    case Coverage::kContended:
      ++cov.problems_contended;
      break;
    case Coverage::kNotRun:
      ++cov.problems_not_run;
      break;
  }
  if (p.trace_ms_per_call) {
    r->has_trace = true;
    r->trace_total_ms += p.trace_total_ms();
  }
}

// The problems most time first: the trace's, else the reference's; then by rank.
void SortProblems(std::vector<ReportProblem>* problems) {
  std::stable_sort(problems->begin(), problems->end(),
                   [](const ReportProblem& x, const ReportProblem& y) {
                     const double tx = x.trace_total_ms(), ty = y.trace_total_ms();
                     if (tx != ty) return tx > ty;
                     const double rx = x.reference_ms_per_call.value_or(0) * double(x.calls);
                     const double ry = y.reference_ms_per_call.value_or(0) * double(y.calls);
                     if (rx != ry) return rx > ry;
                     return x.rank < y.rank;
                   });
}

// The totals of the problems with a reference time: overall and per group (fwd, bwd).
void AddTotals(Report* r) {
  std::map<std::string, ReportTotals> groups;
  for (const ReportProblem& p : r->problems) {
    if (!p.reference_ms_per_call) continue;
    const double calls = static_cast<double>(p.calls);
    for (ReportTotals* t : {&r->overall, &groups[p.group]}) {
      ++t->problems;
      if (p.ck_ms_per_call) ++t->covered;
      t->reference_ms += *p.reference_ms_per_call * calls;
      t->with_ck_ms += *p.with_ck_ms_per_call() * calls;
      t->best_of_both_ms +=
          std::min(*p.reference_ms_per_call, p.ck_ms_per_call.value_or(HUGE_VAL)) * calls;
    }
  }
  for (const char* g : {"fwd", "bwd"}) {
    if (auto it = groups.find(g); it != groups.end()) r->by_group.emplace_back(g, it->second);
  }
}

// Where the peaks come from, as the report says it: the options, else `known` (the GPU
// `model`'s), else why there are none.
std::string PeaksSource(const ReportOptions& options, const RooflinePeaks& known,
                        const std::string& model) {
  if (options.peak_tflops && options.peak_gbps) return "given (--peak-tflops, --peak-gbps)";
  if (options.peak_tflops || options.peak_gbps) {
    return std::string("given (") + (options.peak_tflops ? "--peak-tflops" : "--peak-gbps") + ")" +
           (known.source.empty() ? "" : "; the other: " + known.source);
  }
  if (!known.source.empty()) return known.source;
  return model.empty()
             ? "no peaks: the GPU model is not known (give --peak-tflops and --peak-gbps)"
             : "no peaks known for the " + model + " (give --peak-tflops and --peak-gbps)";
}

// The roofline's peaks and compute roofs: the user's, else the GPU model's (the most common
// model among the tasks, the data type with the most trace time).
void PickPeaks(const std::vector<TaskResult>& tasks, const ReportOptions& options, Report* r) {
  std::map<std::string, int64_t> models;
  std::map<std::string, double> types;
  for (const TaskResult& t : tasks) {
    if (t.gpu_state && !t.gpu_state->name.empty()) ++models[t.gpu_state->name];
  }
  for (const ReportProblem& p : r->problems) {
    if (!p.data_type.empty()) types[p.data_type] += p.trace_total_ms() + 1e-9;
  }
  std::string model, dtype;
  int64_t best_n = 0;
  for (const auto& [name, n] : models) {
    if (n > best_n) model = name, best_n = n;
  }
  double best_w = -1;
  for (const auto& [name, w] : types) {
    if (w > best_w) dtype = name, best_w = w;
  }
  if (options.peak_tflops) {
    r->roofs.push_back({"", options.peak_tflops});
  } else {
    for (const auto& [name, w] : types) r->roofs.push_back({name, KnownPeaks(model, name).tflops});
    // No config says its type: the model's fp16 peak, as KnownPeaks takes "" for.
    if (types.empty()) {
      if (auto tf = KnownPeaks(model, "").tflops) r->roofs.push_back({"", tf});
    }
  }
  RooflinePeaks known = KnownPeaks(model, dtype);
  RooflinePeaks& peaks = r->peaks;
  peaks.tflops = options.peak_tflops ? options.peak_tflops : known.tflops;
  peaks.gbps = options.peak_gbps ? options.peak_gbps : known.gbps;
  peaks.source = PeaksSource(options, known, model);
  if (!options.peak_tflops && known.gbps && r->roofs.size() > 1) {
    std::string each;
    for (const ComputeRoof& roof : r->roofs) {
      each += (each.empty() ? "" : ", ") + roof.data_type + " " +
              (roof.tflops ? Printf("%g", *roof.tflops) + " TFlops" : "none known");
    }
    peaks.source += "; compute per data type: " + each;
  }
}

}  // namespace

Report BuildReport(const ResultsReply& job, const ResultsReply* baseline,
                   const ReportOptions& options) {
  Report r;
  r.has_baseline = baseline != nullptr;
  const std::vector<TaskResult>& tasks = job.tasks;
  const std::vector<TaskFacts> facts = FactsOf(tasks);
  std::vector<const TaskResult*> matched(tasks.size(), nullptr);
  if (baseline) matched = MatchTasks(tasks, facts, baseline->tasks, FactsOf(baseline->tasks));
  CountConfigs(tasks, &r.coverage);
  const std::vector<std::vector<size_t>> members = GroupProblems(tasks, facts);
  r.problems.reserve(members.size());
  for (const auto& m : members) {
    r.problems.push_back(MakeProblem(m, tasks, facts, matched, r.has_baseline));
    CountProblem(r.problems.back(), &r);
  }
  SortProblems(&r.problems);
  AddTotals(&r);
  PickPeaks(tasks, options, &r);
  return r;
}

namespace {

// ---------------------------------------------------------------------------------------------
// HTML

const char* kStyle = R"CSS(
:root{--ck:#2f6db5;--ref:#d08a2a;--best:#3a9a5b;--grid:#d9d9d9;--ink:#1b1b1b;--muted:#666}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--ink);background:#fff;margin:0 auto;max-width:1100px;padding:24px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ccc;
padding-bottom:4px}
.sub{color:var(--muted);margin:0 0 16px}
.verdict{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0}
.card{border:1px solid #ccc;border-radius:6px;padding:10px 14px;min-width:200px;flex:1}
.card .v{font-size:22px;font-weight:600}.card .l{color:var(--muted);font-size:12px}
.good{color:#1d7a3e}.bad{color:#b3261e}
table{border-collapse:collapse;width:100%;font-size:12.5px;margin:8px 0}
th,td{border-bottom:1px solid #e3e3e3;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3}.scroll th{position:sticky;top:0}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.k{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:10.5px;word-break:break-all;
min-width:240px;max-width:380px}td.p{min-width:200px}
.note{color:var(--muted);font-size:12px}
figure{margin:8px 0 16px}figcaption{color:var(--muted);font-size:12px}
svg{display:block;max-width:100%;height:auto;font-family:inherit}
svg text{font-size:11px;fill:#333}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px}
dl.kv{display:grid;grid-template-columns:max-content auto;gap:2px 16px;margin:8px 0}
dl.kv dt{color:var(--muted)}dl.kv dd{margin:0}
.scroll{max-height:640px;overflow:auto;border:1px solid #eee}
@media print{body{max-width:none;padding:0;font-size:11px}.scroll{max-height:none;overflow:visible;
border:0}th{position:static}figure,.card,tr{break-inside:avoid}h2{break-after:avoid}
a{color:inherit;text-decoration:none}}
)CSS";

struct StateColour {
  TaskState state;
  const char* colour;
};
const StateColour kStateColours[] = {
    {TaskState::kSucceeded, "#3a9a5b"},   {TaskState::kUnsupported, "#9e9e9e"},
    {TaskState::kFailed, "#c62828"},      {TaskState::kCrashed, "#7b1fa2"},
    {TaskState::kTimedOut, "#ef6c00"},    {TaskState::kCancelled, "#cfcfcf"},
    {TaskState::kInterrupted, "#8d6e63"}, {TaskState::kSpawnFailed, "#ad1457"},
    {TaskState::kRunning, "#29b6f6"},     {TaskState::kQueued, "#e0e0e0"},
};
const char* kContendedColour = "#f2c037";

const char* ColourOf(const TaskResult& t) {
  if (t.ok() && !t.contended.empty()) return kContendedColour;
  for (const auto& s : kStateColours) {
    if (s.state == t.state) return s.colour;
  }
  return "#999";
}

const char* OpColour(const std::string& op) {
  if (op == "fwd") return "#2f6db5";
  if (op == "bwd_data") return "#d08a2a";
  return "#8e44ad";
}

class Html {
 public:
  Html& operator<<(std::string_view s) {
    out_.append(s);
    return *this;
  }
  // Escaped text.
  Html& Text(std::string_view s) {
    out_ += HtmlEscape(s);
    return *this;
  }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

// A log10 axis that covers [lo, hi] in whole decades.
struct LogAxis {
  double lo_exp = 0, hi_exp = 1;
  double px0 = 0, px1 = 1;  // pixel positions of lo and hi
  static LogAxis Cover(double lo, double hi, double px0, double px1) {
    LogAxis a;
    a.lo_exp = std::floor(std::log10(lo));
    a.hi_exp = std::ceil(std::log10(hi));
    if (a.hi_exp <= a.lo_exp) a.hi_exp = a.lo_exp + 1;
    a.px0 = px0;
    a.px1 = px1;
    return a;
  }
  double At(double v) const {
    const double e = std::log10(v);
    return px0 + (e - lo_exp) / (hi_exp - lo_exp) * (px1 - px0);
  }
};

std::string DecadeLabel(double e) {
  const double v = std::pow(10.0, e);
  if (e >= 0 && e <= 5) return Printf("%.0f", v);
  if (e < 0 && e >= -3) return Printf("%g", v);
  return "1e" + Printf("%.0f", e);
}

void VerdictChart(Html& h, const Report& r, const char* reference) {
  struct Bar {
    std::string label;
    double reference, with_ck, best;
  };
  std::vector<Bar> bars{
      {"all", r.overall.reference_ms, r.overall.with_ck_ms, r.overall.best_of_both_ms}};
  for (const auto& [g, t] : r.by_group) {
    bars.push_back(
        {g == "fwd" ? "forward" : "backward", t.reference_ms, t.with_ck_ms, t.best_of_both_ms});
  }
  double max = 0;
  for (const Bar& b : bars) max = std::max({max, b.reference, b.with_ck, b.best});
  if (max <= 0) max = 1;
  const double left = 90, width = 760, row = 18, gap = 14;
  const double height = 20 + static_cast<double>(bars.size()) * (3 * row + gap);
  h << "<figure><svg data-chart=\"verdict\" id=\"chart-verdict\" viewBox=\"0 0 "
    << Co(left + width + 150) << " " << Co(height) << "\" width=\"" << Co(left + width + 150)
    << "\" role=\"img\" aria-label=\"convolution time: reference against CK\">";
  double y = 10;
  for (const Bar& b : bars) {
    h << "<text x=\"0\" y=\"" << Co(y + row * 1.5 + 4) << "\" font-weight=\"600\">" << b.label
      << "</text>";
    const std::pair<double, const char*> series[] = {
        {b.reference, "var(--ref)"}, {b.with_ck, "var(--ck)"}, {b.best, "var(--best)"}};
    const char* names[] = {reference, "with CK", "faster of both"};
    for (int s = 0; s < 3; ++s) {
      const double w = std::max(1.0, series[s].first / max * width);
      h << "<rect x=\"" << Co(left) << "\" y=\"" << Co(y) << "\" width=\"" << Co(w)
        << "\" height=\"" << Co(row - 3) << "\" fill=\"" << series[s].second << "\"/>";
      h << "<text x=\"" << Co(left + w + 6) << "\" y=\"" << Co(y + row - 6) << "\">" << names[s]
        << " " << Num(series[s].first) << " ms</text>";
      y += row;
    }
    y += gap;
  }
  h << "</svg><figcaption>Total convolution time (ms, time per call × calls) of the problems "
       "with a "
    << reference << " time.</figcaption></figure>";
}

void ProblemsChart(Html& h, const Report& r, const ReportOptions& o, const char* reference) {
  std::vector<const ReportProblem*> shown;
  for (const ReportProblem& p : r.problems) {
    if (shown.size() >= o.max_chart_problems) break;
    if (p.reference_ms_per_call || p.ck_ms_per_call) shown.push_back(&p);
  }
  size_t with_time = 0;
  for (const ReportProblem& p : r.problems) {
    if (p.reference_ms_per_call || p.ck_ms_per_call) ++with_time;
  }
  double max = 0;
  for (const ReportProblem* p : shown) {
    const double c = static_cast<double>(p->calls);
    max = std::max(
        {max, p->reference_ms_per_call.value_or(0) * c, p->ck_ms_per_call.value_or(0) * c});
  }
  if (max <= 0) max = 1;
  const double label_w = 330, width = 470, row = 11, gap = 8;
  const double height =
      16 + static_cast<double>(std::max<size_t>(shown.size(), 1)) * (2 * row + gap);
  h << "<figure><div class=\"legend\"><span><i style=\"background:var(--ref)\"></i>" << reference
    << "</span><span><i style=\"background:var(--ck)\"></i>CK best</span></div>"
    << "<svg data-chart=\"problems\" id=\"chart-problems\" viewBox=\"0 0 "
    << Co(label_w + width + 200) << " " << Co(height) << "\" width=\"" << Co(label_w + width + 200)
    << "\" role=\"img\" aria-label=\"time per problem\">";
  double y = 8;
  size_t index = 0;
  for (const ReportProblem* p : shown) {
    ++index;
    std::string label = std::to_string(index) + ". " + p->ops + " " + p->problem;
    if (label.size() > 58) label = label.substr(0, 56) + "…";
    h << "<text x=\"0\" y=\"" << Co(y + row + 3) << "\">";
    h.Text(label);
    h << "</text>";
    const double c = static_cast<double>(p->calls);
    const std::optional<double> vals[] = {
        p->reference_ms_per_call ? std::optional<double>(*p->reference_ms_per_call * c)
                                 : std::nullopt,
        p->ck_ms_per_call ? std::optional<double>(*p->ck_ms_per_call * c) : std::nullopt};
    const char* fills[] = {"var(--ref)", "var(--ck)"};
    for (int s = 0; s < 2; ++s) {
      if (vals[s]) {
        const double w = std::max(1.0, *vals[s] / max * width);
        h << "<rect x=\"" << Co(label_w) << "\" y=\"" << Co(y) << "\" width=\"" << Co(w)
          << "\" height=\"" << Co(row - 1) << "\" fill=\"" << fills[s] << "\"><title>"
          << Num(*vals[s]) << " ms</title></rect>";
        h << "<text x=\"" << Co(label_w + w + 4) << "\" y=\"" << Co(y + row - 2) << "\">"
          << Num(*vals[s]) << " ms"
          << (s == 1 && p->speedup() ? "  " + Speedup(p->speedup()) : std::string()) << "</text>";
      } else {
        h << "<text x=\"" << Co(label_w + 2) << "\" y=\"" << Co(y + row - 2) << "\" fill=\"#999\">"
          << (s == 1 ? std::string(CoverageName(p->coverage)) : std::string("no time"))
          << "</text>";
      }
      y += row;
    }
    y += gap;
  }
  if (shown.empty()) {
    h << "<text x=\"0\" y=\"20\">no problem has a time</text>";
  }
  h << "</svg><figcaption>Per problem, ranked by trace GPU time: total ms (per call × calls) of "
    << reference << " and of CK's best kernel; the speedup is " << reference << " / CK.";
  if (with_time > shown.size()) {
    h << " The first " << std::to_string(shown.size()) << " of " << std::to_string(with_time)
      << " problems are shown; the table lists all.";
  }
  h << "</figcaption></figure>";
}

void RooflineChart(Html& h, const Report& r, const ReportOptions& o) {
  // One colour per compute roof; a point's outline is its data type's roof's colour.
  static const char* const kRoofColours[] = {"#c62828", "#6a1b9a", "#00838f", "#ef6c00", "#5d4037"};
  auto roof_colour = [](size_t i) { return kRoofColours[i % std::size(kRoofColours)]; };
  auto roof_of = [&](const std::string& type) -> const ComputeRoof* {
    for (const ComputeRoof& roof : r.roofs) {
      if (roof.data_type.empty() || roof.data_type == type) return &roof;
    }
    return nullptr;
  };
  struct Point {
    double ai, tf;
    const char* colour;
    const TaskResult* t;
    const std::string* data_type;
    const ComputeRoof* roof;  // nullptr: none
  };
  std::vector<Point> points;
  size_t candidates = 0;
  for (const ReportProblem& p : r.problems) {
    for (const TaskResult* t : p.parts) {
      if (!t->ok() || t->tflops <= 0 || t->gbps <= 0) continue;
      ++candidates;
      if (points.size() >= o.max_chart_points) continue;
      points.push_back({t->tflops * 1e12 / (t->gbps * 1e9), t->tflops,
                        OpColour(ShortOp(t->operation)), t, &p.data_type, roof_of(p.data_type)});
    }
  }
  double ai_lo = 1, ai_hi = 10, tf_lo = 1, tf_hi = 10;
  if (!points.empty()) {
    ai_lo = ai_hi = points[0].ai;
    tf_lo = tf_hi = points[0].tf;
  }
  for (const Point& p : points) {
    ai_lo = std::min(ai_lo, p.ai), ai_hi = std::max(ai_hi, p.ai);
    tf_lo = std::min(tf_lo, p.tf), tf_hi = std::max(tf_hi, p.tf);
  }
  const auto& pk = r.peaks;
  std::optional<double> top;  // the highest compute roof
  for (const ComputeRoof& roof : r.roofs) {
    if (roof.tflops) top = std::max(top.value_or(0), *roof.tflops);
  }
  if (top) tf_hi = std::max(tf_hi, *top);
  if (top && pk.gbps) ai_hi = std::max(ai_hi, *top * 1000 / *pk.gbps * 2);
  const double W = 860, H = 420, L = 70, R = 20, T = 14, B = 46;
  LogAxis x = LogAxis::Cover(ai_lo, ai_hi, L, W - R);
  LogAxis y = LogAxis::Cover(tf_lo, tf_hi, H - B, T);
  h << "<figure><div class=\"legend\"><span><i style=\"background:" << OpColour("fwd")
    << "\"></i>fwd</span><span><i style=\"background:" << OpColour("bwd_data")
    << "\"></i>bwd_data</span><span><i style=\"background:" << OpColour("bwd_weight")
    << "\"></i>bwd_weight</span>";
  for (size_t i = 0; i < r.roofs.size(); ++i) {
    const ComputeRoof& roof = r.roofs[i];
    h << "<span><i style=\"background:" << roof_colour(i) << "\"></i>";
    h.Text(roof.data_type.empty() ? std::string("every data type") : roof.data_type);
    h << (roof.tflops ? " roof " + Num(*roof.tflops) + " TFlops" : ": no compute peak known")
      << "</span>";
  }
  h << "</div>"
    << "<svg data-chart=\"roofline\" id=\"chart-roofline\" viewBox=\"0 0 " << Co(W) << " " << Co(H)
    << "\" width=\"" << Co(W) << "\" role=\"img\" aria-label=\"roofline\">";
  h << "<rect x=\"" << Co(L) << "\" y=\"" << Co(T) << "\" width=\"" << Co(W - L - R)
    << "\" height=\"" << Co(H - T - B) << "\" fill=\"none\" stroke=\"#bbb\"/>";
  for (double e = x.lo_exp; e <= x.hi_exp; e += 1) {
    const double px = x.At(std::pow(10.0, e));
    h << "<line x1=\"" << Co(px) << "\" x2=\"" << Co(px) << "\" y1=\"" << Co(T) << "\" y2=\""
      << Co(H - B) << "\" stroke=\"var(--grid)\"/><text x=\"" << Co(px) << "\" y=\""
      << Co(H - B + 16) << "\" text-anchor=\"middle\">" << DecadeLabel(e) << "</text>";
  }
  for (double e = y.lo_exp; e <= y.hi_exp; e += 1) {
    const double py = y.At(std::pow(10.0, e));
    h << "<line x1=\"" << Co(L) << "\" x2=\"" << Co(W - R) << "\" y1=\"" << Co(py) << "\" y2=\""
      << Co(py) << "\" stroke=\"var(--grid)\"/><text x=\"" << Co(L - 6) << "\" y=\"" << Co(py + 4)
      << "\" text-anchor=\"end\">" << DecadeLabel(e) << "</text>";
  }
  h << "<text x=\"" << Co((L + W - R) / 2) << "\" y=\"" << Co(H - 8)
    << "\" text-anchor=\"middle\">arithmetic intensity (FLOP/byte)</text>"
    << "<text transform=\"translate(16 " << Co((T + H - B) / 2)
    << ") rotate(-90)\" text-anchor=\"middle\">achieved TFlops</text>";
  // The roof: bandwidth × intensity up to the compute peak.
  const double x_lo = std::pow(10.0, x.lo_exp), x_hi = std::pow(10.0, x.hi_exp);
  const double y_lo = std::pow(10.0, y.lo_exp);
  if (pk.gbps) {
    const double ridge = top ? *top * 1000 / *pk.gbps : x_hi;
    const double start = std::max(x_lo, y_lo * 1000 / *pk.gbps);
    const double end = std::min(ridge, x_hi);
    if (end > start) {
      h << "<line x1=\"" << Co(x.At(start)) << "\" y1=\"" << Co(y.At(start * *pk.gbps / 1000))
        << "\" x2=\"" << Co(x.At(end)) << "\" y2=\"" << Co(y.At(end * *pk.gbps / 1000))
        << "\" stroke=\"#c62828\" stroke-width=\"2\"/>";
    }
    h << "<text x=\"" << Co(L + 8) << "\" y=\"" << Co(T + 30) << "\" fill=\"#c62828\">memory "
      << Num(*pk.gbps) << " GB/s</text>";
  }
  // Each data type's compute roof, from its ridge to the right edge, labelled with its type.
  for (size_t i = 0; i < r.roofs.size(); ++i) {
    const ComputeRoof& roof = r.roofs[i];
    if (!roof.tflops) continue;
    const double start = pk.gbps ? std::max(x_lo, *roof.tflops * 1000 / *pk.gbps) : x_lo;
    const double py = y.At(*roof.tflops);
    h << "<line data-roof=\"";
    h.Text(roof.data_type.empty() ? std::string("all") : roof.data_type);
    h << "\" x1=\"" << Co(x.At(start)) << "\" y1=\"" << Co(py) << "\" x2=\"" << Co(W - R)
      << "\" y2=\"" << Co(py) << "\" stroke=\"" << roof_colour(i) << "\" stroke-width=\"2\"/>"
      << "<text x=\"" << Co(W - R - 4) << "\" y=\"" << Co(py + 14)
      << "\" text-anchor=\"end\" fill=\"" << roof_colour(i) << "\">";
    h.Text(roof.data_type.empty() ? std::string("compute") : roof.data_type + " compute");
    h << " " << Num(*roof.tflops) << " TFlops</text>";
  }
  for (const Point& p : points) {
    const size_t roof_index = p.roof ? static_cast<size_t>(p.roof - r.roofs.data()) : 0;
    h << "<circle cx=\"" << Co(x.At(p.ai)) << "\" cy=\"" << Co(y.At(p.tf)) << "\" r=\"3.5\" fill=\""
      << p.colour << "\" fill-opacity=\"0.75\"";
    if (p.roof && p.roof->tflops) h << " stroke=\"" << roof_colour(roof_index) << "\"";
    h << "><title>";
    h.Text(p.t->description);
    h << ": " << Num(p.t->tflops) << " TFlops, " << Num(p.t->gbps) << " GB/s";
    if (!p.data_type->empty()) {
      h << ", ";
      h.Text(*p.data_type);
    }
    if (p.roof && p.roof->tflops) {
      h << ", " << Percent(p.t->tflops, *p.roof->tflops) << " of ";
      h.Text(p.roof->data_type.empty() ? std::string("the") : "the " + p.roof->data_type);
      h << " roof";
    }
    h << "</title></circle>";
  }
  if (points.empty()) {
    h << "<text x=\"" << Co(L + 20) << "\" y=\"" << Co(T + 60)
      << "\">no succeeded config reported TFlops and GB/s</text>";
  }
  h << "</svg><figcaption>Each succeeded config's best kernel: achieved TFlops against "
       "arithmetic intensity (TFlops / GB/s). Peaks: ";
  h.Text(pk.source);
  h << ".";
  if (candidates > points.size()) {
    h << " " << std::to_string(points.size()) << " of " << std::to_string(candidates)
      << " configs are drawn (those with the most trace time).";
  }
  h << "</figcaption></figure>";
}

void TimelineChart(Html& h, const ResultsReply& job, const ReportOptions& o) {
  struct Bar {
    int gpu;
    double start, end;
    const TaskResult* t;
  };
  std::vector<Bar> bars;
  if (o.approximate_timeline) {
    std::map<int, double> clock;
    std::vector<const TaskResult*> ordered;
    for (const TaskResult& t : job.tasks) {
      if (t.gpu >= 0 && t.finished()) ordered.push_back(&t);
    }
    std::stable_sort(ordered.begin(), ordered.end(), [](const TaskResult* a, const TaskResult* b) {
      return a->task_id != b->task_id ? a->task_id < b->task_id : a->position < b->position;
    });
    for (const TaskResult* t : ordered) {
      double& c = clock[t->gpu];
      const double d = std::max(t->elapsed_s, 0.0);
      bars.push_back({t->gpu, c, c + d, t});
      c += d;
    }
  } else {
    for (const TaskResult& t : job.tasks) {
      if (t.gpu < 0 || t.started_at <= 0) continue;
      const double end = t.ended_at > 0 ? t.ended_at : std::max(t.started_at, job.job.finished_at);
      bars.push_back({t.gpu, t.started_at, std::max(end, t.started_at), &t});
    }
  }
  const size_t all = bars.size();
  if (bars.size() > o.max_timeline_bars) {  // keep the longest
    std::nth_element(bars.begin(), bars.begin() + static_cast<ptrdiff_t>(o.max_timeline_bars),
                     bars.end(),
                     [](const Bar& a, const Bar& b) { return a.end - a.start > b.end - b.start; });
    bars.resize(o.max_timeline_bars);
  }
  // A row per GPU, keyed by its node too where a cluster ran the tasks (GPU 0 of two nodes is
  // two GPUs).
  using GpuKey = std::pair<std::string, int>;
  auto key_of = [](const Bar& b) {
    return GpuKey{b.t->placement ? b.t->placement->node : "", b.gpu};
  };
  std::set<GpuKey> gpus;
  double t0 = HUGE_VAL, t1 = -HUGE_VAL;
  size_t longest_node = 0;
  for (const Bar& b : bars) {
    gpus.insert(key_of(b));
    longest_node = std::max(longest_node, key_of(b).first.size());
    t0 = std::min(t0, b.start);
    t1 = std::max(t1, b.end);
  }
  if (bars.empty()) t0 = 0, t1 = 1;
  if (t1 <= t0) t1 = t0 + 1;
  std::map<GpuKey, int> row_of;
  for (const GpuKey& g : gpus) row_of[g] = static_cast<int>(row_of.size());
  const double W = 860, R = 20, T = 10, row = 26, B = 40;
  const double L = 60 + 7 * static_cast<double>(std::min<size_t>(longest_node + 1, 24));
  const double H = T + std::max<double>(1, static_cast<double>(gpus.size())) * row + B;
  auto X = [&](double t) { return L + (t - t0) / (t1 - t0) * (W - L - R); };
  std::set<std::string> used;
  for (const Bar& b : bars) used.insert(ColourOf(*b.t));
  h << "<figure><div class=\"legend\">";
  for (const auto& s : kStateColours) {
    if (used.count(s.colour)) {
      h << "<span><i style=\"background:" << s.colour << "\"></i>" << EnumName(s.state)
        << "</span>";
    }
  }
  if (used.count(kContendedColour)) {
    h << "<span><i style=\"background:" << kContendedColour << "\"></i>contended</span>";
  }
  h << "</div><svg data-chart=\"timeline\" id=\"chart-timeline\" viewBox=\"0 0 " << Co(W) << " "
    << Co(H) << "\" width=\"" << Co(W) << "\" role=\"img\" aria-label=\"timeline\">";
  // Time ticks: about 8, at a round step.
  const double span = t1 - t0;
  const double raw = span / 8;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  if (raw >= 1) {  // whole seconds: a step the clock reads well (15 s, 5 min, 1 h, ...)
    step = std::ceil(raw / 86400) * 86400;
    for (double m : {1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
                     43200, 86400}) {
      if (m >= raw) {
        step = m;
        break;
      }
    }
  }
  // Every time on the chart, ticks and tooltips alike, in one format: H:MM:SS since the first
  // task started, with the fraction of a second the tick step needs.
  const int decimals = TimelineDecimals(step);
  for (double s = 0; s <= span + 1e-9; s += step) {
    const double px = X(t0 + s);
    h << "<line x1=\"" << Co(px) << "\" x2=\"" << Co(px) << "\" y1=\"" << Co(T) << "\" y2=\""
      << Co(H - B) << "\" stroke=\"var(--grid)\"/><text x=\"" << Co(px) << "\" y=\""
      << Co(H - B + 14) << "\" text-anchor=\"middle\">" << TimelineTime(s, decimals) << "</text>";
  }
  h << "<text x=\"" << Co((L + W - R) / 2) << "\" y=\"" << Co(H - 6)
    << "\" text-anchor=\"middle\">time since the first task started (H:MM:SS)</text>";
  for (const auto& [g, i] : row_of) {
    std::string node = g.first.size() > 23 ? g.first.substr(0, 22) + "…" : g.first;
    h << "<text x=\"0\" y=\"" << Co(T + i * row + row / 2 + 4) << "\">"
      << (node.empty() ? "" : HtmlEscape(node) + " ") << "GPU " << std::to_string(g.second)
      << "</text>";
  }
  for (const Bar& b : bars) {
    const double x0 = X(b.start);
    const double w = std::max(1.0, X(b.end) - x0);
    h << "<rect x=\"" << Co(x0) << "\" y=\"" << Co(T + row_of[key_of(b)] * row + 3) << "\" width=\""
      << Co(w) << "\" height=\"" << Co(row - 6) << "\" fill=\"" << ColourOf(*b.t)
      << "\" stroke=\"#fff\" stroke-width=\"0.5\"><title>#" << std::to_string(b.t->position) << " "
      << ShortOp(b.t->operation) << " " << EnumName(b.t->state) << " "
      << TimelineTime(b.start - t0, decimals) << "–" << TimelineTime(b.end - t0, decimals) << " ("
      << TimelineTime(b.end - b.start, decimals) << ")</title></rect>";
  }
  if (bars.empty()) {
    h << "<text x=\"" << Co(L + 10) << "\" y=\"" << Co(T + 16) << "\">no task has run</text>";
  }
  h << "</svg><figcaption>One row per GPU (per node and GPU where a cluster ran them), one bar "
       "per task, coloured by how it ended.";
  if (o.approximate_timeline) {
    h << " The results file has no start times: each GPU's tasks are laid end to end by their "
         "elapsed time.";
  }
  if (all > bars.size()) {
    h << " The " << std::to_string(bars.size()) << " longest of " << std::to_string(all)
      << " tasks are drawn.";
  }
  h << "</figcaption></figure>";
}

// What the GPU table's runs are.
constexpr const char* kRunsNote =
    "Runs: each run on the GPU it ran on (a config of a repeated job, submit --repeat N, counts "
    "once per run).";
constexpr const char* kUnrecordedRuns =
    "runs of repeated configs that did not succeed: the results keep the GPU of succeeded runs "
    "only";

// Readings of a GPU over the job's tasks, as "min–max unit".
struct Range {
  double lo = HUGE_VAL, hi = -HUGE_VAL;
  void Add(const std::optional<double>& v) {
    if (v) lo = std::min(lo, *v), hi = std::max(hi, *v);
  }
  std::string Text(const char* unit) const {
    if (lo > hi) return "-";
    return (lo == hi ? Num(lo) : Num(lo) + "–" + Num(hi)) + " " + unit;
  }
};
struct GpuRow {
  std::string name, uuid, arch, driver;
  int64_t runs = 0;
  Range sclk, mclk, temp, power;
};

// The GPU rows, by index, and the runs of a repeated job whose GPU the results do not record
// (a merged result keeps only its succeeded runs' GPUs): together they add up to the job's
// runs that ended (and, of a job not repeated, its tasks running now).
struct GpuRuns {
  std::map<int, GpuRow> rows;
  int64_t unrecorded = 0;
};

GpuRuns GpuRows(const ResultsReply& job) {
  GpuRuns out;
  std::map<int, GpuRow>& rows = out.rows;
  for (const TaskResult& t : job.tasks) {
    if (t.repeats) {
      // Each run on the GPU it ran on; the merged result's GPU is only its median run's.
      const RepeatStats& rep = *t.repeats;
      for (int g : rep.gpus) {
        if (g >= 0) ++rows[g].runs;
      }
      int64_t unrecorded =
          std::max<int64_t>(0, rep.finished - static_cast<int64_t>(rep.gpus.size()));
      // No run succeeded: the result is its first run's, on the GPU it says.
      if (rep.gpus.empty() && t.gpu >= 0 && t.finished() && unrecorded > 0) {
        ++rows[t.gpu].runs;
        --unrecorded;
      }
      out.unrecorded += unrecorded;
    } else if (t.gpu >= 0) {
      ++rows[t.gpu].runs;
    }
    if (t.gpu < 0) continue;
    GpuRow& g = rows[t.gpu];
    if (!t.gpu_state) continue;
    const GpuState& s = *t.gpu_state;
    if (g.name.empty()) g.name = s.name, g.uuid = s.uuid, g.arch = s.arch, g.driver = s.driver;
    for (const auto* reading : {&s.before, &s.after}) {
      if (!*reading) continue;
      g.sclk.Add((*reading)->sclk_mhz);
      g.mclk.Add((*reading)->mclk_mhz);
      g.temp.Add((*reading)->temperature_c);
      g.power.Add((*reading)->power_w);
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> Settings(const ResultsReply& job) {
  const JobSummary& s = job.job;
  std::vector<std::pair<std::string, std::string>> kv;
  if (s.id > 0) kv.push_back({"job", std::to_string(s.id)});
  if (!s.name.empty()) kv.push_back({"name", s.name});
  if (!s.owner.empty()) kv.push_back({"owner", s.owner});
  kv.push_back({"state", std::string(EnumName(s.state))});
  std::string tasks;  // "12 succeeded, 0 failed, 1 unsupported, ...": every column
  for (TaskState c : FinalColumns()) {
    tasks +=
        (tasks.empty() ? "" : ", ") + std::to_string(s.counts.of(c)) + " " + std::string(Label(c));
  }
  if (s.reused) tasks += ", " + std::to_string(s.reused) + " reused";
  kv.push_back({"tasks", std::to_string(s.total) + " (" + tasks + ")"});
  if (!s.profiler.empty()) kv.push_back({"profiler", s.profiler});
  kv.push_back({"priority", std::to_string(s.priority)});
  kv.push_back({"task order", std::string(EnumName(s.order))});
  if (s.repeat > 1) kv.push_back({"repeat", std::to_string(s.repeat) + " runs per config"});
  std::string gpus;
  for (int g : s.allowed_gpus) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
  kv.push_back({"allowed GPUs", gpus.empty() ? "any" : gpus});
  kv.push_back({"max GPUs", s.max_gpus > 0 ? std::to_string(s.max_gpus) : "no limit"});
  kv.push_back({"timeout", s.timeout_s > 0 ? Duration(s.timeout_s) + " per task" : "none"});
  kv.push_back({"submitted", Clock(s.submitted_at)});
  kv.push_back({"started", Clock(s.started_at)});
  kv.push_back({"finished", Clock(s.finished_at)});
  if (s.started_at > 0 && s.finished_at >= s.started_at) {
    kv.push_back({"elapsed", Duration(s.finished_at - s.started_at)});
  }
  return kv;
}

std::vector<const TaskResult*> Failures(const ResultsReply& job) {
  std::vector<const TaskResult*> out;
  for (const TaskResult& t : job.tasks) {
    if (t.finished() && !t.ok()) out.push_back(&t);
  }
  std::stable_sort(out.begin(), out.end(), [](const TaskResult* a, const TaskResult* b) {
    return a->position < b->position;
  });
  return out;
}

std::string ErrorText(const TaskResult& t) {
  return t.error.empty() ? std::string(EnumName(t.state)) : t.error;
}

// The coverage in words, shared by both formats.
std::vector<std::string> CoverageLines(const Report& r) {
  const ReportCoverage& c = r.coverage;
  std::vector<std::string> out;
  const char* ref = r.has_baseline ? "the baseline's" : "the trace's";
  out.push_back(std::to_string(c.problems_covered) + " of " + std::to_string(c.problems) +
                " problems (" + std::to_string(c.succeeded) + " of " + std::to_string(c.configs) +
                " configs succeeded) have a CK time that the verdict uses.");
  if (c.problems_unsupported) {
    out.push_back(
        std::to_string(c.problems_unsupported) + " problem(s) (" + std::to_string(c.unsupported) +
        " config(s)) are unsupported: CK has no kernel for them; they keep " + ref + " time.");
  }
  if (c.problems_failed) {
    out.push_back(std::to_string(c.problems_failed) + " problem(s) (" + std::to_string(c.failed) +
                  " config(s)) failed (see Failures); they keep " + ref + " time.");
  }
  if (c.problems_contended) {
    out.push_back(std::to_string(c.problems_contended) + " problem(s) (" +
                  std::to_string(c.contended) +
                  " config(s)) were measured while another process used the GPU (contended): "
                  "their times are not trusted and not used; they keep " +
                  ref + " time.");
  }
  if (c.problems_not_run) {
    out.push_back(std::to_string(c.problems_not_run) +
                  " problem(s) have not run yet (the job has not ended); they keep " + ref +
                  " time.");
  }
  if (c.noisy) {
    out.push_back(std::to_string(c.noisy) +
                  " config(s) are noisy: their repeated runs spread more than the job's noise "
                  "threshold; their median is used.");
  }
  if (c.reused) {
    out.push_back(std::to_string(c.reused) +
                  " config(s) were not run but reused from a stored result of the same problem.");
  }
  if (r.has_baseline && c.baseline_unmatched) {
    out.push_back(std::to_string(c.baseline_unmatched) +
                  " problem(s) have no baseline time (not in the baseline job, or it did not "
                  "succeed there): they are left out of the verdict.");
  }
  if (!r.has_baseline && !r.has_trace) {
    out.push_back(
        "The input carried no trace GPU times, and no --baseline was given: there is "
        "nothing to compare CK's times with.");
  }
  return out;
}

std::string Headline(const Report& r, const char* reference) {
  const ReportTotals& t = r.overall;
  if (t.problems == 0) return "No problem has a " + std::string(reference) + " time to compare.";
  const double saved = t.reference_ms - t.with_ck_ms;
  return std::string("With CK's best kernel per problem, the convolutions would take ") +
         Num(t.with_ck_ms) + " ms instead of " + Num(t.reference_ms) + " ms (" + reference +
         "): " + Speedup(t.speedup()) + ", " + (saved >= 0 ? "saving " : "losing ") +
         Num(std::fabs(saved)) + " ms (" + Percent(std::fabs(saved), t.reference_ms) + ").";
}

}  // namespace

std::string RenderReportHtml(const ResultsReply& job, const ResultsReply* baseline,
                             const ReportOptions& o) {
  const Report r = BuildReport(job, baseline, o);
  const char* reference = baseline ? "baseline" : "PyTorch (trace)";
  Html h;
  h.str().reserve(4096 + r.problems.size() * 700 + job.tasks.size() * 300);
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
       "<title>ckprof report: ";
  h.Text(o.job_label);
  h << "</title><style>" << kStyle << "</style></head><body>\n";
  h << "<h1>ckprof report: ";
  h.Text(o.job_label);
  h << "</h1><p class=\"sub\">";
  h << std::to_string(r.coverage.configs) << " configs, " << std::to_string(r.problems.size())
    << " problems";
  if (baseline) {
    h << "; baseline: ";
    h.Text(o.baseline_label);
  }
  if (!job.job.profiler.empty()) {
    h << "; profiler: ";
    h.Text(job.job.profiler);
  }
  h << "</p>\n";

  // The verdict.
  h << "<h2 id=\"verdict\">Verdict</h2><div class=\"verdict\">";
  if (r.has_trace) {
    h << "<div class=\"card\"><div class=\"l\">convolution GPU time in the trace</div><div "
         "class=\"v\">"
      << Num(r.trace_total_ms) << " ms</div></div>";
  }
  if (r.overall.problems > 0) {
    const ReportTotals& t = r.overall;
    h << "<div class=\"card\"><div class=\"l\">" << reference << "</div><div class=\"v\">"
      << Num(t.reference_ms) << " ms</div><div class=\"l\">" << std::to_string(t.problems)
      << " problems</div></div>";
    h << "<div class=\"card\"><div class=\"l\">with CK's best kernel per problem</div><div "
         "class=\"v "
      << (t.speedup() >= 1 ? "good" : "bad") << "\">" << Num(t.with_ck_ms) << " ms · "
      << Speedup(t.speedup()) << "</div><div class=\"l\">" << std::to_string(t.covered) << " of "
      << std::to_string(t.problems) << " problems by CK</div></div>";
    h << "<div class=\"card\"><div class=\"l\">the faster of CK and " << reference
      << " per problem</div><div class=\"v\">" << Num(t.best_of_both_ms) << " ms · "
      << Speedup(t.best_of_both_ms > 0 ? std::optional<double>(t.reference_ms / t.best_of_both_ms)
                                       : std::nullopt)
      << "</div></div>";
  }
  h << "</div><p><strong>";
  h.Text(Headline(r, reference));
  h << "</strong></p>";
  if (!r.by_group.empty()) {
    h << "<table><thead><tr><th>operation</th><th class=\"n\">problems</th><th "
         "class=\"n\">by CK</th><th class=\"n\">"
      << reference
      << " ms</th><th class=\"n\">with CK ms</th><th class=\"n\">speedup</th><th "
         "class=\"n\">faster of both ms</th></tr></thead><tbody>";
    auto row = [&](const std::string& name, const ReportTotals& t) {
      h << "<tr><td>" << name << "</td><td class=\"n\">" << std::to_string(t.problems)
        << "</td><td class=\"n\">" << std::to_string(t.covered) << "</td><td class=\"n\">"
        << Num(t.reference_ms) << "</td><td class=\"n\">" << Num(t.with_ck_ms)
        << "</td><td class=\"n\">" << Speedup(t.speedup()) << "</td><td class=\"n\">"
        << Num(t.best_of_both_ms) << "</td></tr>";
    };
    for (const auto& [g, t] : r.by_group) {
      row(g == "fwd" ? "forward" : "backward (data + weight)", t);
    }
    row("<strong>all</strong>", r.overall);
    h << "</tbody></table>";
    VerdictChart(h, r, reference);
  }
  h << "<h3>Coverage</h3><ul>";
  for (const std::string& line : CoverageLines(r)) {
    h << "<li>";
    h.Text(line);
    h << "</li>";
  }
  h << "</ul>\n";

  // Per problem.
  h << "<h2 id=\"problems\">Problems</h2>";
  ProblemsChart(h, r, o, reference);
  h << "<div class=\"scroll\"><table><thead><tr><th class=\"n\">#</th><th class=\"n\">rank</th>"
       "<th>op</th><th>problem</th><th>type</th><th class=\"n\">calls</th><th "
       "class=\"n\">trace ms/call</th>";
  if (baseline) h << "<th class=\"n\">baseline ms</th>";
  h << "<th class=\"n\">CK ms</th><th class=\"n\">speedup</th><th class=\"n\">"
    << "share</th><th>CK</th><th>best kernel</th></tr></thead><tbody>\n";
  size_t index = 0;
  for (const ReportProblem& p : r.problems) {
    ++index;
    double ck_ms = 0;
    bool any_ck = false;
    for (const TaskResult* t : p.parts) {
      if (t->ok()) ck_ms += t->avg_ms, any_ck = true;
    }
    h << "<tr><td class=\"n\">" << std::to_string(index) << "</td><td class=\"n\">"
      << std::to_string(p.rank) << "</td><td>" << p.ops << "</td><td class=\"p\">";
    h.Text(p.problem);
    h << "</td><td>";
    h.Text(p.data_type);
    h << "</td><td class=\"n\">" << std::to_string(p.calls) << "</td><td class=\"n\">"
      << Num(p.trace_ms_per_call) << "</td>";
    if (baseline) h << "<td class=\"n\">" << Num(p.baseline_ms_per_call) << "</td>";
    h << "<td class=\"n\">"
      << (p.ck_ms_per_call ? Num(p.ck_ms_per_call)
          : any_ck         ? "(" + Num(ck_ms) + ")"
                           : "-")
      << "</td><td class=\"n\">" << Speedup(p.speedup()) << "</td><td class=\"n\">"
      << Percent(p.trace_total_ms(), r.trace_total_ms) << "</td><td>" << CoverageName(p.coverage)
      << (p.noisy ? " ~noisy" : "") << (p.reused ? " (reused)" : "") << "</td><td class=\"k\">";
    h.Text(p.best);
    h << "</td></tr>\n";
  }
  h << "</tbody></table></div><p class=\"note\">CK ms: the sum of the problem's configs' best "
       "times per call (a backward record's bwd_data and bwd_weight); in parentheses when some "
       "config of it has no usable time. Speedup: "
    << reference << " / CK. Share: of the trace's convolution time.</p>\n";

  h << "<h2 id=\"roofline\">Roofline</h2>";
  RooflineChart(h, r, o);
  h << "<h2 id=\"timeline\">Timeline</h2>";
  TimelineChart(h, job, o);

  const auto failures = Failures(job);
  h << "<h2 id=\"failures\">Failures</h2>";
  if (failures.empty()) {
    h << "<p>None: every task that ended succeeded.</p>";
  } else {
    h << "<div class=\"scroll\"><table><thead><tr><th class=\"n\">task</th><th>op</th>"
         "<th>problem</th><th>end</th><th class=\"n\">GPU</th><th>reason</th></tr></thead><tbody>";
    for (const TaskResult* t : failures) {
      h << "<tr><td class=\"n\">#" << std::to_string(t->position) << "</td><td>"
        << ShortOp(t->operation) << "</td><td>";
      h.Text(Problem(t->description));
      h << "</td><td>" << EnumName(t->state) << "</td><td class=\"n\">"
        << (t->gpu >= 0 ? std::to_string(t->gpu) : "-") << "</td><td class=\"k\">";
      h.Text(ErrorText(*t));
      h << "</td></tr>\n";
    }
    h << "</tbody></table></div>";
  }

  h << "<h2 id=\"settings\">Job settings</h2><dl class=\"kv\">";
  for (const auto& [k, v] : Settings(job)) {
    h << "<dt>" << k << "</dt><dd>";
    h.Text(v);
    h << "</dd>";
  }
  h << "</dl><h2 id=\"gpus\">GPU state</h2>";
  const GpuRuns gpus = GpuRows(job);
  if (gpus.rows.empty() && gpus.unrecorded == 0) {
    h << "<p>No task ran on a GPU.</p>";
  } else {
    h << "<table><thead><tr><th class=\"n\">GPU</th><th class=\"n\">runs</th><th>model</th>"
         "<th>arch</th><th>driver</th><th>UUID</th><th>graphics clock</th><th>memory clock</th>"
         "<th>temperature</th><th>power</th></tr></thead><tbody>";
    for (const auto& [g, row] : gpus.rows) {
      h << "<tr><td class=\"n\">" << std::to_string(g) << "</td><td class=\"n\">"
        << std::to_string(row.runs) << "</td><td>";
      h.Text(row.name.empty() ? "unknown" : row.name);
      h << "</td><td>";
      h.Text(row.arch);
      h << "</td><td>";
      h.Text(row.driver);
      h << "</td><td class=\"k\">";
      h.Text(row.uuid);
      h << "</td><td>" << row.sclk.Text("MHz") << "</td><td>" << row.mclk.Text("MHz") << "</td><td>"
        << row.temp.Text("°C") << "</td><td>" << row.power.Text("W") << "</td></tr>";
    }
    if (gpus.unrecorded > 0) {
      h << "<tr><td>not recorded</td><td class=\"n\">" << std::to_string(gpus.unrecorded)
        << "</td><td colspan=\"8\">" << kUnrecordedRuns << "</td></tr>";
    }
    h << "</tbody></table><p class=\"note\">" << kRunsNote
      << " Readings before and after each task, lowest to highest over the job.</p>";
  }
  h << "<p class=\"note\">Made by ckprof report";
  if (!o.generated_at.empty()) {
    h << " on ";
    h.Text(o.generated_at);
  }
  h << ".</p></body></html>\n";
  // Users' text is escaped where it is written (Html::Text); this pass keeps the promise for
  // anything that reached the page otherwise (`report -o -` on a terminal).
  return EscapeControl(h.str(), LineBreaks::kKeep);
}

std::string RenderReportMarkdown(const ResultsReply& job, const ResultsReply* baseline,
                                 const ReportOptions& o) {
  const Report r = BuildReport(job, baseline, o);
  const char* reference = baseline ? "baseline" : "PyTorch (trace)";
  std::string m;
  m.reserve(2048 + r.problems.size() * 200);
  m += "# ckprof report: " + MdCell(o.job_label) + "\n\n";
  if (baseline) m += "Baseline: " + MdCell(o.baseline_label) + "\n\n";
  m += "## Verdict\n\n";
  if (r.has_trace) {
    m += "- Convolution GPU time in the trace: **" + Num(r.trace_total_ms) + " ms**\n";
  }
  m += "- " + MdCell(Headline(r, reference)) + "\n";
  if (r.overall.problems > 0) {
    m += "- Taking the faster of CK and " + std::string(reference) +
         " per problem: " + Num(r.overall.best_of_both_ms) + " ms\n";
  }
  m += "\n";
  if (!r.by_group.empty()) {
    m += std::string("| operation | problems | by CK | ") + reference +
         " ms | with CK ms | speedup | faster of both ms |\n|---|--:|--:|--:|--:|--:|--:|\n";
    auto row = [&](const std::string& name, const ReportTotals& t) {
      m += "| " + name + " | " + std::to_string(t.problems) + " | " + std::to_string(t.covered) +
           " | " + Num(t.reference_ms) + " | " + Num(t.with_ck_ms) + " | " + Speedup(t.speedup()) +
           " | " + Num(t.best_of_both_ms) + " |\n";
    };
    for (const auto& [g, t] : r.by_group) row(g == "fwd" ? "forward" : "backward", t);
    row("**all**", r.overall);
    m += "\n";
  }
  m += "### Coverage\n\n";
  for (const std::string& line : CoverageLines(r)) m += "- " + MdCell(line) + "\n";
  m += "\n## Problems (ranked by trace GPU time)\n\n";
  m += std::string("| # | rank | op | problem | type | calls | trace ms/call |") +
       (baseline ? " baseline ms |" : "") + " CK ms | speedup | CK | best kernel |\n";
  m += std::string("|--:|--:|---|---|---|--:|--:|") + (baseline ? "--:|" : "") +
       "--:|--:|---|---|\n";
  size_t index = 0;
  for (const ReportProblem& p : r.problems) {
    ++index;
    m += "| " + std::to_string(index) + " | " + std::to_string(p.rank) + " | " + p.ops + " | " +
         MdCell(p.problem) + " | " + MdCell(p.data_type) + " | " + std::to_string(p.calls) + " | " +
         Num(p.trace_ms_per_call) + " |" +
         (baseline ? " " + Num(p.baseline_ms_per_call) + " |" : "") + " " + Num(p.ck_ms_per_call) +
         " | " + Speedup(p.speedup()) + " | " + std::string(CoverageName(p.coverage)) +
         (p.noisy ? " ~noisy" : "") + " | " + MdCell(p.best) + " |\n";
  }
  const auto failures = Failures(job);
  m += "\n## Failures\n\n";
  if (failures.empty()) {
    m += "None: every task that ended succeeded.\n";
  } else {
    m += "| task | op | problem | end | GPU | reason |\n|--:|---|---|---|--:|---|\n";
    for (const TaskResult* t : failures) {
      m += "| #" + std::to_string(t->position) + " | " + ShortOp(t->operation) + " | " +
           MdCell(Problem(t->description)) + " | " + std::string(EnumName(t->state)) + " | " +
           (t->gpu >= 0 ? std::to_string(t->gpu) : "-") + " | " + MdCell(ErrorText(*t)) + " |\n";
    }
  }
  m += "\n## Job settings\n\n| setting | value |\n|---|---|\n";
  for (const auto& [k, v] : Settings(job)) m += "| " + k + " | " + MdCell(v) + " |\n";
  const GpuRuns gpus = GpuRows(job);
  m += "\n## GPU state\n\n";
  if (gpus.rows.empty() && gpus.unrecorded == 0) {
    m += "No task ran on a GPU.\n";
  } else {
    m += "| GPU | runs | model | arch | driver | graphics clock | memory clock | temperature | "
         "power |\n|--:|--:|---|---|---|---|---|---|---|\n";
    for (const auto& [g, row] : gpus.rows) {
      m += "| " + std::to_string(g) + " | " + std::to_string(row.runs) + " | " +
           MdCell(row.name.empty() ? "unknown" : row.name) + " | " + MdCell(row.arch) + " | " +
           MdCell(row.driver) + " | " + row.sclk.Text("MHz") + " | " + row.mclk.Text("MHz") +
           " | " + row.temp.Text("°C") + " | " + row.power.Text("W") + " |\n";
    }
    if (gpus.unrecorded > 0) {
      m += "| not recorded | " + std::to_string(gpus.unrecorded) + " | " +
           std::string(kUnrecordedRuns) + " | | | | | | |\n";
    }
    m += "\n" + std::string(kRunsNote) + "\n";
  }
  m += "\nRoofline peaks: " + MdCell(r.peaks.source) + ". Charts: in the HTML report (`ckprof " +
       "report --format html`).\n";
  // Whatever users' text reached the page outside a cell: shown, never acting on a terminal.
  return EscapeControl(m, LineBreaks::kKeep);
}

}  // namespace ckprof

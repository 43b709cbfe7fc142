// ckprof submit: send an input file's content to ckprofd as a job.
#include <unistd.h>

#include <cmath>
#include <ctime>
#include <iostream>
#include <regex>

#include "client/args.h"
#include "client/client_util.h"
#include "client/commands.h"
#include "common/ck_config.h"
#include "common/convert.h"
#include "common/file_util.h"
#include "common/terminal_text.h"
#include "common/time_text.h"

namespace ckprof {
namespace {}  // namespace

int RunSubmitCommand(const GlobalOptions& global, const Args& args) {
  std::string input, name, priority, gpus, max_gpus, not_before, timeout, max_ops, profiler,
      data_type, layout, order, repeat, on_end, reuse;
  std::vector<std::string> env;
  bool dry_run = false, json_out = false;
  ArgParser p(
      "ckprof submit",
      "Submit a job to ckprofd: every convolution of INPUT becomes CK "
      "profiler runs, queued fairly on the daemon's GPUs.",
      "INPUT may be a replay-IR list (conv_repros_ir.json), a PyTorch profiler trace\n"
      "(plain or .gz) or a CK configs file (ck_profiler_configs.json); ckprofd converts it.\n"
      "Prints the job id; follow it with 'ckprof watch JOB'.\n\n"
      "example:\n"
      "  ckprof submit conv_repros_ir.json --name resnet-bf16 --profiler-path "
      "/opt/ck/build/bin\n"
      "  ckprof submit trace.json.gz --gpus 0-3 --max-gpus 2 --not-before +2h\n"
      "  ckprof submit sweep.json --on-end 'notify-send \"job $CKPROF_JOB_ID: $CKPROF_COUNTS\"'");
  p.Positional("INPUT", &input, true, "the file to profile, - for stdin (plain or gzipped)");
  p.Option("--name", &name, "N", "job name (default: the file name)");
  p.Option("--priority", &priority, "P",
           "order among your own jobs, " + PriorityRange() + ", higher first (default 0)");
  p.Option("--gpus", &gpus, "LIST", "GPUs the job may use, e.g. 0,1 or 0-3 (default: any)");
  p.Option("--max-gpus", &max_gpus, "M", "at most M GPUs at once, M >= 1 (default: no limit)");
  p.Option("--order", &order, "O",
           "rank: the configs' priority rank, then file order, but near the end a task too long "
           "to start last starts at once (default); longest-first: the most FLOPs first");
  p.Option("--not-before", &not_before, "TIME",
           "start no earlier than TIME: +30m, +1h30m, 09:00 (the next one), tomorrow 09:00, "
           "2026-12-01T02:00 (default: now)");
  p.Option("--timeout", &timeout, "S",
           "seconds one profiler run may take (default: the daemon's timeout, 1800 s unless "
           "set; at most its max_timeout; 0 = none, admins only)");
  p.Option("--max-ops", &max_ops, "N", "profile only the first N configs, N >= 1 (default: all)");
  p.Option("--repeat", &repeat, "N",
           "run each config N times, spread over the job's GPUs; its result is the median, with "
           "min, max and the coefficient of variation (noisy above the daemon's "
           "noise_threshold, 5%) (default 1)");
  p.Option("--profiler-path", &profiler, "P",
           "ckProfiler, or the directory holding it or profile_grouped_conv_* (default: the "
           "daemon's)");
  p.Option("--data-type", &data_type, "T",
           "auto|fp16|bf16|fp32, in any case (default auto: from the tensors)");
  p.Option("--layout", &layout, "L",
           "auto|nchw|nhwc, in any case (default auto: from the strides)");
  p.Option("--on-end", &on_end, "CMD",
           "when the job ends, run the shell command CMD as you, in this directory, with "
           "CKPROF_JOB_ID, CKPROF_JOB_NAME, CKPROF_JOB_STATE (finished or cancelled), "
           "CKPROF_TOTAL, CKPROF_SUCCEEDED, CKPROF_FAILED, CKPROF_COUNTS, ... set; stopped "
           "after the daemon's on_end_timeout (60 s)");
  p.RepeatedOption("--env", &env, "KEY=VALUE",
                   "set KEY in the environment of the job's profilers and --on-end command "
                   "(again for more); a root ckprofd gives them a clean environment otherwise: "
                   "your HOME, USER, LOGNAME, SHELL, a standard PATH, LANG and what its admin "
                   "passes (pass_env)");
  p.Option("--reuse", &reuse, "R",
           "auto: a config whose problem was measured with the same profiler build (path, size, "
           "mtime, content hash) on the same GPU model within the daemon's reuse_max_age_days "
           "(30) is not run again, its result copied and marked (results: reused); never: run "
           "everything. --repeat always runs (default auto)");
  p.Flag("--dry-run", &dry_run, "print the CK command lines; run and store nothing");
  p.Flag("--json", &json_out, "print the daemon's answer as JSON");
  if (auto code = p.Parse(args)) return *code;

  // Option values first, so that a usage error comes before a large input is read and sent.
  if (!data_type.empty() && Lowercase(data_type) != "auto" &&
      !ParseDataTypeName(Lowercase(data_type))) {
    PrintError("submit", "--data-type must be auto, fp16, bf16 or fp32, got '" + data_type + "'");
    return 2;
  }
  if (!layout.empty() && Lowercase(layout) != "auto" && !ParseLayoutName(Lowercase(layout))) {
    PrintError("submit", "--layout must be auto, nchw or nhwc, got '" + layout + "'");
    return 2;
  }
  SubmitRequest r;
  SubmitOptions& s = r.submit;
  s.name = name;
  // `absent`: what leaving the option out means, for the message.
  auto int_opt = [&](const std::string& flag, const std::string& text, int64_t lo, int64_t hi,
                     int64_t* out, const std::string& absent = "") {
    static const std::regex num(R"(-?\d{1,18})");
    if (text.empty()) return true;
    if (!std::regex_match(text, num) || std::stoll(text) < lo || std::stoll(text) > hi) {
      PrintError("submit", flag + " must be an integer from " + std::to_string(lo) + " to " +
                               std::to_string(hi) + ", got '" + text + "'" +
                               (absent.empty() ? "" : " (leave it out " + absent + ")"));
      return false;
    }
    *out = std::stoll(text);
    return true;
  };
  int64_t v = 0;
  if (!int_opt("--priority", priority, kMinPriority, kMaxPriority, &v)) return 2;
  s.priority = static_cast<int>(v);
  v = 0;
  // 0 means "no limit" on the wire, but as a flag it reads as "no GPU": leaving it out says it.
  if (!int_opt("--max-gpus", max_gpus, 1, 1024, &v, "for no limit")) return 2;
  s.max_gpus = static_cast<int>(v);
  if (!order.empty() && !ParseEnum(order, &s.order)) {
    PrintError("submit", "--order must be rank or longest-first, got '" + order + "'");
    return 2;
  }
  if (!int_opt("--max-ops", max_ops, 1, int64_t{1} << 40, &s.max_ops, "to profile every config")) {
    return 2;
  }
  v = 1;
  if (!int_opt("--repeat", repeat, 1, kMaxRepeat, &v, "to run each config once")) return 2;
  s.repeat = static_cast<int>(v);
  if (!gpus.empty()) {
    auto list = ParseGpuListArg(gpus, "submit");
    if (!list) return 2;
    s.gpus = *list;
  }
  if (!not_before.empty()) {
    auto t = ParseTime(not_before);
    if (!t) {
      PrintError("submit", std::string("--not-before must be ") + kWhenExamples + ", got '" +
                               not_before + "'");
      return 2;
    }
    s.not_before = *t;
  }
  if (!timeout.empty()) {
    char* end = nullptr;
    double t = std::strtod(timeout.c_str(), &end);
    if (*end != '\0' || !(t >= 0) || !std::isfinite(t)) {
      PrintError("submit", "--timeout must be a number of seconds >= 0, got '" + timeout + "'");
      return 2;
    }
    s.timeout_s = t;
  }
  if (!reuse.empty() && reuse != "auto" && reuse != "never") {
    PrintError("submit", "--reuse must be auto or never, got '" + reuse + "'");
    return 2;
  }
  s.reuse = reuse;
  s.dry_run = dry_run;
  s.on_end = on_end;
  for (const auto& e : env) {
    if (e.find('=') == std::string::npos || e.find('=') == 0 || e.find('\n') != std::string::npos) {
      PrintError("submit", "--env must be KEY=VALUE (one line), got '" + e + "'");
      return 2;
    }
    s.env += (s.env.empty() ? "" : "\n") + e;
  }
  s.data_type = Lowercase(data_type);
  s.layout = Lowercase(layout);
  s.profiler_path = AbsolutePath(profiler);
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd)) s.cwd = cwd;

  const std::string label = InputLabel(input);
  auto bytes = IsStdio(input) ? ReadStdinBytes() : ReadFileBytes(input);
  if (!bytes) {
    PrintError("submit", bytes.error());
    return 1;
  }
  if (Status st = EncodeSubmitContent(std::move(*bytes), &s); !st) {
    PrintError("submit", label + ": " + st.error());
    return 1;
  }
  s.input_name = IsStdio(input) ? label : input.substr(input.find_last_of('/') + 1);
  auto conn = ConnectOrReport(global, "submit");
  if (!conn) return kExitUnreachable;
  ErrorReply refusal;
  auto answer = conn->Call(r, &refusal);
  if (!answer) {
    // A refused input keeps its warnings: they say why each record was skipped.
    if (refusal.conversion) {
      for (const auto& w : refusal.conversion->warnings) std::cerr << "⚠ " << w << "\n";
    }
    PrintError("submit", RefusalMessage(answer.error(), refusal, label, s.input_name));
    return conn->lost() ? kExitUnreachable : 1;
  }
  const SubmitReply& a = *answer;
  if (json_out) {
    std::cout << JsonForTerminal(ReplyJson(a).dump(2)) << "\n";
    return 0;
  }
  const ConversionSummary& conv = a.conversion;
  for (const auto& w : conv.warnings) std::cerr << "⚠ " << EscapeControl(w) << "\n";
  if (dry_run) {
    std::cout << EscapeControl(a.profiler) << "\n";
    for (const PlannedRun& c : a.commands) {
      std::cout << EscapeControl(c.command.empty() ? "# cannot build: " + c.error : c.command)
                << "\n";
    }
    return 0;
  }
  const int runs = a.job ? a.job->repeat : 1;
  std::cerr << "submitted job " << a.job_id << ": " << conv.kept << " profiler run(s)"
            << (runs > 1 ? " (" + std::to_string(conv.kept / runs) + " configs x " +
                               std::to_string(runs) + ")"
                         : std::string())
            << " from " << conv.records << " record(s) of a " << conv.format
            << (conv.skipped ? ", " + std::to_string(conv.skipped) + " skipped" : std::string())
            << (a.job && a.job->reused > 0
                    ? "; " + std::to_string(a.job->reused) +
                          " reused from earlier runs (not run again; --reuse never measures them)"
                    : std::string())
            << "\n";
  std::cout << a.job_id << "\n";
  return 0;
}

}  // namespace ckprof

// ckprof submit: send an input file's content to ckprofd as a job.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <regex>

#include "client/args.h"
#include "client/client_util.h"
#include "client/commands.h"
#include "client/job_options.h"
#include "common/ck_config.h"
#include "common/convert.h"
#include "common/file_util.h"
#include "common/terminal_text.h"

namespace ckprof {
namespace {

// The command line of `ckprof submit` but the job options (JobOptions).
struct SubmitArgs {
  std::string input, name, max_ops, profiler, data_type, layout, order, repeat, on_end, reuse;
  std::string job_timeout;
  std::vector<std::string> env, after, after_ok;
  bool dry_run = false, json_out = false, mail = false;
};

// Declares submit's options after the job options: what to run and how.
void DeclareSubmitOptions(ArgParser* p, SubmitArgs* a) {
  p->Option("--order", &a->order, "O",
            "rank: the configs' priority rank, then file order, but near the end a task too long "
            "to start last starts at once (default); longest-first: the most FLOPs first");
  p->Option("--max-ops", &a->max_ops, "N",
            "profile only the first N configs, N >= 1 (default: all)");
  p->Option("--repeat", &a->repeat, "N",
            "run each config N times, spread over the job's GPUs; its result is the median, with "
            "min, max and the coefficient of variation (noisy above the daemon's "
            "noise_threshold, 5%) (default 1)");
  p->Option("--profiler-path", &a->profiler, "P",
            "ckProfiler, or the directory holding it or profile_grouped_conv_* (default: the "
            "daemon's)");
  p->Option("--data-type", &a->data_type, "T",
            "auto|fp16|bf16|fp32, in any case (default auto: from the tensors)");
  p->Option("--layout", &a->layout, "L",
            "auto|nchw|nhwc, in any case (default auto: from the strides)");
  p->Option("--on-end", &a->on_end, "CMD",
            "when the job ends, run the shell command CMD as you, in this directory, with "
            "CKPROF_JOB_ID, CKPROF_JOB_NAME, CKPROF_JOB_STATE (finished or cancelled), "
            "CKPROF_TOTAL, CKPROF_SUCCEEDED, CKPROF_FAILED, CKPROF_COUNTS, ... set; stopped "
            "after the daemon's on_end_timeout (60 s)");
  p->RepeatedOption("--env", &a->env, "KEY=VALUE",
                    "set KEY in the environment of the job's profilers and --on-end command "
                    "(again for more); a root ckprofd gives them a clean environment otherwise: "
                    "your HOME, USER, LOGNAME, SHELL, a standard PATH, LANG and what its admin "
                    "passes (pass_env). A job with --env neither reuses earlier results nor "
                    "adds its own to reuse and best");
  p->Option("--reuse", &a->reuse, "R",
            "auto: a config whose problem was measured with the same profiler build (path, size, "
            "mtime, content hash) on the same GPU model within the daemon's reuse_max_age_days "
            "(30) is not run again, its result copied and marked (results: reused); never: run "
            "everything. --repeat always runs (default auto)");
  p->Option("--job-timeout", &a->job_timeout, "T",
            "cancel the whole job once it has run T since its first start: seconds, 90m, 2h, "
            "1h30m, 1d or H:MM:SS; 0 or none: no limit (admins only where the daemon has a "
            "max_job_timeout) (default: the daemon's max_job_timeout, else none)");
  p->RepeatedOption("--after", &a->after, "J[,J...]",
                    "start once jobs J have ended, however they ended (again for more)");
  p->RepeatedOption("--after-ok", &a->after_ok, "J[,J...]",
                    "start once jobs J have ended with every task succeeded; if one did not, "
                    "this job ends cancelled, with the reason (\"job 7 failed: ...\")");
  p->Flag("--mail", &a->mail,
          "mail you when the job ends (its state and counts), through this host's sendmail, "
          "sent as you; refused, saying why, where the host has none");
  p->Flag("--dry-run", &a->dry_run, "print the CK command lines; run and store nothing");
  p->Flag("--json", &a->json_out, "print the daemon's answer as JSON");
}

// An integer option from `lo` to `hi` ("" leaves *out as it is). `absent`: what leaving the
// option out means, for the message (0 would often mean "no limit" on the wire, but as a flag
// it reads as "none": leaving it out says it).
Status ReadInt(const std::string& flag, const std::string& text, int64_t lo, int64_t hi,
               const std::string& absent, int64_t* out) {
  static const std::regex num(R"(-?\d{1,18})");
  if (text.empty()) return Status::Ok();
  if (!std::regex_match(text, num) || std::stoll(text) < lo || std::stoll(text) > hi) {
    return MakeError(flag + " must be an integer from " + std::to_string(lo) + " to " +
                     std::to_string(hi) + ", got '" + text + "' (leave it out " + absent + ")");
  }
  *out = std::stoll(text);
  return Status::Ok();
}

// A duration as a user types it: "7200" (seconds), "90m", "2h", "1h30m", "1d", "2:00:00",
// "0" or "none" (no limit); nullopt when it is none of these.
std::optional<double> ReadDuration(const std::string& text) {
  if (text == "none") return 0.0;
  static const std::regex units(R"((?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?)");
  static const std::regex clock(R"((\d+):([0-5]\d):([0-5]\d))");
  static const std::regex seconds(R"(\d{1,9}(\.\d+)?)");
  std::smatch m;
  if (std::regex_match(text, seconds)) return std::stod(text);
  if (std::regex_match(text, m, clock)) {
    return std::stod(m[1]) * 3600 + std::stod(m[2]) * 60 + std::stod(m[3]);
  }
  if (!text.empty() && std::regex_match(text, m, units)) {
    double s = 0;
    const double scale[] = {86400, 3600, 60, 1};
    for (int i = 0; i < 4; ++i) {
      if (m[i + 1].matched) s += std::stod(m[i + 1]) * scale[i];
    }
    return s;
  }
  return std::nullopt;
}

// --after 7,9 --after 12: the job ids, each once; the error names the option and the bad text.
Status ReadJobList(const std::string& flag, const std::vector<std::string>& texts,
                   std::vector<int64_t>* out) {
  static const std::regex id(R"(\d{1,18})");
  for (const auto& text : texts) {
    size_t start = 0;
    while (true) {
      const size_t comma = text.find(',', start);
      const std::string part = text.substr(start, comma - start);
      if (!std::regex_match(part, id) || std::stoll(part) <= 0) {
        return MakeError(flag + " takes job ids separated by commas (e.g. " + flag +
                         " 7,9), got '" + text + "'");
      }
      const int64_t job = std::stoll(part);
      if (std::find(out->begin(), out->end(), job) == out->end()) out->push_back(job);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return Status::Ok();
}

// The options (submit's own and the job options given) into *s, checked; the error names the
// first bad one.
Status ReadSubmitArgs(const SubmitArgs& a, const JobOptions& job_options, SubmitOptions* s) {
  if (!a.data_type.empty() && Lowercase(a.data_type) != "auto" &&
      !ParseDataTypeName(Lowercase(a.data_type))) {
    return MakeError("--data-type must be auto, fp16, bf16 or fp32, got '" + a.data_type + "'");
  }
  if (!a.layout.empty() && Lowercase(a.layout) != "auto" && !ParseLayoutName(Lowercase(a.layout))) {
    return MakeError("--layout must be auto, nchw or nhwc, got '" + a.layout + "'");
  }
  if (!a.order.empty() && !ParseEnum(a.order, &s->order)) {
    return MakeError("--order must be rank or longest-first, got '" + a.order + "'");
  }
  if (Status st = ReadInt("--max-ops", a.max_ops, 1, int64_t{1} << 40, "to profile every config",
                          &s->max_ops);
      !st) {
    return st;
  }
  int64_t repeat = 1;
  if (Status st = ReadInt("--repeat", a.repeat, 1, kMaxRepeat, "to run each config once", &repeat);
      !st) {
    return st;
  }
  s->repeat = static_cast<int>(repeat);
  if (!a.reuse.empty() && a.reuse != "auto" && a.reuse != "never") {
    return MakeError("--reuse must be auto or never, got '" + a.reuse + "'");
  }
  for (const auto& e : a.env) {
    if (e.find('=') == std::string::npos || e.find('=') == 0 || e.find('\n') != std::string::npos) {
      return MakeError("--env must be KEY=VALUE (one line), got '" + e + "'");
    }
    s->env += (s->env.empty() ? "" : "\n") + e;
  }
  if (!a.job_timeout.empty()) {
    auto t = ReadDuration(a.job_timeout);
    if (!t || *t > 1e8) {
      return MakeError(
          "--job-timeout must be a duration such as 7200 (seconds), 90m, 2h, 1h30m, "
          "1d or 2:00:00, or none, got '" +
          a.job_timeout + "'");
    }
    s->job_timeout_s = *t;
  }
  if (Status st = ReadJobList("--after", a.after, &s->after); !st) return st;
  if (Status st = ReadJobList("--after-ok", a.after_ok, &s->after_ok); !st) return st;
  auto settings = job_options.Read();
  if (!settings) return Error{settings.error()};
  settings->ApplyTo(s);
  s->name = a.name;
  s->reuse = a.reuse;
  s->dry_run = a.dry_run;
  s->on_end = a.on_end;
  s->mail = a.mail;
  s->data_type = Lowercase(a.data_type);
  s->layout = Lowercase(a.layout);
  s->profiler_path = AbsolutePath(a.profiler);
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd)) s->cwd = cwd;
  return Status::Ok();
}

// Reads INPUT (a file, or stdin for "-") into the request. Returns 0, or 1 after printing why not.
int ReadInput(const std::string& input, SubmitOptions* s) {
  Status st;
  MappedFile mapped;
  if (!IsStdio(input) && mapped.Map(input, size_t{1} << 20)) {
    // A large file is compressed straight from its pages, not from a copy in memory.
    SigbusExit cut_short("ckprof submit: " + EscapeControl(input) +
                         ": the file was cut short while it was read; submit it again\n");
    st = EncodeSubmitContentFrom(mapped.view(), s);
  } else {
    auto bytes = IsStdio(input) ? ReadStdinBytes() : ReadFileBytes(input);
    if (!bytes) {
      PrintError("submit", bytes.error());
      return 1;
    }
    st = EncodeSubmitContent(std::move(*bytes), s);
  }
  if (!st) {
    PrintError("submit", InputLabel(input) + ": " + st.error());
    return 1;
  }
  s->input_name = IsStdio(input) ? InputLabel(input) : input.substr(input.find_last_of('/') + 1);
  return 0;
}

// The daemon's answer as the user asked for it: JSON, the command lines (--dry-run), or the job
// id on stdout and what was submitted on stderr.
void PrintAnswer(const SubmitArgs& args, const SubmitReply& a) {
  if (args.json_out) {
    std::cout << JsonForTerminal(ReplyJson(a).dump(2)) << "\n";
    return;
  }
  const ConversionSummary& conv = a.conversion;
  for (const auto& w : conv.warnings) std::cerr << "⚠ " << EscapeControl(w) << "\n";
  if (args.dry_run) {
    std::cout << EscapeControl(a.profiler) << "\n";
    for (const PlannedRun& c : a.commands) {
      std::cout << EscapeControl(c.command.empty() ? "# cannot build: " + c.error : c.command)
                << "\n";
    }
    return;
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
}

}  // namespace

int RunSubmitCommand(const GlobalOptions& global, const Args& args) {
  SubmitArgs a;
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
      "  ckprof submit bwd.json --after-ok 7    # only once job 7 has succeeded\n"
      "  ckprof submit sweep.json --on-end 'notify-send \"job $CKPROF_JOB_ID: $CKPROF_COUNTS\"'");
  p.Positional("INPUT", &a.input, true, "the file to profile, - for stdin (plain or gzipped)");
  p.Option("--name", &a.name, "N", "job name (default: the file name)");
  JobOptions job_options(SubmitJobOptionRules(), &p);
  DeclareSubmitOptions(&p, &a);
  if (auto code = p.Parse(args)) return *code;

  // Option values first, so that a usage error comes before a large input is read and sent.
  SubmitRequest r;
  SubmitOptions& s = r.submit;
  if (Status st = ReadSubmitArgs(a, job_options, &s); !st) {
    PrintError("submit", st.error());
    return 2;
  }
  if (int code = ReadInput(a.input, &s)) return code;
  auto conn = ConnectOrReport(global, "submit");
  if (!conn) return kExitUnreachable;
  ErrorReply refusal;
  auto answer = conn->Call(r, &refusal);
  if (!answer) {
    // A refused input keeps its warnings: they say why each record was skipped.
    if (refusal.conversion) {
      for (const auto& w : refusal.conversion->warnings) std::cerr << "⚠ " << w << "\n";
    }
    PrintError("submit",
               RefusalMessage(answer.error(), refusal, InputLabel(a.input), s.input_name));
    return conn->lost() ? kExitUnreachable : 1;
  }
  PrintAnswer(a, *answer);
  return 0;
}

}  // namespace ckprof

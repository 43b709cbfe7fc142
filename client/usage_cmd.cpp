// ckprof usage: accounting, as sacct and sshare tell it — GPU time, runs, successes and
// failures per user (and per job) from the daemon's stored attempts, each user's fair-share
// usage and place, and the caller's caps.
#include <fmt/format.h>

#include <ctime>
#include <iostream>

#include "client/args.h"
#include "client/client_util.h"
#include "client/commands.h"
#include "client/job_filter.h"
#include "common/terminal_text.h"
#include "common/text_table.h"

namespace ckprof {
namespace {

// GPU-hours: "12.5", "0.25", "<0.01" (some, but not a hundredth), "0".
std::string Hours(double seconds) {
  const double h = seconds / 3600;
  if (h >= 10) return fmt::format("{:.1f}", h);
  if (h >= 0.01) return fmt::format("{:.2f}", h);
  return h > 0 ? "<0.01" : "0";
}

// Half-lives as people say them: "1 h", "30 min", "2 d".
std::string SpanText(double s) {
  if (s >= 86400 && static_cast<int64_t>(s) % 86400 == 0) return fmt::format("{:g} d", s / 86400);
  if (s >= 3600) return fmt::format("{:g} h", s / 3600);
  if (s >= 60) return fmt::format("{:g} min", s / 60);
  return fmt::format("{:g} s", s);
}

void PrintUsers(const UsageReply& a, size_t width) {
  TextTable table({{"USER", false, true, 8},
                   {"GPU-HOURS", true},
                   {"RUNS", true},
                   {"OK", true},
                   {"FAILED", true},
                   {"FAIR-SHARE USAGE", true},
                   {"PLACE", true}});
  for (const UsageRow& u : a.users) {
    table.AddRow({u.user, Hours(u.gpu_seconds), GroupThousands(u.runs), GroupThousands(u.succeeded),
                  GroupThousands(u.failed), Hours(u.fair_share_usage),
                  u.place > 0 ? std::to_string(u.place) : "-"});
  }
  std::cout << table.Render(width);
  if (a.users.empty()) std::cout << "(no usage)\n";
}

void PrintJobs(const UsageReply& a, size_t width) {
  TextTable table({{"JOB", true},
                   {"USER", false, true, 8},
                   {"NAME", false, true, 12},
                   {"GPU-HOURS", true},
                   {"RUNS", true},
                   {"OK", true},
                   {"FAILED", true}});
  for (const UsageRow& j : a.jobs) {
    table.AddRow({std::to_string(j.job_id), j.user, j.job_name, Hours(j.gpu_seconds),
                  GroupThousands(j.runs), GroupThousands(j.succeeded), GroupThousands(j.failed)});
  }
  std::cout << table.Render(width);
  if (a.jobs.empty()) std::cout << "(no job ran in this time)\n";
}

}  // namespace

int RunUsageCommand(const GlobalOptions& global, const Args& args) {
  JobFilterArgs picked;  // --user and --since, read as list reads them
  bool jobs = false, json_out = false, wide = false;
  ArgParser p(
      "ckprof usage",
      "Accounting, as sacct and sshare tell it: per user, the GPU-hours, runs, successes and "
      "failures of the runs that started since T (a running one counted up to now), from the "
      "daemon's stored runs (jobs not cleaned yet); each user's fair-share usage (GPU-hours "
      "decayed with the daemon's half-life, running tasks included) and place in fair share's "
      "order among the users with queued work (1 = the next free GPU goes to them). Below: "
      "your use against the per-user caps, as status shows it.",
      "Every user sees everyone's usage, as status shows everyone's jobs. A run retried\n"
      "is counted each time it ran; FAILED counts failed, crashed, timed-out,\n"
      "spawn-failed and interrupted runs; cancelled and unsupported ones are in RUNS only.\n"
      "--json prints one object: since and now (unix seconds), half_life_s, \"users\"\n"
      "(user, uid, gpu_seconds, runs, succeeded, failed, fair_share_usage in GPU seconds,\n"
      "place: null without queued work), \"jobs\" (with --jobs: job_id, job_name, user and\n"
      "the counts) and \"you\" (as status's: your jobs, queued_runs, gpus_in_use and the\n"
      "caps max_jobs, max_queued_runs, max_gpus, max_timeout_s; null: none).\n\n"
      "example:\n  ckprof usage --since 7d\n  ckprof usage --user alice --jobs --since "
      "2026-12-01\n  ckprof usage --json | jq '.users[] | {user, place}'");
  p.Option("--since", &picked.since, "T",
           "only runs that started since T: an age (7d, 12h, 30m) or a time (2026-12-01, "
           "2026-12-01T09:00, today 09:00) (default: every stored run)");
  p.Option("--user", &picked.user, "U", "only user U (a name or uid; default: everyone)");
  p.Flag("--jobs", &jobs, "one row per job too, before the users");
  p.Flag("--json", &json_out, "print JSON for scripts");
  p.Flag("--wide", &wide, "never shorten a name (the tables fit the terminal otherwise)");
  if (auto code = p.Parse(args)) return *code;
  int bad = 0;
  const std::optional<JobFilter> filter = ReadJobFilter(picked, "usage", &bad);
  if (!filter) return bad;
  if (filter->since > kMaxNotBefore) {
    PrintError("usage", "--since " + picked.since + " is after 2100: give an earlier time");
    return 2;
  }
  UsageRequest r;
  r.since = std::max(filter->since, 0.0);
  r.user = picked.user;
  r.jobs = jobs;
  UsageReply a;
  if (int code = Ask(global, "usage", r, &a)) return code;
  if (json_out) {
    std::cout << JsonForTerminal(ReplyJson(a).dump(2)) << "\n";
    return 0;
  }
  const size_t width = TerminalWidth(wide);
  if (jobs) {
    PrintJobs(a, width);
    std::cout << "\n";
  }
  PrintUsers(a, width);
  std::cout << (a.since > 0 ? "runs since " + FormatClock(a.since) : "all stored runs")
            << "; fair-share usage halves every " << SpanText(a.half_life_s) << "\n"
            << "PLACE: the order in which users with queued work get a free GPU\n"
            << UseLines(a.you);
  return 0;
}

}  // namespace ckprof

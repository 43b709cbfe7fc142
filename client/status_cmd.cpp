// ckprof status / list / gpus: what the daemon is doing, as a table or JSON.
#include <algorithm>
#include <ctime>
#include <iostream>

#include "client/args.h"
#include "client/client_util.h"
#include "client/commands.h"
#include "common/text_table.h"

namespace ckprof {
namespace {

using json = nlohmann::json;

std::string Pad(std::string s, size_t w, bool right = false) {
  if (s.size() > w) s = s.substr(0, w - 1) + "~";
  std::string fill(w - s.size(), ' ');
  return right ? fill + s : s + fill;
}

std::string GpuList(const std::vector<int>& gpus) {
  std::string s;
  for (int g : gpus) s += (s.empty() ? "" : ",") + std::to_string(g);
  return s.empty() ? "-" : s;
}

// The jobs as a table fitted to `width` (0 = unlimited): the name gives way first.
void PrintJobTable(const std::vector<JobSummary>& jobs, size_t width) {
  TextTable table({{"JOB", true},
                   {"OWNER", false, true, 8},
                   {"NAME", false, true, 12},
                   {"STATE"},
                   {"DONE/TOTAL", true},
                   {"OK/FAILED", true},
                   {"GPUS"},
                   {"AGE", true},
                   {"ETA", true}});
  for (const auto& j : jobs) {
    // A cancelled job: how many of its tasks ran.
    const int64_t done = j.state == JobState::kCancelled ? j.counts().ran() : j.done();
    table.AddRow(
        {std::to_string(j.id), j.owner, j.name, std::string(EnumName(j.state)),
         std::to_string(done) + "/" + std::to_string(j.total),
         std::to_string(j.succeeded) + "/" + std::to_string(j.counts().ran() - j.succeeded),
         GpuList(j.gpus_in_use), FormatAge(j.submitted_at),
         j.eta_s < 0 ? "-" : FormatDuration(j.eta_s)});
  }
  std::cout << table.Render(width);
  if (jobs.empty()) std::cout << "(no jobs)\n";
}

// "09:19" today, else "2026-12-02 09:19": local time.
std::string ClockTime(double unix_time) {
  const std::time_t t = static_cast<std::time_t>(unix_time), now = std::time(nullptr);
  std::tm tm{}, today{};
  localtime_r(&t, &tm);
  localtime_r(&now, &today);
  const bool same_day = tm.tm_year == today.tm_year && tm.tm_yday == today.tm_yday;
  char buf[32];
  std::strftime(buf, sizeof buf, same_day ? "%H:%M" : "%Y-%m-%d %H:%M", &tm);
  return buf;
}

// What a job was submitted with, below its row of the table.
void PrintJobDetails(const JobSummary& s) {
  std::cout << "tasks: " << JobCountsText(s) << "\n";
  if (s.state == JobState::kWaiting)
    std::cout << "waiting until " << ClockTime(s.not_before) << "\n";
  std::cout << "priority: " << s.priority << "\n";
  std::cout << "gpus: " << (s.allowed_gpus.empty() ? "any" : GpuList(s.allowed_gpus))
            << (s.max_gpus > 0 ? ", at most " + std::to_string(s.max_gpus) + " at once" : "")
            << "\n";
  std::cout << "timeout: " << (s.timeout_s > 0 ? FormatDuration(s.timeout_s) + " per task" : "none")
            << "\n";
  std::cout << "not before: " << (s.not_before > 0 ? ClockTime(s.not_before) : "-") << "\n";
}

}  // namespace

int RunStatusCommand(const GlobalOptions& global, const Args& args, bool list_mode) {
  const std::string cmd = list_mode ? "list" : "status";
  std::vector<std::string> jobs;
  bool json_out = false, all = false, wide = false;
  ArgParser p("ckprof " + cmd,
              list_mode ? "List the daemon's jobs: active ones, or all with --all."
                        : "Show jobs (JOB...), or every job the daemon knows. A job that does "
                          "not exist is reported (exit 1) and the others are shown.",
              list_mode ? "example:\n  ckprof list --all --json"
                        : "example:\n  ckprof status 12\n  ckprof status 12 13 --json\n"
                          "  ckprof status --json");
  if (!list_mode) p.Positionals("JOB", &jobs, false, "job ids");
  if (list_mode) p.Flag("--all", &all, "include finished and cancelled jobs");
  p.Flag("--json", &json_out, "print JSON for scripts");
  p.Flag("--wide", &wide,
         "never shorten a name or an owner (the table fits the terminal otherwise)");
  if (auto code = p.Parse(args)) return *code;
  std::vector<int64_t> ids;
  for (const auto& text : jobs) {
    auto id = ParseJobId(text, cmd);
    if (!id) return 2;
    ids.push_back(*id);
  }
  Request r;
  r.type = list_mode ? RequestType::kList : RequestType::kStatus;
  r.all = all;
  if (ids.empty()) {
    StatusReply a;
    if (int code = Ask(global, cmd, r, &a)) return code;
    if (json_out) {
      std::cout << JobsJson(a.jobs).dump(2) << "\n";
    } else {
      PrintJobTable(a.jobs, TerminalWidth(wide));
    }
    return 0;
  }
  // The jobs asked for, each in turn; the worst end wins, as for wait.
  int worst = 0;
  std::vector<JobSummary> summaries;
  for (int64_t id : ids) {
    r.job_id = id;
    StatusReply a;
    const int code = Ask(global, cmd, r, &a);
    worst = std::max(worst, code);
    if (code == kExitUnreachable) return code;
    if (code == 0 && a.job) summaries.push_back(std::move(*a.job));
  }
  if (json_out) {
    // One job: its object; several: a list of those found.
    if (ids.size() == 1) {
      if (!summaries.empty()) std::cout << ToJson(summaries[0]).dump(2) << "\n";
    } else {
      std::cout << JobsJson(summaries).dump(2) << "\n";
    }
    return worst;
  }
  if (summaries.empty()) return worst;
  PrintJobTable(summaries, TerminalWidth(wide));
  for (const auto& s : summaries) {
    if (summaries.size() > 1) std::cout << "\njob " << s.id << ":\n";
    PrintJobDetails(s);
    std::cout << "profiler: " << s.profiler << "\n";
    std::cout << "order: " << EnumName(s.order)
              << (s.order == TaskOrder::kLongestFirst
                      ? " (the most FLOPs first)"
                      : " (priority rank, then file order; long tasks "
                        "not left for last)")
              << "\n";
    if (s.repeat > 1) {
      std::cout << "repeat: each config " << s.repeat << " times (" << s.total / s.repeat
                << " configs, " << s.total << " runs); results give each its median\n";
    }
  }
  return worst;
}

int RunGpusCommand(const GlobalOptions& global, const Args& args) {
  bool json_out = false;
  ArgParser p("ckprof gpus",
              "Show the daemon's GPUs: which task each one runs, drained or not (and why), and the "
              "processes that are none of the daemon's on them (foreign: such a GPU waits for "
              "them to leave, under the daemon's foreign_gpu_use \"wait\").",
              "example:\n  ckprof gpus --json");
  p.Flag("--json", &json_out, "print JSON for scripts");
  if (auto code = p.Parse(args)) return *code;
  Request r;
  r.type = RequestType::kGpus;
  GpusReply a;
  if (int code = Ask(global, "gpus", r, &a)) return code;
  if (json_out) {
    json out = json::array();
    for (const auto& g : a.gpus) out.push_back(ToJson(g));
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << Pad("GPU", 4, true) << "  " << Pad("STATE", 9) << " " << Pad("JOB", 6, true) << " "
            << Pad("TASK", 8, true) << " " << Pad("FOR", 8, true) << " " << Pad("RUNS", 7, true)
            << "\n";
  for (const GpuInfo& g : a.gpus) {
    const GpuInfo* gi = &g;
    std::string state =
        gi->drained ? (gi->task_id ? "draining" : "drained") : (gi->task_id ? "busy" : "idle");
    if (!gi->task_id && !gi->held_by.empty()) state = "waiting";
    if (!gi->task_id && !gi->drained && !gi->foreign.empty()) state = "foreign";
    std::cout << Pad(std::to_string(gi->index), 4, true) << "  " << Pad(state, 9) << " "
              << Pad(gi->job_id ? std::to_string(gi->job_id) : "-", 6, true) << " "
              << Pad(gi->task_id ? "#" + std::to_string(gi->position) : "-", 8, true) << " "
              << Pad(gi->task_id ? FormatAge(gi->busy_since) : "-", 8, true) << " "
              << Pad(std::to_string(gi->tasks_run), 7, true);
    if (!gi->held_by.empty()) std::cout << "  its host lock is held by " << gi->held_by;
    if (!gi->drain_reason.empty()) std::cout << "  " << gi->drain_reason;
    if (!gi->foreign.empty()) {
      std::string who;
      for (const auto& u : gi->foreign) who += (who.empty() ? "" : ", ") + u.Describe();
      std::cout << "  busy: " << who;
    }
    std::cout << "\n";
  }
  return 0;
}

}  // namespace ckprof

// ckprof status / list / gpus: what the daemon is doing, as a table or JSON.
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <iostream>
#include <optional>

#include "client/args.h"
#include "client/client_util.h"
#include "client/commands.h"
#include "client/job_filter.h"
#include "common/results_file.h"
#include "common/terminal_text.h"
#include "common/text_table.h"

namespace ckprof {
namespace {

using json = nlohmann::json;

std::string GpuList(const std::vector<int>& gpus) {
  std::string s;
  for (int g : gpus) s += (s.empty() ? "" : ",") + std::to_string(g);
  return s.empty() ? "-" : s;
}

double NowSeconds() { return static_cast<double>(std::time(nullptr)); }

// The jobs as a table fitted to `width` (0 = unlimited): the name gives way first.
void PrintJobTable(const std::vector<JobSummary>& jobs, size_t width) {
  TextTable table({{"JOB", true},
                   {"OWNER", false, true, 8},
                   {"NAME", false, true, 12},
                   {"STATE", false, false, 8, /*styled=*/true},
                   {"DONE/TOTAL", true},
                   {"OK/FAILED", true},
                   {"GPUS"},
                   {"AGE", true},
                   {"ELAPSED", true},
                   {"ENDED", true},
                   {"ETA", true}});
  for (const auto& j : jobs) {
    // (Of a cancelling job too, what ran: counting its cancelled tasks, DONE climbed to the
    // total while the cancel's steps went on and fell back once the job ended.)
    const int64_t done = JobDone(j);
    table.AddRow(
        {std::to_string(j.id), j.owner, j.name, ColourState(j.state),
         std::to_string(done) + "/" + std::to_string(j.total),
         std::to_string(j.counts.succeeded()) + "/" +
             std::to_string(j.counts.ran() - j.counts.succeeded()),
         GpuList(j.gpus_in_use), FormatAge(j.submitted_at),
         // As sacct: from its first start to its end (or now).
         j.started_at > 0
             ? FormatDuration((j.finished_at > 0 ? j.finished_at : NowSeconds()) - j.started_at)
             : "-",
         j.finished_at > 0 ? FormatClock(j.finished_at) : "-",
         j.eta_s < 0 ? "-" : FormatDuration(j.eta_s)});
  }
  std::cout << table.Render(width);
  if (jobs.empty()) std::cout << "(no jobs)\n";
}

// What a job was submitted with, below its row of the table.
void PrintJobDetails(const JobSummary& s) {
  std::cout << "tasks: " << JobCountsText(s) << "\n";
  if (s.state == JobState::kWaiting && s.not_before > NowSeconds()) {
    std::cout << "waiting until " << FormatClock(s.not_before) << "\n";
  }
  if (!s.waiting_reason.empty()) {
    std::cout << "reason: " << EscapeControl(s.waiting_reason) << "\n";
  }
  if (s.estimated_start > 0) {
    std::cout << "estimated start: " << FormatClock(s.estimated_start)
              << " (a guess, as squeue --start: the work ahead at measured task times)\n";
  }
  if (!s.cancel_reason.empty())
    std::cout << "cancelled: " << EscapeControl(s.cancel_reason) << "\n";
  auto ids = [](const std::vector<int64_t>& v) {
    std::string out;
    for (int64_t id : v) out += (out.empty() ? "" : ",") + std::to_string(id);
    return out;
  };
  if (!s.after.empty()) std::cout << "after: " << ids(s.after) << " (their end)\n";
  if (!s.after_ok.empty()) std::cout << "after-ok: " << ids(s.after_ok) << " (their success)\n";
  std::cout << "priority: " << s.priority << "\n";
  std::cout << "gpus: " << (s.allowed_gpus.empty() ? "any" : GpuList(s.allowed_gpus))
            << (s.max_gpus > 0 ? ", at most " + std::to_string(s.max_gpus) + " at once" : "")
            << "\n";
  std::cout << "timeout: " << (s.timeout_s > 0 ? FormatDuration(s.timeout_s) + " per task" : "none")
            << "\n";
  std::cout << "not before: " << (s.not_before > 0 ? FormatClock(s.not_before) : "-") << "\n";
  if (s.job_timeout_s > 0) {
    std::cout << "job timeout: " << FormatDuration(s.job_timeout_s)
              << (s.job_deadline > 0
                      ? ", cancelled at " + FormatClock(s.job_deadline) + " unless it has ended"
                      : " from its first start")
              << "\n";
  }
  // How its --on-end ended: the daemon's log is root's, this is the owner's view of it.
  if (s.on_end) {
    std::cout << "on-end: " << s.on_end->outcome
              << (s.on_end->stderr_head.empty() ? "" : ": " + s.on_end->stderr_head) << "\n";
  }
}

}  // namespace

// The asking user's use against the per-user limits, two lines that fit 80 columns:
//   you: 3 jobs, 1,204 queued runs, 2 GPUs in use
//   limits: 1,000 jobs, 1,000,000 runs, no GPU cap, --timeout up to 1,800 s
std::string UseLines(const UserUse& u) {
  std::string out =
      "you: " + GroupThousands(u.jobs) + (u.jobs == 1 ? " active job, " : " active jobs, ") +
      GroupThousands(u.queued_runs) + (u.queued_runs == 1 ? " queued run, " : " queued runs, ") +
      GroupThousands(u.gpus_in_use) + (u.gpus_in_use == 1 ? " GPU in use\n" : " GPUs in use\n");
  const std::string gpus = u.max_gpus > 0 ? GroupThousands(u.max_gpus) +
                                                (u.max_gpus == 1 ? " GPU" : " GPUs") + " at once"
                                          : std::string("no GPU cap");
  if (u.admin) return out + "limits (admin): no job or run cap, " + gpus + ", any --timeout\n";
  out += "limits: ";
  out +=
      u.max_jobs > 0 ? GroupThousands(u.max_jobs) + " active jobs, " : std::string("no job cap, ");
  out += u.max_queued_runs > 0 ? GroupThousands(u.max_queued_runs) + " runs, "
                               : std::string("no run cap, ");
  out += gpus + ", --timeout ";
  out += u.max_timeout_s > 0 ? "up to " + GroupThousands(std::llround(u.max_timeout_s)) + " s"
                             : std::string("any");
  if (u.max_job_timeout_s > 0) {
    out += ", --job-timeout up to " + GroupThousands(std::llround(u.max_job_timeout_s)) + " s";
  }
  out += "\n";
  return out;
}

int RunStatusCommand(const GlobalOptions& global, const Args& args, bool list_mode) {
  const std::string cmd = list_mode ? "list" : "status";
  std::vector<std::string> jobs;
  bool json_out = false, all = false, wide = false;
  ArgParser p("ckprof " + cmd,
              list_mode ? "List the daemon's jobs: active ones, or all with --all; --mine, --user, "
                          "--state, --name, --since and --limit pick some (as squeue and sacct "
                          "do). "
                          "The last line is your use against the daemon's per-user limits."
                        : "Show jobs (JOB...), or every job the daemon knows and your use "
                          "against its per-user limits (jobs, queued runs, GPUs at once, "
                          "--timeout). A job that does not exist is reported (exit 1) and the "
                          "others are shown.",
              list_mode ? "ELAPSED runs from the job's first start to its end (or now); ENDED is "
                          "when it ended.\n\nexample:\n  ckprof list --mine --since 7d\n  "
                          "ckprof list --state finished,cancelled --limit 20\n  ckprof list "
                          "--state held\n  ckprof list "
                          "--all --json"
                        : "--json prints one object, whatever is asked: {\"jobs\": [...], "
                          "\"you\": {...}}: the jobs (those named, in their order), and without "
                          "a job named your jobs, queued_runs and gpus_in_use and the limits "
                          "max_jobs, max_queued_runs, max_gpus, max_timeout_s (null: none; "
                          "\"you\" is null when jobs are named).\n\n"
                          "example:\n  ckprof status 12\n  ckprof status 12 13 --json\n"
                          "  ckprof status 12 --json | jq '.jobs[0].state'\n"
                          "  ckprof status --json");
  if (!list_mode) p.Positionals("JOB", &jobs, false, "job ids");
  JobFilterArgs picked;
  if (list_mode) {
    p.Flag("--all", &all, "include finished and cancelled jobs");
    AddJobFilterOptions(p, &picked, /*with_since_limit=*/true);
  }
  p.Flag("--json", &json_out, "print JSON for scripts");
  p.Flag("--wide", &wide,
         "never shorten a name or an owner (the table fits the terminal otherwise)");
  if (auto code = p.Parse(args)) return *code;
  int bad = 0;
  const std::optional<JobFilter> filter = ReadJobFilter(picked, cmd, &bad);
  if (!filter) return bad;
  if (filter->wants_ended()) all = true;
  const auto parsed_ids = ParseJobIds(jobs, cmd);
  if (!parsed_ids) return 2;
  const std::vector<int64_t>& ids = *parsed_ids;
  StatusRequest r;  // list's has the same fields
  r.all = all;
  if (ids.empty()) {
    StatusReply a;
    if (int code = list_mode ? Ask(global, cmd, ListRequest{r}, &a) : Ask(global, cmd, r, &a)) {
      return code;
    }
    if (filter->any()) a.jobs = filter->Apply(std::move(a.jobs));
    if (json_out && !list_mode) {
      // status: one shape, the jobs and your use; list --json stays the list of jobs.
      json out = {{"jobs", JobsJson(a.jobs)}, {"you", a.you ? ToJson(*a.you) : json(nullptr)}};
      std::cout << JsonForTerminal(out.dump(2)) << "\n";
    } else if (json_out) {
      std::cout << JsonForTerminal(JobsJson(a.jobs).dump(2)) << "\n";
    } else {
      PrintJobTable(a.jobs, TerminalWidth(wide));
      if (a.jobs.empty() && !all) {
        std::cout << "(jobs that ended are listed with --all, or --state finished,cancelled)\n";
      }
      if (a.you) std::cout << UseLines(*a.you);
    }
    return 0;
  }
  // The jobs asked for, each in turn; the worst end wins, as for wait.
  int worst = 0;
  std::vector<JobSummary> summaries;
  for (int64_t id : ids) {
    r.job_id = id;
    StatusReply a;
    const int code = list_mode ? Ask(global, cmd, ListRequest{r}, &a) : Ask(global, cmd, r, &a);
    worst = std::max(worst, code);
    if (code == kExitUnreachable) return code;
    if (code == 0 && a.job) summaries.push_back(std::move(*a.job));
  }
  if (json_out) {
    // One shape for status, whatever is asked: {"jobs": [...], "you": ...}, here the jobs
    // found in the order named (one job: a list of one) and no use.
    const json out = {{"jobs", JobsJson(summaries)}, {"you", nullptr}};
    std::cout << JsonForTerminal(out.dump(2)) << "\n";
    return worst;
  }
  if (summaries.empty()) return worst;
  PrintJobTable(summaries, TerminalWidth(wide));
  for (const auto& s : summaries) {
    if (summaries.size() > 1) std::cout << "\njob " << s.id << ":\n";
    PrintJobDetails(s);
    std::cout << "profiler: " << EscapeControl(s.profiler) << "\n";
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

namespace {

// Under a remote executor (Slurm): the cluster's GPU nodes, then our tasks there (node, GPU),
// named by the executor the daemon reports ("slurm": "SLURM JOB", "in Slurm").
void PrintClusterGpus(const GpusReply& a, bool wide) {
  std::string shown = a.executor;  // "Slurm"
  if (!shown.empty())
    shown[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(shown[0])));
  std::string upper = a.executor;  // "SLURM"
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  std::cout << "executor: " << a.executor << " (" << a.gpus.size() << " tasks in flight at most)\n";
  TextTable nodes({{"NODE"}, {"STATE"}, {"PARTITIONS"}, {"GPUS"}, {"IN USE"}, {"OURS", true}});
  for (const ClusterNode& n : a.cluster) {
    int ours = 0;
    for (const GpuInfo& g : a.gpus) ours += g.task_id && g.placement && g.placement->node == n.name;
    nodes.AddRow({n.name, n.state, n.partitions, n.gres, n.gres_used, std::to_string(ours)});
  }
  if (a.cluster.empty()) {
    std::cout << "(sinfo has not answered yet)\n";
  } else {
    std::cout << nodes.Render(TerminalWidth(wide));
  }
  TextTable runs({{upper + " JOB", true},
                  {"STATE"},
                  {"NODE"},
                  {"GPU"},
                  {"JOB", true},
                  {"TASK", true},
                  {"OWNER", false, true, 8},
                  {"FOR", true}});
  size_t n = 0;
  for (const GpuInfo& g : a.gpus) {
    if (!g.task_id) continue;
    ++n;
    const Placement none;
    const Placement& at = g.placement ? *g.placement : none;
    auto or_dash = [](const std::string& text) { return text.empty() ? "-" : text; };
    runs.AddRow({at.job_id ? std::to_string(at.job_id) : "-", or_dash(at.state), or_dash(at.node),
                 or_dash(at.granted), std::to_string(g.job_id), "#" + std::to_string(g.position),
                 g.owner.empty() ? std::to_string(g.owner_uid) : g.owner, FormatAge(g.busy_since)});
  }
  std::cout << "\n" << n << " of our tasks in " << shown << (n ? ":\n" : "\n");
  if (n) std::cout << runs.Render(TerminalWidth(wide));
  if (a.allocations.empty()) return;
  // The allocation mode: the allocations our tasks run in, each one user's.
  TextTable allocs({{upper + " JOB", true},
                    {"ALLOCATION"},
                    {"USER", false, true, 8},
                    {"STATE"},
                    {"NODE"},
                    {"GPUS"},
                    {"RUNNING", true},
                    {"TASKS RUN", true},
                    {"TIME LEFT", true}});
  for (const AllocationInfo& al : a.allocations) {
    auto or_dash = [](const std::string& text) { return text.empty() ? "-" : text; };
    allocs.AddRow({al.job_id ? std::to_string(al.job_id) : "-", al.name,
                   al.user.empty() ? std::to_string(al.uid) : al.user, al.state, or_dash(al.node),
                   or_dash(al.gpus), std::to_string(al.running), std::to_string(al.tasks_run),
                   al.time_left_s ? FormatDuration(*al.time_left_s) : "-"});
  }
  std::cout << "\n"
            << a.allocations.size() << " allocation(s) in " << shown << ":\n"
            << allocs.Render(TerminalWidth(wide));
}

}  // namespace

int RunGpusCommand(const GlobalOptions& global, const Args& args) {
  bool json_out = false, wide = false;
  ArgParser p("ckprof gpus",
              "Show the daemon's GPUs: which task each one runs, drained or not (and why), and the "
              "processes that are none of the daemon's on them (foreign: such a GPU waits for "
              "them to leave, under the daemon's foreign_gpu_use \"wait\"). Under the Slurm "
              "executor: the cluster's GPU nodes (sinfo) and where each of our tasks runs "
              "(Slurm job, node, GPU).",
              "MODEL, UTIL (utilisation) and TEMP are shown where the daemon reads GPU state (its "
              "GPU watch: the AMD KFD's sysfs, or nvidia-smi); OWNER is the running task's.\n\n"
              "example:\n  ckprof gpus --json");
  p.Flag("--json", &json_out, "print JSON for scripts");
  p.Flag("--wide", &wide, "never shorten a model, an owner or a note");
  if (auto code = p.Parse(args)) return *code;
  GpusRequest r;
  GpusReply a;
  if (int code = Ask(global, "gpus", r, &a)) return code;
  const bool remote = a.executor != "local";  // slots, and the cluster they run on
  if (json_out && remote) {
    // The slots and the cluster: an object (the local executor's JSON stays a list of GPUs).
    json out = {{"executor", a.executor}, {"gpus", json::array()}, {"cluster", json::array()}};
    for (const auto& g : a.gpus) out["gpus"].push_back(ToJson(g));
    for (const auto& n : a.cluster) {
      out["cluster"].push_back({{"name", n.name},
                                {"state", n.state},
                                {"partitions", n.partitions},
                                {"gres", n.gres},
                                {"gres_used", n.gres_used}});
    }
    if (!a.allocations.empty()) {
      out["allocations"] = json::array();
      for (const auto& al : a.allocations) out["allocations"].push_back(ToJson(al));
    }
    std::cout << JsonForTerminal(out.dump(2)) << "\n";
    return 0;
  }
  if (json_out) {
    json out = json::array();
    for (const auto& g : a.gpus) out.push_back(ToJson(g));
    std::cout << JsonForTerminal(out.dump(2)) << "\n";
    return 0;
  }
  if (remote) {
    PrintClusterGpus(a, wide);
    return 0;
  }
  // MODEL and UTIL/TEMP where the daemon reads GPU state (a GPU watch); notes after the row.
  TextTable table({{"GPU", true},
                   {"STATE"},
                   {"MODEL", false, true, 8},
                   {"JOB", true},
                   {"TASK", true},
                   {"OWNER", false, true, 8},
                   {"FOR", true},
                   {"RUNS", true},
                   {"UTIL", true},
                   {"TEMP", true},
                   {"NOTE", false, true, 20}});
  for (const GpuInfo& g : a.gpus) {
    std::string state =
        g.drained ? (g.task_id ? "draining" : "drained") : (g.task_id ? "busy" : "idle");
    if (!g.task_id && !g.held_by.empty()) state = "waiting";
    if (!g.task_id && !g.drained && !g.foreign.empty()) state = "foreign";
    std::string note;
    if (!g.held_by.empty()) note = "its host lock is held by " + g.held_by;
    if (!g.drain_reason.empty()) {
      note += (note.empty() ? "" : "; ") + EscapeControl(g.drain_reason) +
              (g.drained_at > 0 ? " (since " + FormatClock(g.drained_at) + ")" : "");
    }
    if (!g.foreign.empty()) {
      std::string who;
      for (const auto& u : g.foreign) who += (who.empty() ? "" : ", ") + u.Describe();
      note += (note.empty() ? "" : "; ") + std::string("busy: ") + who;
    }
    const std::optional<GpuReading>& r = g.reading;
    table.AddRow({std::to_string(g.index), state, g.model.empty() ? "-" : g.model,
                  g.job_id ? std::to_string(g.job_id) : "-",
                  g.task_id ? "#" + std::to_string(g.position) : "-",
                  g.task_id ? (g.owner.empty() ? std::to_string(g.owner_uid) : g.owner) : "-",
                  g.task_id ? FormatAge(g.busy_since) : "-", std::to_string(g.tasks_run),
                  r && r->busy_percent ? FormatNumber(*r->busy_percent, 3) + "%" : "-",
                  r && r->temperature_c ? FormatNumber(*r->temperature_c, 3) + "C" : "-",
                  note.empty() ? "" : note});
  }
  std::cout << table.Render(TerminalWidth(wide));
  return 0;
}

}  // namespace ckprof

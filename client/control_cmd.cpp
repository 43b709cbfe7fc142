// ckprof cancel / retry / boost / hold / release / drain / resume / ping: act on jobs and GPUs.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <regex>

#include "client/args.h"
#include "client/client_util.h"
#include "client/commands.h"
#include "client/job_filter.h"
#include "client/job_options.h"
#include "common/terminal_text.h"
#include "common/text_table.h"

namespace ckprof {
namespace {

// A task of a job by its #N: "3" or "#3"; nullopt (after printing why) else.
std::optional<int> ParseTaskNumber(const std::string& text, const std::string& cmd) {
  static const std::regex num(R"(#?\d{1,9})");
  if (std::regex_match(text, num)) {
    const int v = std::stoi(text[0] == '#' ? text.substr(1) : text);
    if (v > 0) return v;
  }
  PrintError(cmd,
             "TASK must be a task's #N (as 'ckprof watch' and 'results' show it), e.g. 3 "
             "or '#3', got '" +
                 text + "'");
  return std::nullopt;
}

// "7" (the whole job) or "7#3" / "7#3,5" (those of its tasks).
struct JobAndTasks {
  int64_t job = 0;
  std::vector<int> tasks;  // empty: the whole job
};
std::optional<JobAndTasks> ParseJobAndTasks(const std::string& text, const std::string& cmd) {
  const size_t hash = text.find('#');
  JobAndTasks out;
  auto id = ParseJobId(text.substr(0, hash), cmd);
  if (!id) return std::nullopt;
  out.job = *id;
  if (hash == std::string::npos) return out;
  const std::string list = text.substr(hash + 1);
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    auto n = ParseTaskNumber(list.substr(at, comma - at), cmd);
    if (!n) return std::nullopt;
    out.tasks.push_back(*n);
    at = comma + 1;
  }
  return out;
}

// Cancels each job (or its tasks) in turn, saying what became of each (with `json_out`, a JSON
// array of {"job_id", "tasks", "cancelled", "job" or "error"}). The worst end wins, as for
// wait: unreachable (2) over a refusal (1, e.g. a job that already ended) over success (0).
int CancelJobs(const GlobalOptions& global, const std::vector<JobAndTasks>& what, bool json_out) {
  int worst = 0;
  nlohmann::json out = nlohmann::json::array();
  for (const JobAndTasks& w : what) {
    CancelRequest r;
    r.job_id = w.job;
    r.tasks = w.tasks;
    JobReply a;
    std::string error;
    const int code = Ask(global, "cancel", r, &a, &error);
    if (json_out) {
      nlohmann::json j = {{"job_id", w.job}, {"tasks", w.tasks}, {"cancelled", code == 0}};
      if (code == 0 && a.job) j["job"] = ToJson(*a.job);
      if (code != 0) j["error"] = error;
      out.push_back(std::move(j));
    } else if (code == 0 && w.tasks.empty()) {
      std::cout << "job " << w.job << " cancelled\n";
    } else if (code == 0) {
      std::cout << "job " << w.job << ": " << TaskListText(w.tasks) << " cancelled\n";
    }
    worst = std::max(worst, code);
    if (code == kExitUnreachable) break;  // the rest cannot be cancelled either
  }
  if (json_out) std::cout << JsonForTerminal(out.dump(2)) << "\n";
  return worst;
}

// cancel --mine|--user|--state|--name: the active jobs the filter picks (the caller's own
// unless --user names another), listed and, on a terminal without --yes, confirmed; then
// cancelled as CancelJobs does. `dry_run`: listed only.
int CancelPicked(const GlobalOptions& global, JobFilter filter, bool yes, bool dry_run,
                 bool json_out) {
  if (filter.user.empty()) filter.uid = static_cast<uint32_t>(geteuid());
  ListRequest r;
  StatusReply a;
  if (int code = Ask(global, "cancel", r, &a)) return code;
  std::vector<JobSummary> picked;
  for (JobSummary& j : filter.Apply(std::move(a.jobs))) {
    if (!IsEnded(j.state) && j.state != JobState::kCancelling) picked.push_back(std::move(j));
  }
  if (picked.empty()) {
    if (json_out) {
      std::cout << "[]\n";
    } else {
      std::cout << "no job that has not ended matches: nothing to cancel\n";
    }
    return 0;
  }
  const std::string count = std::to_string(picked.size()) + (picked.size() == 1 ? " job" : " jobs");
  if (dry_run || (!yes && !json_out && isatty(STDIN_FILENO) == 1)) {
    std::ostream& out = dry_run ? std::cout : std::cerr;
    for (const JobSummary& j : picked) {
      out << "  " << j.id << "  " << EscapeControl(j.owner) << "  " << EscapeControl(j.name) << "  "
          << EnumName(j.state) << "\n";
    }
    if (dry_run) {
      std::cout << "would cancel " << count << " (--dry-run: nothing cancelled)\n";
      return 0;
    }
    std::cerr << "cancel " << count << "? [y/N] " << std::flush;
    std::string answer;
    if (!std::getline(std::cin, answer)) answer.clear();
    if (answer != "y" && answer != "Y" && answer != "yes" && answer != "YES") {
      std::cout << "nothing cancelled\n";
      return 1;
    }
  }
  std::vector<JobAndTasks> what;
  for (const JobSummary& j : picked) what.push_back(JobAndTasks{j.id, {}});
  return CancelJobs(global, what, json_out);
}

}  // namespace

int RunJobActionCommand(const GlobalOptions& global, const Args& args, RequestType type) {
  const std::string cmd(RequestTypeName(type));
  std::string job, priority, timeout, profiler;
  std::vector<std::string> jobs;   // cancel: several
  std::vector<std::string> tasks;  // retry: some of the job's tasks
  bool failed_only = false;
  std::string summary = type == RequestType::kCancel
                            ? "Cancel jobs: their queued tasks are dropped and their running "
                              "profilers stopped. Only the owner or an admin may. A job that "
                              "has ended is left as it is (exit 1); with several jobs the worst "
                              "end wins. --mine, --user, --state and --name pick the jobs "
                              "instead (as scancel does; yours unless --user names another): "
                              "on a terminal cancel lists them and asks first; --yes (or stdin "
                              "not a terminal, as in a script) does not ask."
                        : type == RequestType::kRetry
                            ? "Requeue a job's tasks that failed, crashed, timed out, could not "
                              "start, were interrupted or cancelled; with TASKs, those tasks "
                              "however they ended (a success is measured again). --timeout and "
                              "--profiler-path change the job's settings for every task that "
                              "starts from now on. A large job's tasks are queued again a step "
                              "at a time over the next seconds: the answer says so, and 'ckprof "
                              "status JOB' shows how far."
                            : "Set a job's priority (admins only).";
  ArgParser p("ckprof " + cmd, summary,
              type == RequestType::kCancel
                  ? "JOB#N cancels task #N of the job alone (#N as 'watch' and 'results' show "
                    "it; every run of a repeated config), JOB#N,M several.\n\nexample:\n  "
                    "ckprof cancel 12 13\n  ckprof cancel 12#3,7\n  ckprof cancel --mine "
                    "--state queued,held --name 'resnet-*' --dry-run"
              : type == RequestType::kRetry
                  ? "A TASK is a task's #N: 3, or '#3' quoted (an unquoted # starts a comment "
                    "in the shell).\n\nexample:\n  ckprof retry 12\n  ckprof retry 12 --failed "
                    "--timeout 3600\n  ckprof retry 12 3 7 --profiler-path /opt/ck-new/bin"
                  : "example:\n  ckprof boost 12 100");
  JobFilterArgs picked;
  bool yes = false, dry_run = false;
  if (type == RequestType::kCancel) {
    p.Positionals("JOB", &jobs, false, "the job ids, or JOB#N for a task of the job");
    AddJobFilterOptions(p, &picked, /*with_since_limit=*/false);
    p.Flag("--yes", &yes, "do not ask on a terminal");
    p.Flag("--dry-run", &dry_run, "list the jobs --mine/--user/--state/--name pick; cancel none");
  } else {
    p.Positional("JOB", &job, true, "the job id");
  }
  if (type == RequestType::kRetry) {
    p.Positionals("TASK", &tasks, false, "only these tasks of the job, by #N");
    p.Flag("--failed", &failed_only,
           "only tasks that failed, crashed or timed out (not cancelled or unsupported ones)");
    p.Option("--timeout", &timeout, "S",
             "the job's new per-task timeout in seconds (at most the daemon's max_timeout; 0 = "
             "none, admins only)");
    p.Option("--profiler-path", &profiler, "P", "the job's new profiler (as submit takes it)");
  }
  if (type == RequestType::kBoost) p.Positional("PRIORITY", &priority, true, PriorityRange());
  bool json_out = false;
  p.Flag("--json", &json_out, "print the outcome as JSON");
  if (auto code = p.Parse(args)) return *code;
  if (type == RequestType::kCancel) {
    int bad = 0;
    const std::optional<JobFilter> filter = ReadJobFilter(picked, cmd, &bad);
    if (!filter) return bad;
    if (filter->any() == !jobs.empty()) {
      PrintError(cmd, jobs.empty() ? "name the jobs to cancel, or pick them with --mine, --user, "
                                     "--state or --name"
                                   : "name jobs, or pick them with --mine, --user, --state or "
                                     "--name, not both");
      return 2;
    }
    if (filter->any()) return CancelPicked(global, *filter, yes, dry_run, json_out);
    if (dry_run || yes) {
      PrintError(cmd, "--dry-run and --yes go with --mine, --user, --state or --name");
      return 2;
    }
    std::vector<JobAndTasks> what;
    for (const auto& text : jobs) {
      auto w = ParseJobAndTasks(text, cmd);
      if (!w) return 2;
      what.push_back(std::move(*w));
    }
    return CancelJobs(global, what, json_out);
  }
  auto id = ParseJobId(job, cmd);
  if (!id) return 2;
  RetryRequest r;  // retry's request; boost's: b
  BoostRequest b;
  r.job_id = b.job_id = *id;
  if (type == RequestType::kRetry) {
    for (const auto& text : tasks) {
      auto n = ParseTaskNumber(text, cmd);
      if (!n) return 2;
      r.tasks.push_back(*n);
    }
    r.failed_only = failed_only;
    if (!timeout.empty()) {
      auto t = ReadTimeout(timeout, /*takes_default=*/false);
      if (!t) {
        PrintError(cmd, t.error());
        return 2;
      }
      r.timeout_s = *t;
    }
    r.profiler_path = AbsolutePath(profiler);
  }
  if (type == RequestType::kBoost) {
    auto value = ParsePriorityArg(priority, "PRIORITY", cmd);
    if (!value) return 2;
    b.priority = *value;
  }
  JobReply a;
  if (int code = type == RequestType::kBoost ? Ask(global, cmd, b, &a) : Ask(global, cmd, r, &a)) {
    return code;
  }
  if (json_out) {
    nlohmann::json j = ReplyJson(a);
    j["job_id"] = *id;
    if (type == RequestType::kBoost) j["priority"] = b.priority;
    std::cout << JsonForTerminal(j.dump(2)) << "\n";
    return 0;
  }
  if (type == RequestType::kRetry) {
    std::cout << "job " << *id << ": " << a.requeued.value_or(0)
              << (a.in_steps ? " task(s) being queued again, a step at a time (they start as "
                               "they are queued; 'ckprof status " +
                                   std::to_string(*id) + "' shows how far)"
                             : " task(s) requeued");
    if (!timeout.empty() || !profiler.empty()) {
      std::cout << " (" << (timeout.empty() ? "" : "timeout " + timeout + " s")
                << (!timeout.empty() && !profiler.empty() ? ", " : "")
                << (profiler.empty() ? "" : "profiler " + r.profiler_path) << ")";
    }
    std::cout << "\n";
  }
  if (type == RequestType::kBoost)
    std::cout << "job " << *id << ": priority " << b.priority << "\n";
  return 0;
}

int RunHoldCommand(const GlobalOptions& global, const Args& args, bool hold) {
  const std::string cmd = hold ? "hold" : "release";
  std::vector<std::string> jobs;
  bool json_out = false;
  ArgParser p("ckprof " + cmd,
              hold ? "Hold jobs: their queued tasks do not start until 'ckprof release' (those "
                     "running finish; the job keeps its place in the queue). Only the owner or "
                     "an admin may; a job held by an admin is released by an admin (an admin's "
                     "hold takes over its owner's). Holding a held job otherwise leaves it as it "
                     "is. With several jobs the worst end wins."
                   : "Release held jobs: their queued tasks may start again. Whoever held a job, "
                     "or an admin, may release it. With several jobs the worst end wins.",
              hold ? "'ckprof status' says \"held by NAME\"; 'ckprof list --state held' lists "
                     "them.\n\nexample:\n  ckprof hold 12 13\n  ckprof release 12"
                   : "example:\n  ckprof release 12 13");
  p.Positionals("JOB", &jobs, true, "the job ids");
  p.Flag("--json", &json_out,
         std::string("print a JSON array: each job's {\"job_id\", \"") +
             (hold ? "held" : "released") + "\", \"job\" or \"error\"}");
  if (auto code = p.Parse(args)) return *code;
  const auto parsed_ids = ParseJobIds(jobs, cmd);
  if (!parsed_ids) return 2;
  const std::vector<int64_t>& ids = *parsed_ids;
  int worst = 0;
  nlohmann::json out = nlohmann::json::array();
  for (int64_t id : ids) {
    HoldRequest r;  // release's has the same fields
    r.job_id = id;
    JobReply a;
    std::string error;
    const int code =
        hold ? Ask(global, cmd, r, &a, &error) : Ask(global, cmd, ReleaseRequest{r}, &a, &error);
    if (json_out) {
      nlohmann::json j = {{"job_id", id}, {hold ? "held" : "released", code == 0}};
      if (code == 0 && a.job) j["job"] = ToJson(*a.job);
      if (code != 0) j["error"] = error;
      out.push_back(std::move(j));
    } else if (code == 0) {
      std::cout << "job " << id << (hold ? " held" : " released") << "\n";
    }
    worst = std::max(worst, code);
    if (code == kExitUnreachable) break;  // the rest cannot be reached either
  }
  if (json_out) std::cout << JsonForTerminal(out.dump(2)) << "\n";
  return worst;
}

int RunGpuActionCommand(const GlobalOptions& global, const Args& args, bool drain) {
  const std::string cmd = drain ? "drain" : "resume";
  std::string gpu;
  std::string reason;
  ArgParser p("ckprof " + cmd,
              drain ? "Drain a GPU (admins): it finishes its current task and takes no more, "
                      "until resumed; kept across ckprofd restarts, with who, when and why "
                      "('ckprof gpus')."
                    : "Resume a drained GPU (admins): an admin's drain or one for its health.",
              drain ? "example:\n  ckprof drain 3 --reason 'fan failing, ticket 4711'"
                    : "example:\n  ckprof resume 3");
  p.Positional("GPU", &gpu, true, "the GPU index");
  if (drain) p.Option("--reason", &reason, "TEXT", "why, for 'ckprof gpus' (one line)");
  bool json_out = false;
  p.Flag("--json", &json_out, "print the outcome as JSON");
  if (auto code = p.Parse(args)) return *code;
  if (reason.find('\n') != std::string::npos || reason.size() > 1024) {
    PrintError(cmd, "--reason must be one line of at most 1024 bytes");
    return 2;
  }
  static const std::regex num(R"(\d{1,4})");
  if (!std::regex_match(gpu, num)) {
    PrintError(cmd, "GPU must be a GPU index such as 0 (see 'ckprof gpus'), got '" + gpu + "'");
    return 2;
  }
  DrainRequest r;  // resume's has the same fields
  r.gpu = std::stoi(gpu);
  r.reason = reason;
  EmptyReply a;
  if (int code = drain ? Ask(global, cmd, r, &a) : Ask(global, cmd, ResumeRequest{r}, &a)) {
    return code;
  }
  if (json_out) {
    nlohmann::json out{{"gpu", r.gpu}, {"drained", drain}};
    if (!reason.empty()) out["reason"] = reason;
    std::cout << JsonForTerminal(out.dump(2)) << "\n";
    return 0;
  }
  std::cout << "GPU " << r.gpu << (drain ? " drained" : " resumed") << "\n";
  return 0;
}

int RunPingCommand(const GlobalOptions& global, const Args& args) {
  ArgParser p("ckprof ping", "Check that ckprofd answers, and who it thinks you are.",
              "example:\n  ckprof --socket /tmp/ckprofd.sock ping");
  bool json_out = false;
  p.Flag("--json", &json_out, "print the daemon's hello (version, protocol, who you are) as JSON");
  if (auto code = p.Parse(args)) return *code;
  PingRequest r;
  HelloReply a;
  if (int code = Ask(global, "ping", r, &a)) return code;
  if (json_out) {
    nlohmann::json j = ReplyJson(a);
    j["socket"] = ResolveSocketPath(global.socket);
    std::cout << JsonForTerminal(j.dump(2)) << "\n";
    return 0;
  }
  std::cout << (a.server.empty() ? "ckprofd" : a.server) << " at "
            << ResolveSocketPath(global.socket) << ": you are " << a.user << " (uid " << a.uid
            << ")" << (a.admin ? ", admin" : "") << "\n";
  return 0;
}

}  // namespace ckprof

// ckprof edit / clean: change a job that has not ended; remove ended ones.
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <regex>

#include "client/args.h"
#include "client/client_util.h"
#include "client/commands.h"
#include "common/terminal_text.h"

namespace ckprof {

int RunEditCommand(const GlobalOptions& global, const Args& args) {
  std::string job, priority, not_before, gpus, max_gpus, timeout, name;
  bool json_out = false;
  ArgParser p("ckprof edit",
              "Change a job's settings. Its owner may change work that has not ended and lower "
              "its priority (not raise it above 0, the default); admins anything. Changes take "
              "effect at the next pick (a running task goes on as it started) and are logged by "
              "ckprofd.",
              "example:\n  ckprof edit 12 --priority -5 --not-before +2h\n  ckprof edit 12 "
              "--gpus 2-3 --max-gpus 1 --timeout 600\n  ckprof edit 12 --not-before now --name "
              "resnet-fp16");
  p.Positional("JOB", &job, true, "the job id");
  p.Option("--priority", &priority, "P", "order among your own jobs, -1000..1000, higher first");
  p.Option("--not-before", &not_before, "TIME",
           "start no earlier than TIME: 2026-12-01T02:00, +30m, +2h, or now");
  p.Option("--gpus", &gpus, "LIST", "GPUs the job may use, e.g. 0,1 or 0-3; 'any' for all");
  p.Option("--max-gpus", &max_gpus, "M", "at most M GPUs at once; 0 for no limit");
  p.Option("--timeout", &timeout, "S",
           "seconds one profiler run may take from now on (0 = none, 'default': the daemon's)");
  p.Option("--name", &name, "N", "the job's name (also of a job that has ended)");
  p.Flag("--json", &json_out, "print the job as it is now as JSON");
  if (auto code = p.Parse(args)) return *code;
  auto id = ParseJobId(job, "edit");
  if (!id) return 2;
  Request r;
  r.type = RequestType::kEdit;
  r.job_id = *id;
  EditOptions& e = r.edit;
  static const std::regex integer(R"(-?\d{1,9})");
  if (p.Given("--priority")) {
    if (!std::regex_match(priority, integer) || std::abs(std::stoi(priority)) > 1000) {
      PrintError("edit",
                 "--priority must be an integer from -1000 to 1000, got '" + priority + "'");
      return 2;
    }
    e.priority = std::stoi(priority);
  }
  if (p.Given("--not-before")) {
    auto t = ParseTime(not_before);
    if (!t) {
      PrintError("edit", "--not-before must be a time such as 2026-12-01T02:00, +2h or now, got '" +
                             not_before + "'");
      return 2;
    }
    e.not_before = *t;
  }
  if (p.Given("--gpus")) {
    if (gpus == "any" || gpus == "all") {
      e.gpus = std::vector<int>{};
    } else {
      auto list = ParseGpuListArg(gpus, "edit");
      if (!list) return 2;
      e.gpus = *list;
    }
  }
  if (p.Given("--max-gpus")) {
    if (!std::regex_match(max_gpus, integer) || std::stoi(max_gpus) < 0 ||
        std::stoi(max_gpus) > 1024) {
      PrintError("edit",
                 "--max-gpus must be an integer from 0 (no limit) to 1024, got '" + max_gpus + "'");
      return 2;
    }
    e.max_gpus = std::stoi(max_gpus);
  }
  if (p.Given("--timeout")) {
    char* end = nullptr;
    const double t = std::strtod(timeout.c_str(), &end);
    if (timeout == "default") {
      e.timeout_s = -1;
    } else if (timeout.empty() || *end != '\0' || !(t >= 0) || !std::isfinite(t) || t > 1e7) {
      PrintError("edit",
                 "--timeout must be a number of seconds >= 0 or 'default', got '" + timeout + "'");
      return 2;
    } else {
      e.timeout_s = t;
    }
  }
  if (p.Given("--name")) {
    if (name.empty() || name.size() > 256) {
      PrintError("edit", "--name must be 1 to 256 characters");
      return 2;
    }
    e.name = name;
  }
  if (e.empty()) {
    PrintError("edit",
               "nothing to change: give --priority, --not-before, --gpus, --max-gpus, "
               "--timeout or --name (see 'ckprof edit --help')");
    return 2;
  }
  JobReply a;
  if (int code = Ask(global, "edit", r, &a)) return code;
  if (json_out) {
    nlohmann::json j = ReplyJson(a);
    j["job_id"] = *id;
    std::cout << JsonForTerminal(j.dump(2)) << "\n";
    return 0;
  }
  std::cout << "job " << *id << " edited";
  if (a.job) {
    const JobSummary& s = *a.job;
    std::cout << ": priority " << s.priority << ", GPUs "
              << (s.allowed_gpus.empty() ? std::string("any") : [&] {
                   std::string list;
                   for (int g : s.allowed_gpus) list += (list.empty() ? "" : ",") + std::to_string(g);
                   return list;
                 }())
              << (s.max_gpus > 0 ? " (at most " + std::to_string(s.max_gpus) + ")" : "")
              << ", timeout " << (s.timeout_s > 0 ? FormatDuration(s.timeout_s) : "none")
              << (s.not_before > static_cast<double>(std::time(nullptr))
                      ? ", not before " + FormatClock(s.not_before)
                      : "");
  }
  std::cout << "\n";
  return 0;
}

int RunCleanCommand(const GlobalOptions& global, const Args& args) {
  std::string older;
  bool all = false, json_out = false;
  ArgParser p("ckprof clean",
              "Remove your jobs that have ended (finished or cancelled), with their tasks and "
              "results; a job that has not ended is never removed. Admins: --all for everyone's.",
              "ckprofd also removes ended jobs keep_finished_days after they ended, where its "
              "config sets that.\n\nexample:\n  ckprof clean --older-than 7d");
  p.Option("--older-than", &older, "AGE",
           "only jobs that ended at least AGE ago: 90s, 30m, 12h, 7d, 2w (default: any)");
  p.Flag("--all", &all, "every user's ended jobs (admins)");
  p.Flag("--json", &json_out, "print the removed jobs' ids as JSON");
  if (auto code = p.Parse(args)) return *code;
  Request r;
  r.type = RequestType::kClean;
  r.all = all;
  if (!older.empty()) {
    auto span = ParseDurationArg(older);
    if (!span) {
      PrintError("clean",
                 "--older-than must be an age such as 7d, 12h or 30m, got '" + older + "'");
      return 2;
    }
    r.older_than_s = *span;
  }
  CleanReply a;
  if (int code = Ask(global, "clean", r, &a)) return code;
  if (json_out) {
    std::cout << JsonForTerminal(ReplyJson(a).dump(2)) << "\n";
    return 0;
  }
  if (a.removed.empty()) {
    std::cout << "no ended job" << (older.empty() ? "" : " older than " + older) << " to remove\n";
    return 0;
  }
  std::cout << a.removed.size() << " job(s) removed:";
  for (int64_t j : a.removed) std::cout << " " << j;
  std::cout << "\n";
  return 0;
}

}  // namespace ckprof

// ckprof edit / clean: change a job that has not ended; remove ended ones.
#include <unistd.h>

#include <ctime>
#include <iostream>

#include "client/args.h"
#include "client/client_util.h"
#include "client/commands.h"
#include "client/job_options.h"
#include "common/terminal_text.h"
#include "common/text_table.h"

namespace ckprof {

int RunEditCommand(const GlobalOptions& global, const Args& args) {
  std::string job, name;
  bool json_out = false;
  ArgParser p("ckprof edit",
              "Change a job's settings. Its owner may change work that has not ended: any "
              "priority (as at submit: it orders the owner's own jobs only), a --timeout up to "
              "the daemon's max_timeout ('ckprof status' shows it; 0, none, for admins only); "
              "admins anything. Changes take effect at the next pick (a running task goes on as "
              "it started) and are logged by ckprofd.",
              "example:\n  ckprof edit 12 --priority -5 --not-before +2h\n  ckprof edit 12 "
              "--gpus 2-3 --max-gpus 1 --timeout 600\n  ckprof edit 12 --not-before now --name "
              "resnet-fp16");
  p.Positional("JOB", &job, true, "the job id");
  JobOptions options(EditJobOptionRules(), &p);
  p.Option("--name", &name, "N", "the job's name (also of a job that has ended)");
  p.Flag("--json", &json_out, "print the job as it is now as JSON");
  if (auto code = p.Parse(args)) return *code;
  auto id = ParseJobId(job, "edit");
  if (!id) return 2;
  EditRequest r;
  r.job_id = *id;
  EditOptions& e = r.edit;
  auto settings = options.Read();
  if (!settings) {
    PrintError("edit", settings.error());
    return 2;
  }
  settings->ApplyTo(&e);
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

namespace {

// 3400 -> "3,400".
std::string Thousands(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0 && digits[i] != '-' && out.back() != '-') out += ',';
    out += digits[i];
  }
  return out;
}

// "12 ended jobs (3,400 results)".
std::string CleanCount(const CleanReply& a) {
  const size_t n = a.removed.size();
  return std::to_string(n) + " ended job" + (n == 1 ? "" : "s") + " (" + Thousands(a.results) +
         " result" + (a.results == 1 ? "" : "s") + ")";
}

// The jobs a clean removes (or would), as a table: at most `max_rows`, then how many more.
void PrintCleanJobs(const CleanReply& a, size_t max_rows, std::ostream& out) {
  TextTable table({{"JOB", true},
                   {"OWNER", false, true, 8},
                   {"NAME", false, true, 12},
                   {"STATE"},
                   {"TASKS", false, true, 16},
                   {"ENDED", true}});
  for (size_t i = 0; i < a.jobs.size() && i < max_rows; ++i) {
    const JobSummary& j = a.jobs[i];
    table.AddRow({std::to_string(j.id), j.owner, j.name, std::string(EnumName(j.state)),
                  JobCountsText(j), j.finished_at > 0 ? FormatClock(j.finished_at) : "-"});
  }
  out << table.Render(TerminalWidth(false));
  if (a.jobs.size() > max_rows) {
    out << "... and " << a.jobs.size() - max_rows << " more (--dry-run lists them all)\n";
  }
}

}  // namespace

int RunCleanCommand(const GlobalOptions& global, const Args& args) {
  std::string older;
  std::vector<std::string> jobs;
  bool all = false, json_out = false, dry_run = false, yes = false;
  ArgParser p("ckprof clean",
              "Remove ended jobs (finished or cancelled) with their tasks, results and their "
              "measurements in 'ckprof best': the jobs named, else every one of yours that has "
              "ended (--older-than: only older ones). A job that has not ended is never removed; "
              "naming one, or another user's job (unless you are an admin), removes nothing. On a "
              "terminal "
              "clean lists the jobs and asks first; --yes (or stdin not a terminal, as in a "
              "script) does not ask. Admins: --all for everyone's.",
              "ckprofd also removes ended jobs keep_finished_days after they ended, where its "
              "config sets that.\n\nexample:\n  ckprof clean 7 9\n  ckprof clean --older-than 7d "
              "--dry-run\n  ckprof clean --older-than 30d --yes");
  p.Positionals("JOB", &jobs, false, "the jobs to remove (default: every ended job of yours)");
  p.Option("--older-than", &older, "AGE",
           "only jobs that ended at least AGE ago: 90s, 30m, 12h, 7d, 2w (default: any)");
  p.Flag("--all", &all, "every user's ended jobs (admins)");
  p.Flag("--dry-run", &dry_run, "list the jobs that would be removed; remove nothing");
  p.Flag("--yes", &yes, "do not ask on a terminal");
  p.Flag("--json", &json_out,
         "print the removed jobs' ids (removed), their results counted and the jobs as JSON; "
         "never asks");
  if (auto code = p.Parse(args)) return *code;
  CleanRequest r;
  r.all = all;
  r.dry_run = dry_run;
  auto ids = ParseJobIds(jobs, "clean");
  if (!ids) return 2;
  r.job_ids = std::move(*ids);
  if (!r.job_ids.empty() && (all || !older.empty())) {
    PrintError("clean", "name jobs, or pick them with --older-than/--all, not both");
    return 2;
  }
  if (!older.empty()) {
    auto span = ParseDurationArg(older);
    if (!span) {
      PrintError("clean",
                 "--older-than must be an age such as 7d, 12h or 30m, got '" + older + "'");
      return 2;
    }
    r.older_than_s = *span;
  }
  const std::string none =
      "no ended job" + (older.empty() ? "" : " older than " + older) + " to remove";
  // On a terminal: what would go, counted, and a question; the answer removes those jobs (by
  // id: one that ends meanwhile is not taken along).
  if (!dry_run && !yes && !json_out && isatty(STDIN_FILENO) == 1) {
    CleanRequest ask = r;
    ask.dry_run = true;
    CleanReply would;
    if (int code = Ask(global, "clean", ask, &would)) return code;
    if (would.removed.empty()) {
      std::cout << none << "\n";
      return 0;
    }
    PrintCleanJobs(would, 20, std::cerr);
    std::cerr << "remove " << CleanCount(would) << "? [y/N] " << std::flush;
    std::string answer;
    if (!std::getline(std::cin, answer)) answer.clear();
    if (answer != "y" && answer != "Y" && answer != "yes" && answer != "YES") {
      std::cout << "nothing removed\n";
      return 1;
    }
    r.job_ids = would.removed;
    r.all = false;
    r.older_than_s = 0;
  }
  CleanReply a;
  if (int code = Ask(global, "clean", r, &a)) return code;
  if (json_out) {
    std::cout << JsonForTerminal(ReplyJson(a).dump(2)) << "\n";
    return 0;
  }
  if (a.removed.empty()) {
    std::cout << none << "\n";
    return 0;
  }
  if (dry_run) {
    PrintCleanJobs(a, a.jobs.size(), std::cout);
    std::cout << "would remove " << CleanCount(a) << " (--dry-run: nothing removed)\n";
    return 0;
  }
  std::cout << "removed " << CleanCount(a) << ":";
  for (int64_t j : a.removed) std::cout << " " << j;
  std::cout << "\n";
  return 0;
}

}  // namespace ckprof

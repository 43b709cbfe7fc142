// The Scheduler's notifications (ckprof submit --on-end, the config's on_job_end): a shell
// command run when a job ends, through the Launcher like a profiler (its own process group,
// a time limit, nothing left behind), never waited for.
#include <pwd.h>
#include <spdlog/spdlog.h>

#include "common/terminal_text.h"
#include "daemon/scheduler.h"

namespace ckprof {
namespace {

// The first line of a capture, for the log.
std::string FirstLine(const std::string& text) {
  const size_t start = text.find_first_not_of("\n");
  if (start == std::string::npos) return "";
  return text.substr(start, text.find('\n', start) - start);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> Scheduler::OnEndEnvironment(const Job& job) const {
  const JobSummary s = MakeSummary(job);
  const TaskCounts c = s.counts();
  // The name is the submitter's text and on_job_end is the admin's command, which may echo it to
  // a terminal or a mail: its control characters escaped, as every view shows them.
  return {{"CKPROF_JOB_ID", std::to_string(s.id)},
          {"CKPROF_JOB_NAME", EscapeControl(s.name)},
          {"CKPROF_JOB_STATE", std::string(EnumName(s.state))},
          {"CKPROF_JOB_OWNER", EscapeControl(s.owner)},
          {"CKPROF_TOTAL", std::to_string(s.total)},
          {"CKPROF_SUCCEEDED", std::to_string(c.succeeded)},
          {"CKPROF_FAILED", std::to_string(c.failed)},
          {"CKPROF_UNSUPPORTED", std::to_string(c.unsupported)},
          {"CKPROF_TIMED_OUT", std::to_string(c.timed_out)},
          {"CKPROF_CRASHED", std::to_string(c.crashed)},
          {"CKPROF_CANCELLED", std::to_string(c.cancelled)},
          {"CKPROF_COUNTS", c.Describe()}};
}

void Scheduler::RunOnEnd(const Job& job) {
  struct Callback {
    std::string command;
    bool as_owner;
    const char* what;
  };
  std::vector<Callback> callbacks;
  if (!job.rec.on_end.empty()) callbacks.push_back({job.rec.on_end, true, "--on-end"});
  if (!options_.on_job_end.empty()) callbacks.push_back({options_.on_job_end, false, "on_job_end"});
  for (const Callback& cb : callbacks) {
    RunSpec spec;
    spec.argv = {"/bin/sh", "-c", cb.command};
    spec.set_env = OnEndEnvironment(job);
    if (cb.as_owner) {
      spec.cwd = job.rec.cwd;
      if (options_.run_as_owner) {
        spec.uid = job.rec.uid;
        spec.gid = job.rec.gid;
        spec.groups = std::vector<gid_t>(job.rec.groups.begin(), job.rec.groups.end());
        spec.set_env.emplace_back("USER", job.rec.owner);
        spec.set_env.emplace_back("LOGNAME", job.rec.owner);
        if (const passwd* pw = getpwuid(job.rec.uid); pw && pw->pw_dir) {
          spec.set_env.emplace_back("HOME", pw->pw_dir);
        }
      }
    } else {
      spec.cwd = "/";
    }
    spec.timeout =
        std::chrono::milliseconds(static_cast<int64_t>(options_.on_end_timeout_s * 1000));
    spec.grace = std::chrono::milliseconds(1000);
    spec.capture_head = spec.capture_tail = 2048;
    const int64_t id = job.rec.id;
    const std::string what = cb.what, command = cb.command;
    launcher_.Start(std::move(spec), [id, what, command](RunResult r) {
      using Kind = Outcome::Kind;
      const Kind k = r.outcome.kind;
      const bool ok = k != Kind::kTimedOut && k != Kind::kCrashed && k != Kind::kSpawnFailed &&
                      k != Kind::kCancelled && k != Kind::kInterrupted && r.outcome.exit_code == 0;
      if (ok) {
        spdlog::info("job {}: {} ran in {:.1f} s", id, what, r.elapsed_s);
        return;
      }
      const std::string why = k == Kind::kTimedOut ? "timed out and was stopped"
                              : k == Kind::kCrashed || k == Kind::kSpawnFailed
                                  ? r.outcome.Summary()
                                  : "exited " + std::to_string(r.outcome.exit_code);
      const std::string err = FirstLine(r.stderr_capture);
      spdlog::warn("job {}: {} '{}' {}{}", id, what, command, why,
                   err.empty() ? "" : " (stderr: " + err + ")");
    });
    spdlog::info("job {}: running {} '{}'", id, what, command);
  }
}

}  // namespace ckprof

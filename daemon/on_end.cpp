// The Scheduler's notifications (ckprof submit --on-end, the config's on_job_end): a shell
// command run when a job ends, on this host through a ProcessRunner of the Scheduler's own
// (not the task Launcher, which may be Slurm's), like a profiler (its own process group, a
// time limit, nothing left behind), never waited for.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cctype>

#include "common/terminal_text.h"
#include "daemon/scheduler.h"
#include "daemon/spawn.h"

extern char** environ;

namespace ckprof {
namespace {

// submit --mail: the job's end as a mail to its owner, through the configured sendmail run as
// them. Every value comes from the environment (OnEndEnvironment: the name with its control
// characters escaped, so no header can be added through it); none is spliced into the text.
constexpr const char* kMailCommand =
    "{ printf 'To: %s\\nSubject: ckprof job %s %s: %s\\n\\n' \"$CKPROF_MAIL_TO\" "
    "\"$CKPROF_JOB_ID\" "
    "\"$CKPROF_JOB_STATE\" \"$CKPROF_JOB_NAME\"; "
    "printf 'Job %s (%s) of %s: %s.\\nIts tasks: %s.\\n\\nckprof status %s\\nckprof results %s\\n' "
    "\"$CKPROF_JOB_ID\" \"$CKPROF_JOB_NAME\" \"$CKPROF_JOB_OWNER\" \"$CKPROF_JOB_STATE\" "
    "\"$CKPROF_COUNTS\" \"$CKPROF_JOB_ID\" \"$CKPROF_JOB_ID\"; } | \"$CKPROF_SENDMAIL\" -oi -t";

// The first line of a capture, for the log.
std::string FirstLine(const std::string& text) {
  const size_t start = text.find_first_not_of("\n");
  if (start == std::string::npos) return "";
  return text.substr(start, text.find('\n', start) - start);
}

// The first non-empty line of a capture for the job's owner to read: at most 256 bytes, each
// control character (and DEL) written as \xNN so that it cannot act on a terminal.
std::string StderrHead(const std::string& text) {
  std::string line = FirstLine(text);
  if (line.size() > 256) line = line.substr(0, 256) + "...";
  std::string out;
  for (unsigned char c : line) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// How a job-end command ended, for its owner.
OnEndResult OnEndResultOf(const RunResult& r) {
  using Kind = Outcome::Kind;
  OnEndResult result;
  switch (r.outcome.kind) {
    case Kind::kSucceeded:
    case Kind::kUnsupported:
    case Kind::kFailed:
      result.exit_code = r.outcome.exit_code;
      result.outcome = "exited " + std::to_string(r.outcome.exit_code);
      break;
    case Kind::kTimedOut:
      result.outcome = r.outcome.Summary() + " and was stopped";
      break;
    case Kind::kCrashed:
    case Kind::kCancelled:
    case Kind::kInterrupted:
      result.outcome = r.outcome.Summary();
      break;
    case Kind::kSpawnFailed:
      result.outcome = "could not start: " + r.outcome.reason;
      break;
  }
  result.stderr_head = StderrHead(r.stderr_capture);
  result.ended_at = UnixNow();
  return result;
}

}  // namespace

void Scheduler::RecordOnEndResult(int64_t job_id, OnEndResult result) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;  // cleaned meanwhile
  if (Status s = store_.SetOnEndResult(job_id, result); !s) {
    spdlog::warn("job {}: cannot record how its --on-end ended: {}", job_id, s.error());
  }
  it->second.rec.on_end_result = std::move(result);
  Changed();
}

std::vector<std::pair<std::string, std::string>> Scheduler::OnEndEnvironment(const Job& job) const {
  const JobSummary s = MakeSummary(job);
  const TaskCounts& c = s.counts;
  // The name is the submitter's text and on_job_end is the admin's command, which may echo it to
  // a terminal or a mail: its control characters escaped, as every view shows them.
  std::vector<std::pair<std::string, std::string>> env = {
      {"CKPROF_JOB_ID", std::to_string(s.id)},
      {"CKPROF_JOB_NAME", EscapeControl(s.name)},
      {"CKPROF_JOB_STATE", std::string(EnumName(s.state))},
      {"CKPROF_JOB_OWNER", EscapeControl(s.owner)},
      {"CKPROF_TOTAL", std::to_string(s.total)}};
  // CKPROF_SUCCEEDED, CKPROF_FAILED, CKPROF_UNSUPPORTED, CKPROF_TIMED_OUT, ...: every column.
  for (TaskState column : FinalColumns()) {
    std::string name = "CKPROF_";
    for (char ch : EnumName(column)) name += static_cast<char>(std::toupper(ch));
    env.push_back({name, std::to_string(c.of(column))});
  }
  env.push_back({"CKPROF_COUNTS", c.Describe()});
  return env;
}

std::vector<std::string> Scheduler::OwnerEnvironment(uint32_t uid) const {
  std::vector<std::string> ours;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) ours.emplace_back(*e);
  return UserEnvironment(uid, ours, options_.pass_env);
}

void Scheduler::RunOnEnd(const Job& job) {
  struct Callback {
    std::string command;
    bool as_owner;
    const char* what;
  };
  std::vector<Callback> callbacks;
  if (!job.rec.on_end.empty()) callbacks.push_back({job.rec.on_end, true, "--on-end"});
  if (job.rec.mail && !options_.sendmail.empty()) {
    callbacks.push_back({kMailCommand, true, "--mail"});
  }
  if (!options_.on_job_end.empty()) callbacks.push_back({options_.on_job_end, false, "on_job_end"});
  for (const Callback& cb : callbacks) {
    RunSpec spec;
    spec.argv = {"/bin/sh", "-c", cb.command};
    spec.set_env = OnEndEnvironment(job);
    const bool mail = cb.command == kMailCommand;
    if (mail) {
      spec.set_env.push_back({"CKPROF_SENDMAIL", options_.sendmail});
      spec.set_env.push_back({"CKPROF_MAIL_TO", job.rec.owner});
    }
    if (cb.as_owner) {
      // The owner's own variables (submit --env), under ours.
      for (auto e = job.rec.env.rbegin(); e != job.rec.env.rend(); ++e) {
        const size_t eq = e->find('=');
        spec.set_env.insert(spec.set_env.begin(), {e->substr(0, eq), e->substr(eq + 1)});
      }
      spec.cwd = job.rec.cwd;
      if (options_.run_as_owner) {
        spec.uid = job.rec.uid;
        spec.gid = job.rec.gid;
        spec.groups = std::vector<gid_t>(job.rec.groups.begin(), job.rec.groups.end());
        if (job.rec.uid != geteuid()) spec.base_env = OwnerEnvironment(job.rec.uid);
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
    // The owner's --on-end: its end is shown to them.
    const bool owners = cb.as_owner && !mail;
    job_end_runner_.Start(std::move(spec), [this, id, what, command, owners](RunResult r) {
      if (owners) RecordOnEndResult(id, OnEndResultOf(r));
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

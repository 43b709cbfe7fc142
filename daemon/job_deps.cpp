// The Scheduler's rules between a job and others or the clock: dependencies (submit --after J,
// --after-ok J) and whole-job time limits (submit --job-timeout). A job waits, paused, until
// the jobs it names have ended; with --after-ok it runs only if every task of theirs succeeded,
// else it ends cancelled with the reason ("job 7 failed: ..."). Only jobs that exist when it is
// submitted may be named, and a job is always younger than those it waits for: no cycle can
// be made. The lists are stored with the job; what is still awaited is worked out again at a
// start (Recover). A job with a time limit is cancelled once it has run that long since its
// first start (a retry's revival starts the clock again), its running tasks stopped.
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>
#include <utility>

#include "daemon/scheduler.h"

namespace ckprof {
namespace {

// Each job named once, --after-ok's noted.
std::vector<std::pair<int64_t, bool>> Dependencies(const JobRecord& job) {
  std::vector<std::pair<int64_t, bool>> deps;
  for (int64_t id : job.after_ok) deps.emplace_back(id, true);
  for (int64_t id : job.after) {
    if (std::find(job.after_ok.begin(), job.after_ok.end(), id) == job.after_ok.end()) {
      deps.emplace_back(id, false);
    }
  }
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  return deps;
}

// The most jobs one job may wait for: a request could name a million (the same one again and
// again), each stored with the job and kept in memory while it waits.
constexpr size_t kMaxDependencies = 100;

}  // namespace

std::string Scheduler::FailedDependency(const Job& dep) {
  const std::string name = "job " + std::to_string(dep.rec.id);
  const std::string rule = " (--after-ok " + std::to_string(dep.rec.id) + ")";
  if (dep.rec.cancelled) {
    return name + " was cancelled" +
           (dep.rec.cancel_reason.empty() ? "" : " (" + dep.rec.cancel_reason + ")") + rule;
  }
  const int64_t bad = dep.total - dep.counts.succeeded();
  if (bad <= 0) return "";
  return fmt::format("{} failed: {} of its {} task(s) did not succeed{}", name, bad, dep.total,
                     rule);
}

Status Scheduler::CheckDependencies(const JobRecord& job) const {
  if (job.after.size() + job.after_ok.size() > kMaxDependencies) {
    return MakeError(
        fmt::format("--after and --after-ok name {} jobs; a job may wait for at most {}",
                    job.after.size() + job.after_ok.size(), kMaxDependencies));
  }
  for (const auto& [id, ok_only] : Dependencies(job)) {
    const char* flag = ok_only ? "--after-ok" : "--after";
    auto it = jobs_.find(id);
    if (it == jobs_.end()) {
      return MakeError(
          fmt::format("{} {}: there is no job {} ('ckprof list --all' shows the jobs there are)",
                      flag, id, id));
    }
    if (ok_only && Ended(it->second)) {
      if (std::string failed = FailedDependency(it->second); !failed.empty()) {
        return MakeError(fmt::format("{} {}: {}, so this job could never run", flag, id, failed));
      }
    }
  }
  return Status::Ok();
}

std::string Scheduler::TrackDependencies(Job& job) {
  job.waiting_on.clear();
  for (const auto& [id, ok_only] : Dependencies(job.rec)) {
    auto it = jobs_.find(id);
    // Removed (clean): it had ended, and the jobs waiting for it were settled then.
    if (it == jobs_.end()) continue;
    const Job& dep = it->second;
    if (!Ended(dep)) {
      job.waiting_on.insert(id);
      auto& list = dependents_[id];
      if (std::find(list.begin(), list.end(), job.rec.id) == list.end()) {
        list.push_back(job.rec.id);
      }
      continue;
    }
    if (!ok_only) continue;
    if (std::string failed = FailedDependency(dep); !failed.empty()) {
      job.waiting_on.clear();
      return failed;
    }
  }
  return "";
}

void Scheduler::SettleDependents(int64_t ended_job) {
  ended_to_settle_.push_back(ended_job);
  if (settling_) return;  // the loop below takes it
  settling_ = true;
  bool released = false;
  while (!ended_to_settle_.empty()) {
    const int64_t id = ended_to_settle_.front();
    ended_to_settle_.pop_front();
    auto list = dependents_.extract(id);
    auto dep = jobs_.find(id);
    if (list.empty() || dep == jobs_.end()) continue;
    for (int64_t waiting_id : list.mapped()) {
      auto w = jobs_.find(waiting_id);
      if (w == jobs_.end() || !w->second.waiting_on.erase(id)) continue;
      Job& job = w->second;
      if (job.rec.cancelled || Ended(job)) continue;
      const bool ok_only =
          std::find(job.rec.after_ok.begin(), job.rec.after_ok.end(), id) != job.rec.after_ok.end();
      if (std::string failed = ok_only ? FailedDependency(dep->second) : ""; !failed.empty()) {
        spdlog::info("job {}: {}", waiting_id, failed);
        const std::set<int64_t> was = std::exchange(job.waiting_on, {});
        // Its end is settled in turn (MaybeFinishJob adds it to the worklist).
        if (Status s = CancelJob(job, failed, "cancelled: " + failed); !s) {
          // (A failing Store: it stays paused, and is cancelled at the next start.)
          job.waiting_on = was;
          spdlog::error("job {}: cannot cancel it ({}): {}", waiting_id, failed, s.error());
        }
        continue;
      }
      if (job.waiting_on.empty()) {
        spdlog::info("job {}: the jobs it waited for have ended; it may run", waiting_id);
        policy_.UpdateJob(waiting_id, ParamsOf(job));
        released = true;
      }
    }
  }
  settling_ = false;
  if (released) {
    Dispatch();
    Changed();
  }
}

void Scheduler::ArmJobTimeoutTimer() {
  double next = 0;
  for (const auto& [id, job] : jobs_) {
    if (job.rec.job_timeout_s <= 0 || job.clock_start <= 0 || job.rec.cancelled) continue;
    if (job.rec.finished_at > 0) continue;  // ended
    const double deadline = job.clock_start + job.rec.job_timeout_s;
    if (next == 0 || deadline < next) next = deadline;
  }
  if (next == 0 || next == job_timeout_armed_) return;
  job_timeout_armed_ = next;
  ArmAt(job_timeout_timer_, next, UnixNow(), [this] {
    job_timeout_armed_ = 0;
    CancelJobsPastTheirTimeout();
    ArmJobTimeoutTimer();
  });
}

void Scheduler::CancelJobsPastTheirTimeout() {
  if (shutting_down_) return;
  const double now = UnixNow();
  std::vector<int64_t> due;
  for (const auto& [id, job] : jobs_) {
    if (job.rec.job_timeout_s <= 0 || job.clock_start <= 0 || job.rec.cancelled) continue;
    if (job.rec.finished_at == 0 && now >= job.clock_start + job.rec.job_timeout_s) {
      due.push_back(id);
    }
  }
  for (int64_t id : due) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second.rec.cancelled || Ended(it->second)) continue;
    Job& job = it->second;
    const auto limit = static_cast<int64_t>(job.rec.job_timeout_s + 0.5);
    const std::string reason = fmt::format(
        "its --job-timeout of {}:{:02}:{:02} passed (it started at {:%H:%M:%S})", limit / 3600,
        limit / 60 % 60, limit % 60, fmt::localtime(static_cast<std::time_t>(job.clock_start)));
    spdlog::info("job {}: {}", id, reason);
    if (Status s = CancelJob(job, reason, "cancelled: " + reason); !s) {
      spdlog::error("job {}: cannot cancel it ({}): {}", id, reason, s.error());
    }
  }
}

}  // namespace ckprof

// Why a job's queued tasks do not run now, as squeue's REASON says it (status, list): the
// first of a hold, not-before, its max-GPUs cap, its owner's per-user GPU cap, drained GPUs,
// foreign processes, another daemon's host lock, GPUs busy with other work (and who is ahead in
// fair share), and GPUs busy with its own tasks; and when it would start (squeue --start).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "daemon/scheduler.h"

namespace ckprof {
namespace {

std::string GpuNames(const std::vector<int>& gpus) {
  return (gpus.size() == 1 ? "GPU " : "GPUs ") + fmt::format("{}", fmt::join(gpus, ","));
}

// "2h 05m", "12m", "40s".
std::string Span(double seconds) {
  const auto t = static_cast<int64_t>(seconds + 0.5);
  if (t >= 3600) return fmt::format("{}h {:02}m", t / 3600, t % 3600 / 60);
  if (t >= 60) return fmt::format("{}m", t / 60);
  return fmt::format("{}s", t);
}

// The time when `work` seconds of tasks spread over GPUs that free at `free_at` are done, as
// water fills: each GPU takes work from when it frees.
double WaterLevel(std::vector<double> free_at, double work) {
  std::sort(free_at.begin(), free_at.end());
  double level = free_at.front();
  for (size_t i = 0; i < free_at.size(); ++i) {
    const double next = i + 1 < free_at.size() ? free_at[i + 1] : 1e300;
    const double room = (next - level) * static_cast<double>(i + 1);
    if (work <= room) return level + work / static_cast<double>(i + 1);
    work -= room;
    level = next;
  }
  return level;
}

}  // namespace

double Scheduler::EstimatedStart(const Job& job, const JobSummary& s) const {
  if (s.counts.queued() == 0 || s.counts.running() > 0 || job.first_start > 0) return 0;
  if (job.rec.cancelled || !job.rec.held_by.empty() || !job.waiting_on.empty()) return 0;
  const double now = UnixNow();
  // A task's time: its job's mean, else every job's.
  double all_sum = 0;
  int64_t all_n = 0;
  for (const auto& [id, j] : jobs_) {
    all_sum += j.elapsed_sum;
    all_n += j.elapsed_n;
  }
  auto mean_of = [&](const Job& j) {
    return j.elapsed_n > 0 ? j.elapsed_sum / static_cast<double>(j.elapsed_n)
           : all_n > 0     ? all_sum / static_cast<double>(all_n)
                           : -1;
  };
  // The GPUs it may use, and when each frees.
  std::vector<double> free_at;
  for (const auto& g : gpus_) {
    if (policy_.Drained(g.index)) continue;
    if (!job.rec.gpus.empty() &&
        std::find(job.rec.gpus.begin(), job.rec.gpus.end(), g.index) == job.rec.gpus.end()) {
      continue;
    }
    if (!g.task_id) {
      free_at.push_back(now);
      continue;
    }
    const double mean = mean_of(jobs_.at(tasks_.at(g.task_id).job_id));
    if (mean < 0) return 0;
    free_at.push_back(std::max(now, g.busy_since + mean));
  }
  if (free_at.empty()) return 0;  // every GPU it may use is drained
  // The work ahead: its owner's, then each other user's share of the same time.
  double own = 0;
  std::map<uint32_t, double> others;
  for (const auto& [id, j] : jobs_) {
    const QueuePolicy::JobParams* p = policy_.Params(id);
    if (id == job.rec.id || p == nullptr || p->paused || p->not_before > now) continue;
    const size_t queued = policy_.Queued(id);
    if (queued == 0) continue;
    const double mean = mean_of(j);
    if (mean < 0) return 0;
    const double work = static_cast<double>(queued) * mean;
    if (j.rec.uid == job.rec.uid) {
      const bool first = j.rec.priority > job.rec.priority ||
                         (j.rec.priority == job.rec.priority && id < job.rec.id);
      if (first) own += work;
    } else {
      others[j.rec.uid] += work;
    }
  }
  double ahead = own;
  const double mine = policy_.EffectiveUsage(job.rec.uid, now);
  for (const auto& [uid, work] : others) {
    const double lead = std::max(0.0, mine - policy_.EffectiveUsage(uid, now));
    ahead += std::min(work, own + lead);
  }
  return std::max(WaterLevel(free_at, ahead), job.rec.not_before);
}

std::string Scheduler::WaitingReason(const Job& job, const JobSummary& s) const {
  if (job.requeuing) {
    if (std::string so_far = RequeuingProgress(job.rec.id); !so_far.empty()) {
      return "its retry is queueing its tasks again (" + so_far + ")";
    }
  }
  if (s.counts.queued() == 0 || job.rec.cancelled) return "";
  if (!job.rec.held_by.empty()) {
    return "held by " + job.rec.held_by + " ('ckprof release " + std::to_string(job.rec.id) + "')";
  }
  if (!job.waiting_on.empty()) {
    std::vector<int64_t> ok_only, any;
    for (int64_t id : job.waiting_on) {
      const bool ok =
          std::find(job.rec.after_ok.begin(), job.rec.after_ok.end(), id) != job.rec.after_ok.end();
      (ok ? ok_only : any).push_back(id);
    }
    std::vector<std::string> parts;
    auto jobs = [](const std::vector<int64_t>& ids) {
      return (ids.size() == 1 ? "job " : "jobs ") + fmt::format("{}", fmt::join(ids, ", "));
    };
    if (!any.empty()) parts.push_back("waiting for " + jobs(any) + " to end (--after)");
    if (!ok_only.empty()) {
      parts.push_back("waiting for " + jobs(ok_only) + " to succeed (--after-ok)");
    }
    return fmt::format("{}", fmt::join(parts, "; "));
  }
  const double now = UnixNow();
  if (job.rec.not_before > now) {
    return "not before its start time (in " + Span(job.rec.not_before - now) +
           " from now; 'ckprof edit " + std::to_string(job.rec.id) + " --not-before now')";
  }
  if (job.rec.max_gpus > 0 && s.counts.running() >= job.rec.max_gpus) {
    return "at its --max-gpus limit: " + std::to_string(s.counts.running()) + " running";
  }
  if (const int cap = policy_.user_gpu_cap(); cap > 0) {
    if (const int mine = policy_.RunningOfUser(job.rec.uid); mine >= cap) {
      return job.rec.owner + " is at this daemon's per-user GPU limit: " + std::to_string(mine) +
             " of " + job.rec.owner + "'s tasks running, at most " + std::to_string(cap) +
             " at once (max_gpus_per_user)";
    }
  }
  std::vector<int> drained, foreign, locked, busy, own;
  std::set<std::string> busy_with;
  std::map<uint32_t, std::string> others;  // users whose tasks hold its GPUs
  for (const auto& g : gpus_) {
    if (!job.rec.gpus.empty() &&
        std::find(job.rec.gpus.begin(), job.rec.gpus.end(), g.index) == job.rec.gpus.end()) {
      continue;
    }
    const GpuWait why = board_->WhyNot(g.index);
    if (why == GpuWait::kDrained) {
      drained.push_back(g.index);
    } else if (g.task_id) {
      const Task& t = tasks_.at(g.task_id);
      if (t.job_id == job.rec.id) {  // busy with its own tasks
        own.push_back(g.index);
        continue;
      }
      busy.push_back(g.index);
      const JobRecord& other = jobs_.at(t.job_id).rec;
      busy_with.insert("job " + std::to_string(other.id) + " (" + other.owner + ")");
      others[other.uid] = other.owner;
    } else if (why == GpuWait::kForeign) {
      foreign.push_back(g.index);
    } else if (why == GpuWait::kLocked) {
      locked.push_back(g.index);
    } else {
      return "";  // a free GPU: it starts at the next pick
    }
  }
  std::vector<std::string> parts;
  if (!busy.empty()) {
    std::string p = "waiting for " + GpuNames(busy) + ", busy with " +
                    fmt::format("{}", fmt::join(busy_with, ", "));
    // Who a freed GPU goes to before this job, and why: the policy's answer, by owner name.
    std::map<uint32_t, std::string> names;
    for (const auto& [id, other] : jobs_) names.emplace(other.rec.uid, other.rec.owner);
    std::vector<std::pair<std::string, std::vector<std::string>>> ahead;  // (why, names)
    for (const auto& a : policy_.UsersAhead(job.rec.uid, now)) {
      if (ahead.empty() || ahead.back().first != a.why) ahead.push_back({a.why, {}});
      auto it = names.find(a.uid);
      ahead.back().second.push_back(it != names.end() ? it->second : std::to_string(a.uid));
    }
    for (size_t i = 0; i < ahead.size(); ++i) {
      p += (i == 0 ? "; fair share: behind " : ", then ") +
           fmt::format("{} ({})", fmt::join(ahead[i].second, ", "), ahead[i].first);
    }
    parts.push_back(p);
  }
  if (!foreign.empty()) parts.push_back(GpuNames(foreign) + " held by a foreign process");
  if (!locked.empty()) parts.push_back(GpuNames(locked) + " locked by another ckprofd");
  if (!drained.empty()) parts.push_back(GpuNames(drained) + " drained");
  if (!own.empty()) {
    // Every GPU it may use runs its own tasks: the next one starts as one of them ends.
    if (parts.empty())
      return GpuNames(own) + " busy with its own tasks (the next starts as one ends)";
    parts.push_back(GpuNames(own) + " busy with its own tasks");
  }
  if (parts.empty()) return "no GPU it may use";
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace ckprof

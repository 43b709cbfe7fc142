// The Scheduler's edits of jobs (ckprof edit, hold, release) and removal of ended ones (ckprof
// clean, the daemon's keep_finished_days).
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>

#include "daemon/scheduler.h"

namespace ckprof {
namespace {

std::string WhenText(double unix_time) {
  if (unix_time <= 0) return "now";
  return fmt::format("{:%Y-%m-%d %H:%M:%S}", fmt::localtime(static_cast<std::time_t>(unix_time)));
}

std::string GpusText(const std::vector<int>& gpus) {
  return gpus.empty() ? "any" : fmt::format("{}", fmt::join(gpus, ","));
}

}  // namespace

Status Scheduler::Edit(int64_t job_id, const EditOptions& edit, const Identity& who) {
  auto it = jobs_.find(job_id);
  const std::string job_name = "job " + std::to_string(job_id);
  if (it == jobs_.end()) return MakeError("no " + job_name);
  Job& job = it->second;
  if (!MayActOn(job, who)) {
    return MakeError(job_name + " belongs to " + job.rec.owner +
                     "; only its owner or an admin may edit it");
  }
  if (edit.empty()) return MakeError("edit: nothing to change (see 'ckprof edit --help')");
  const bool only_name =
      !edit.priority && !edit.not_before && !edit.gpus && !edit.max_gpus && !edit.timeout_s;
  if (Ended(job) && !only_name) {
    return MakeError(job_name + " has ended: only its name can change (retry runs it again)");
  }
  JobRecord rec = job.rec;
  std::vector<std::string> changes;
  // Any priority the protocol takes (-1000..1000), as at submit: it orders its owner's own
  // jobs, never another user's (fair share decides between users).
  if (edit.priority && *edit.priority != rec.priority) {
    changes.push_back(fmt::format("priority {} -> {}", rec.priority, *edit.priority));
    rec.priority = *edit.priority;
  }
  if (edit.not_before) {
    changes.push_back("not before " + WhenText(rec.not_before) + " -> " +
                      WhenText(*edit.not_before));
    rec.not_before = *edit.not_before;
  }
  if (edit.gpus) {
    for (int g : *edit.gpus) {
      if (!FindGpu(g)) return MakeError("edit: this daemon drives no GPU " + std::to_string(g));
    }
    std::vector<int> gpus = *edit.gpus;
    std::sort(gpus.begin(), gpus.end());
    gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
    changes.push_back("GPUs " + GpusText(rec.gpus) + " -> " + GpusText(gpus));
    rec.gpus = std::move(gpus);
  }
  if (edit.max_gpus) {
    changes.push_back(fmt::format("max GPUs {} -> {}", rec.max_gpus, *edit.max_gpus));
    rec.max_gpus = *edit.max_gpus;
  }
  if (edit.timeout_s) {
    changes.push_back(fmt::format("timeout {} -> {}", rec.timeout_s, *edit.timeout_s));
    rec.timeout_s = *edit.timeout_s;
  }
  if (edit.name) {
    changes.push_back("name '" + rec.name + "' -> '" + *edit.name + "'");
    rec.name = *edit.name;
  }
  if (Status s = store_.SetJobSettings(rec); !s) return s;
  job.rec = std::move(rec);
  if (!Ended(job)) policy_.UpdateJob(job_id, ParamsOf(job));
  spdlog::info("job {} edited by {} (uid {}): {}", job_id, who.user, who.uid,
               changes.empty() ? "nothing changed" : fmt::format("{}", fmt::join(changes, ", ")));
  Dispatch();
  ArmNotBeforeTimer(UnixNow());
  Changed();
  return Status::Ok();
}

Status Scheduler::Hold(int64_t job_id, bool hold, const Identity& who) {
  auto it = jobs_.find(job_id);
  const std::string job_name = "job " + std::to_string(job_id);
  const char* verb = hold ? "hold" : "release";
  if (it == jobs_.end()) return MakeError("no " + job_name);
  Job& job = it->second;
  if (!MayActOn(job, who)) {
    return MakeError(job_name + " belongs to " + job.rec.owner +
                     "; only its owner or an admin may " + verb + " it");
  }
  if (Ended(job)) return MakeError(job_name + " has ended: there is nothing to " + verb);
  if (job.rec.cancelled) return MakeError(job_name + " is being cancelled");
  const std::string& held_by = job.rec.held_by;
  // Held already: as it was, unless an admin holds a job another held (then it is the admin's
  // hold, which its owner cannot release).
  if (hold && !held_by.empty() && !(who.admin && job.rec.held_by_uid != int64_t{who.uid})) {
    return Status::Ok();
  }
  if (!hold) {
    if (held_by.empty()) return MakeError(job_name + " is not held");
    if (!who.admin && int64_t{who.uid} != job.rec.held_by_uid) {
      return MakeError(job_name + " was held by " + held_by + "; only " + held_by +
                       " or an admin may release it");
    }
  }
  if (Status s = store_.SetJobHold(job_id, hold ? who.user : "", who.uid); !s) return s;
  job.rec.held_by = hold ? who.user : "";
  job.rec.held_by_uid = hold ? int64_t{who.uid} : -1;
  policy_.UpdateJob(job_id, ParamsOf(job));
  spdlog::info("job {} {} by {} (uid {})", job_id, hold ? "held" : "released", who.user, who.uid);
  Dispatch();
  ArmNotBeforeTimer(UnixNow());
  Changed();
  return Status::Ok();
}

Result<CleanReply> Scheduler::Clean(const Identity& who, const CleanOptions& o) {
  std::vector<int64_t> ids;
  if (!o.job_ids.empty()) {
    if (o.everyone || o.older_than_s > 0) {
      return MakeError("clean: name jobs, or pick them with --older-than/--all, not both");
    }
    for (int64_t id : o.job_ids) {
      auto it = jobs_.find(id);
      const std::string name = "job " + std::to_string(id);
      if (it == jobs_.end()) return MakeError("no " + name + " (nothing was removed)");
      const Job& job = it->second;
      if (!MayActOn(job, who)) {
        return MakeError(name + " belongs to " + job.rec.owner +
                         "; only its owner or an admin may remove it (nothing was removed)");
      }
      if (!Ended(job)) {
        return MakeError(name + " has not ended (" + std::string(EnumName(MakeSummary(job).state)) +
                         "): cancel it first, or wait for it (nothing was removed)");
      }
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    }
  } else {
    if (o.everyone && !who.admin) {
      return MakeError("only an admin may clean other users' jobs (without --all: your own)");
    }
    const double before = UnixNow() - o.older_than_s;
    for (const auto& [id, job] : jobs_) {
      if (!o.everyone && job.rec.uid != who.uid) continue;
      if (Ended(job) && job.rec.finished_at > 0 && job.rec.finished_at <= before) {
        ids.push_back(id);
      }
    }
  }
  CleanReply reply;
  reply.dry_run = o.dry_run;
  for (int64_t id : ids) {
    const Job& job = jobs_.at(id);
    reply.results += job.total;
    reply.jobs.push_back(MakeSummary(job));
  }
  if (o.dry_run) {
    reply.removed = std::move(ids);
    return reply;
  }
  auto removed = RemoveJobs(ids, who.user);
  if (!removed) return Error{removed.error()};
  reply.removed = std::move(*removed);
  return reply;
}

Result<std::vector<int64_t>> Scheduler::ExpireEndedBefore(double before) {
  std::vector<int64_t> ids;
  for (const auto& [id, job] : jobs_) {
    if (Ended(job) && job.rec.finished_at > 0 && job.rec.finished_at < before) ids.push_back(id);
  }
  return RemoveJobs(ids, "keep_finished_days");
}

Result<std::vector<int64_t>> Scheduler::RemoveJobs(const std::vector<int64_t>& ids,
                                                   const std::string& by) {
  if (ids.empty()) return ids;
  // Gone for good once marked (nothing loads them again); their rows go in steps, the first
  // now (a small job's removal is complete when this returns), so that a million rows do not
  // stall every other client.
  if (Status s = store_.MarkDropped(ids); !s) return Error{s.error()};
  for (int64_t id : ids) {
    if (auto it = jobs_.find(id); it != jobs_.end()) {
      const JobRecord& rec = it->second.rec;
      launcher_.ForgetJob(id, rec.owner.empty() ? std::to_string(rec.uid) : rec.owner, rec.uid,
                          rec.gid);
    }
    policy_.RemoveJob(id);
    jobs_.erase(id);
    dropping_.emplace_back(id, Store::DropProgress{});
  }
  spdlog::info("{} ended job(s) removed ({}): {}", ids.size(), by, fmt::join(ids, ", "));
  store_.SetBulkWriting(true);
  DropStep();
  Changed();
  return ids;
}

}  // namespace ckprof

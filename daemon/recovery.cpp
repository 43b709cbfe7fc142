#include "daemon/recovery.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "common/outcome.h"
#include "daemon/process_util.h"
#include "daemon/scheduler.h"
#include "daemon/task_result_codec.h"

namespace ckprof {

Status StopLeftoverProfilers(const std::string& state_dir,
                             const std::vector<TaskRecord>& was_running,
                             const std::set<uint32_t>& unrecorded_owners,
                             std::chrono::milliseconds grace) {
  std::set<pid_t> recorded;
  for (const auto& r : was_running) {
    if (r.handle > 1) recorded.insert(static_cast<pid_t>(r.handle));
  }
  std::set<pid_t> marked_groups;
  if (!state_dir.empty()) {
    for (pid_t pid : ProcessesWithEnv("CKPROFD_STATE=" + state_dir)) {
      const pid_t pgid = getpgid(pid);
      if (pgid <= 1) continue;
      const auto owner = ReadProcOwner(pid);
      if (recorded.count(pgid) || (owner && unrecorded_owners.count(owner->uid))) {
        marked_groups.insert(pgid);
      } else {
        spdlog::warn(
            "process {} ({}) carries this daemon's CKPROFD_STATE but is in no run it had going: "
            "left alone",
            pid, owner ? owner->command : "gone");
      }
    }
  }
  for (const auto& r : was_running) {
    if (r.handle <= 1) continue;
    if (marked_groups.count(static_cast<pid_t>(r.handle))) {
      spdlog::warn(
          "task {} (job {}) was running on GPU {} when ckprofd stopped; stopping its "
          "process group {}",
          r.id, r.job_id, r.gpu, r.handle);
    } else {
      spdlog::info(
          "task {} (job {}): its process group {} is gone (or reused by another "
          "program, which is left alone)",
          r.id, r.job_id, r.handle);
    }
  }
  for (pid_t pgid : marked_groups) {
    if (Status s = KillProcessGroupAndWait(pgid, grace); !s) {
      return MakeError(
          "cannot stop the profiler left running by the previous ckprofd "
          "(process group " +
          std::to_string(pgid) + "): " + s.error());
    }
  }
  return Status::Ok();
}

Status Scheduler::Recover() {
  using Kind = Outcome::Kind;
  const double now = UnixNow();
  if (Status s = store_.ForEachJob([&](JobRecord&& r) {
        Job& j = jobs_[r.id];
        j.rec = std::move(r);
        policy_.AddJob(j.rec.id, ParamsOf(j));
      });
      !s) {
    return s;
  }
  for (auto& [id, job] : jobs_) ResolveTarget(job);
  if (Status s = RestoreDrains(); !s) return s;
  if (Status s = store_.ForEachUsage([&](UsageRecord&& u) {
        policy_.SetUsage(u.uid, {u.usage, u.updated_at});
      });
      !s) {
    return s;
  }
  std::vector<TaskRecord> was_running;
  if (Status s = store_.ForEachTaskBrief([&](TaskRecord&& r) {
        auto job_it = jobs_.find(r.job_id);
        if (job_it == jobs_.end()) return;
        Job& job = job_it->second;
        ++job.total;
        if (r.started_at > 0 && !r.reused_from &&
            (job.first_start == 0 || r.started_at < job.first_start)) {
          job.first_start = r.started_at;
        }
        if (r.state == TaskState::kRunning) {
          was_running.push_back(r);  // decided below, once its processes are stopped
        } else if (auto kind = OutcomeOf(r.state)) {
          // Final: counted, not kept in memory.
          CountFinal(job, *kind, +1);
          if (r.reused_from && *kind == Kind::kSucceeded) ++job.reused;
          if (r.ended_at > r.started_at && r.started_at > 0) {
            job.elapsed_sum += r.ended_at - r.started_at;
            ++job.elapsed_n;
          }
          return;
        }
        tasks_.emplace(r.id, TaskFromRecord(r));
      });
      !s) {
    return s;
  }
  // Leftover profilers first: no GPU may be handed out while a dead daemon's run goes on.
  // A cluster's runs are not ours to stop: they are followed again.
  const auto grace = std::chrono::milliseconds(static_cast<int64_t>(options_.grace_s * 1000));
  if (launcher_.Remote()) {
    if (Status s = AdoptRunning(was_running); !s) return s;
  } else {
    std::set<uint32_t> unrecorded_owners;
    for (const auto& r : was_running) {
      if (r.handle <= 1) unrecorded_owners.insert(jobs_.at(r.job_id).rec.uid);
    }
    if (Status s = StopLeftoverProfilers(options_.state_dir, was_running, unrecorded_owners, grace);
        !s) {
      return s;
    }
  }
  for (const auto& r : was_running) {
    if (launcher_.Remote()) break;
    Task& t = tasks_.at(r.id);
    Job& job = jobs_.at(r.job_id);
    Outcome o{Kind::kInterrupted, 0, 0, "ckprofd stopped while it ran"};
    const bool requeue = !job.rec.cancelled && t.attempts < options_.max_attempts;
    if (!requeue && job.rec.cancelled) o = Outcome{Kind::kCancelled, 0, 0, "cancelled"};
    const TaskState state = requeue ? TaskState::kQueued : StateOf(o.kind);
    if (Status s = store_.FinishAttempt(r.id, r.attempts, o.kind, state, now,
                                        ResultJson(o, "", r.gpu, nullptr), nullptr);
        !s) {
      return s;
    }
    if (!requeue) {
      CountFinal(job, o.kind, +1);
      Forget(t.id, state, o.Summary());
    }
    spdlog::info("task {} (job {}) interrupted by the restart: {}", r.id, r.job_id,
                 requeue ? "requeued" : "attempts used up, left " + std::string(EnumName(state)));
  }
  // Queued tasks go back into their queues; a cancelled job's (a crash between the cancel's
  // two commits) are cancelled now.
  std::set<int64_t> cancel;
  for (auto& [id, t] : tasks_) {
    if (t.gpu >= 0 && launcher_.Remote() && FindGpu(t.gpu) && FindGpu(t.gpu)->task_id == id) {
      continue;  // followed where it runs (a remote executor)
    }
    Enqueue(t);
    if (jobs_.at(t.job_id).rec.cancelled) cancel.insert(t.job_id);
  }
  // (In steps, as the cancel's own: a million of them would hold the start back.)
  for (int64_t job_id : cancel) {
    const std::string& reason = jobs_.at(job_id).rec.cancel_reason;
    const std::string why =
        (reason.empty() ? std::string("cancelled") : reason) + " (resumed at ckprofd's start)";
    if (Status s = CancelInSteps(job_id, why, now); !s) return s;
  }
  // What each job still waits for (--after, --after-ok): its dependencies have been loaded.
  for (auto& [id, job] : jobs_) {
    if (job.rec.cancelled || Ended(job) || (job.rec.after.empty() && job.rec.after_ok.empty())) {
      continue;
    }
    const std::string failed = TrackDependencies(job);
    policy_.UpdateJob(id, ParamsOf(job));
    if (failed.empty()) continue;
    spdlog::info("job {}: {}", id, failed);
    if (Status s = CancelJob(job, failed, "cancelled: " + failed); !s) return s;
  }
  for (auto& [id, job] : jobs_) MaybeFinishJob(job, now);
  // Time limits go on from each job's first start (the stop counts as time it ran).
  for (auto& [id, job] : jobs_) {
    if (job.rec.finished_at == 0) job.clock_start = job.first_start;
  }
  CancelJobsPastTheirTimeout();
  ArmJobTimeoutTimer();
  // Jobs removed (clean) or never stored whole (a submit cut short) go on being removed.
  auto dropped = store_.DroppedJobs();
  if (!dropped) return Error{dropped.error()};
  for (int64_t id : *dropped) dropping_.emplace_back(id, Store::DropProgress{});
  if (!dropped->empty()) {
    spdlog::info("{} removed or incomplete job(s) still have rows: removing them", dropped->size());
    store_.SetBulkWriting(true);
    ArmStep();
  }
  spdlog::info("recovered {} job(s): {} task(s) queued, {} were running", jobs_.size(),
               policy_.queued_total(), was_running.size());
  Dispatch();
  return Status::Ok();
}

Status Scheduler::AdoptRunning(const std::vector<TaskRecord>& was_running) {
  for (const auto& r : was_running) {
    Task& t = tasks_.at(r.id);
    auto free_slot =
        std::find_if(gpus_.begin(), gpus_.end(), [](const Gpu& g) { return g.task_id == 0; });
    if (free_slot == gpus_.end()) {
      // The executor's slots were lowered below what the last daemon had in flight: a slot more.
      Gpu extra;
      extra.index = board_->AddSlot();
      gpus_.push_back(std::move(extra));
      free_slot = gpus_.end() - 1;
    }
    t.gpu = -1;
    t.attempts = r.attempts - 1;  // PrepareStart counts the attempt that runs
    Enqueue(t);
    Start start = PrepareStart(t, *free_slot);
    start.attempt = r.attempts;
    start.now = r.started_at > 0 ? r.started_at : UnixNow();
    if (!start.error.empty()) {
      // Its command cannot be built again (it was, when it started): follow it all the same.
      spdlog::warn("task {} (job {}): {}", r.id, r.job_id, start.error);
    }
    spdlog::info("task {} (job {}) was in {} when ckprofd stopped ({}): followed again", r.id,
                 r.job_id, launcher_.Name(),
                 r.handle > 0 ? "job " + std::to_string(r.handle) : "no job id stored");
    Gpu& slot = *free_slot;
    LaunchStart(std::move(start), r.handle > 0 ? r.handle : 0);
    // A cancel that was stored but not carried out (ckprofd stopped in between): scancel now.
    if (jobs_.at(r.job_id).rec.cancelled) launcher_.Cancel(slot.run);
  }
  return Status::Ok();
}

}  // namespace ckprof

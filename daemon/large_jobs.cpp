// The Scheduler's large work in steps: a submit stored a step at a time (BeginSubmit ...
// CommitSubmit), a cancel's queued tasks ended a step at a time (CancelStep), removed jobs'
// rows deleted a step at a time (DropStep), and the compaction once they are done
// (CompactStep), and a large job's retry queueing its tasks again a step at a time
// (RetryInSteps ... RequeueStep). Each step is one transaction of about kStepSeconds; the next is
// posted to the io thread behind whatever arrived meanwhile, so that another user's `status` never
// waits for a million rows.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>

#include "daemon/heap_trim.h"
#include "daemon/scheduler.h"

namespace ckprof {
namespace {

using Kind = Outcome::Kind;
using Clock = std::chrono::steady_clock;

// What a step should take. A request waits behind one step at each of its turns on the io
// thread (accept, hello, request, reply: four or five), so steps are short.
constexpr double kStepSeconds = 0.0005;
constexpr int64_t kMinStepRows = 50, kMaxStepRows = 50000;
// A cancel's entries forgotten a step (memory only: each a fraction of a row's cost).
constexpr int64_t kMaxForgetStep = 500000;
// A cancel of this many queued tasks or more says when they are all forgotten (info).
constexpr int64_t kLargeCancel = 10000;
// How long the daemon stays without a step before it compacts. A compaction step gives back as
// many pages as take about kCompactStepSeconds (SQLite searches the free list for each page it
// moves: after a million rows' removal a page cost 0.1-0.35 ms, and 256 of them a 90 ms stall),
// and the io thread has as long a pause after each: a large file shrinks in a minute or two of
// idle time, the io thread half free meanwhile.
constexpr auto kQuietBeforeCompaction = std::chrono::milliseconds(500);
constexpr double kCompactStepSeconds = 0.002;
constexpr int64_t kMinShrinkPages = 1, kMaxShrinkPages = 1024;
constexpr auto kCompactionPause = std::chrono::milliseconds(2);
// While the log's checkpoints are behind (Store::LogBehind), large work looks again this often,
// and waits this long at most.
constexpr double kLongestLogWait = 2.0;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// How many units (rows, pages) the next step should take: halfway from `current` towards what
// would take `target` seconds at `seconds` for `units`, so that one slow step (a page fault,
// the other core busy) does not swing it.
int64_t Adapted(int64_t current, int64_t units, double seconds, double target, int64_t least,
                int64_t most) {
  const double per_unit =
      std::max(seconds, 1e-6) / static_cast<double>(std::max<int64_t>(units, 1));
  const auto want = static_cast<int64_t>(target / per_unit);
  return std::clamp((current + want) / 2, least, most);
}

}  // namespace

int64_t Scheduler::StepSize(int64_t adapted) const {
  if (options_.step_rows > 0) return options_.step_rows;
  static const int64_t from_env = [] {
    const char* v = std::getenv("CKPROFD_STEP_ROWS");
    return v ? std::max<int64_t>(std::atoll(v), 0) : 0;
  }();
  return from_env > 0 ? from_env : adapted;
}

int64_t Scheduler::StepRows() const { return StepSize(step_rows_); }

void Scheduler::TookStep(int64_t rows, double seconds) {
  if (rows <= 0) return;
  step_rows_ = Adapted(step_rows_, rows, seconds, kStepSeconds, kMinStepRows, kMaxStepRows);
}

int64_t Scheduler::CancelStepPositions() const { return StepSize(cancel_step_); }

void Scheduler::TookCancelStep(int64_t positions, double seconds) {
  if (positions <= 0) return;
  cancel_step_ =
      Adapted(cancel_step_, positions, seconds, kStepSeconds, kMinStepRows, kMaxStepRows);
}

void Scheduler::TookForgetStep(int64_t entries, double seconds) {
  if (entries <= 0) return;
  forget_step_ =
      Adapted(forget_step_, entries, seconds, kStepSeconds, kMinStepRows, kMaxForgetStep);
}

Result<int64_t> Scheduler::BeginSubmit(JobRecord job, int64_t runs) {
  if (shutting_down_) return MakeError("ckprofd is shutting down; submit again once it is back");
  if (runs <= 0) return MakeError("the input holds no convolution to profile");
  if (Status s = CheckDependencies(job); !s) return Error{s.error()};
  job.submitted_at = UnixNow();
  auto first = store_.BeginJob(&job, runs);
  if (!first) {
    return MakeError("the job could not be stored, so it was not accepted: " + first.error());
  }
  const int64_t id = job.id;
  if (runs > StepRows()) store_.SetBulkWriting(true);  // until CompactStep
  Submitting& sub = submitting_[id];
  sub.runs = runs;
  sub.next_id = *first;
  sub.job.rec = std::move(job);
  // Queued as it is stored, but paused until it is whole.
  QueuePolicy::JobParams params = ParamsOf(sub.job);
  params.paused = true;
  policy_.AddJob(id, params);
  ResolveTarget(sub.job);
  return id;
}

Status Scheduler::AddSubmitTasks(int64_t job_id, std::span<TaskRecord> records) {
  auto it = submitting_.find(job_id);
  if (it == submitting_.end()) return MakeError("job " + std::to_string(job_id) + " is gone");
  if (shutting_down_) return MakeError("ckprofd is shutting down; submit again once it is back");
  Submitting& sub = it->second;
  if (sub.job.total + static_cast<int64_t>(records.size()) > sub.runs) {
    return MakeError("job " + std::to_string(job_id) + ": more tasks than were announced");
  }
  const auto start = Clock::now();
  sub.reused += ApplyReuse(sub.job.rec, records, sub.reuse);
  if (Status s = store_.InsertTasks(job_id, sub.next_id, records); !s) {
    return MakeError("the job could not be stored, so it was not accepted: " + s.error());
  }
  sub.next_id += static_cast<int64_t>(records.size());
  Job& j = sub.job;
  for (auto& r : records) {
    ++j.total;
    if (r.reused_from) {  // stored succeeded: counted, not queued
      CountFinal(j, Kind::kSucceeded, +1);
      ++j.reused;
      continue;
    }
    auto [t, _] = tasks_.emplace(r.id, TaskFromRecord(r));
    Enqueue(t->second);
  }
  TookStep(static_cast<int64_t>(records.size()), SecondsSince(start));
  return Status::Ok();
}

Status Scheduler::CommitSubmit(int64_t job_id) {
  auto it = submitting_.find(job_id);
  if (it == submitting_.end()) return MakeError("job " + std::to_string(job_id) + " is gone");
  if (it->second.job.total != it->second.runs) {
    return MakeError("job " + std::to_string(job_id) + ": fewer tasks than were announced");
  }
  if (Status s = store_.CommitJob(job_id); !s) {
    return MakeError("the job could not be stored, so it was not accepted: " + s.error());
  }
  const int64_t reused = it->second.reused;
  const bool large = it->second.runs > StepRows();
  Job& j = jobs_[job_id] = std::move(it->second.job);
  submitting_.erase(it);
  // (Its dependencies were checked at BeginSubmit; one may have ended since.)
  const std::string failed = TrackDependencies(j);
  policy_.UpdateJob(job_id, ParamsOf(j));
  spdlog::info("job {} \"{}\" from {} (uid {}): {} task(s){}, priority {}, profiler {}", job_id,
               j.rec.name, j.rec.owner, j.rec.uid, j.total,
               reused ? fmt::format(" ({} reused from earlier runs)", reused) : "", j.rec.priority,
               j.target ? j.target->Describe() : "unresolved: " + j.target_error);
  if (!failed.empty()) {
    spdlog::info("job {}: {}", job_id, failed);
    if (Status s = CancelJob(j, failed, "cancelled: " + failed); !s) {
      spdlog::error("job {}: cannot cancel it ({}): {}", job_id, failed, s.error());
    }
  }
  if (j.reused == j.total) MaybeFinishJob(j, UnixNow());
  Dispatch();
  Changed();
  // The submit's buffers (its text, the records) are freed by now, or soon.
  if (large) ArmCompaction();
  return Status::Ok();
}

void Scheduler::AbortSubmit(int64_t job_id) {
  ArmCompaction();
  auto it = submitting_.find(job_id);
  if (it == submitting_.end()) return;
  // Its tasks' ids are the ones reserved for it, from the first up to next_id.
  const int64_t stored = it->second.job.total;
  for (int64_t id = it->second.next_id - stored; id < it->second.next_id; ++id) {
    auto t = tasks_.find(id);
    if (t == tasks_.end()) continue;
    Dequeue(t->second);
    tasks_.erase(t);
  }
  policy_.RemoveJob(job_id);
  submitting_.erase(it);
  // Still marked dropped in the Store: its rows go, now or after a restart.
  spdlog::info("job {}: its submit did not complete; what was stored of it is removed", job_id);
  dropping_.emplace_back(job_id, Store::DropProgress{});
  ArmStep();
}

Status Scheduler::CancelInSteps(int64_t job_id, const std::string& why, double now,
                                bool mark_anyway) {
  // A cancel of the job not stored yet (its Store refused it, and a retry revived the job
  // since) is this one's now. One stored and still forgetting goes on in its steps: the tasks
  // it took are not queued any more.
  if (!Forgetting(job_id)) FinishCancelling(job_id);
  Cancelling c;
  c.job_id = job_id;
  c.why = why;
  c.now = now;
  c.mark_anyway = mark_anyway;
  const auto start = Clock::now();
  const int64_t took = CancelSome(c, StepSize(forget_step_));
  TookForgetStep(took, SecondsSince(start));
  Status s = took >= 0 ? Status::Ok()
                       : MakeError("job " + std::to_string(job_id) +
                                   ": its queued tasks could not be recorded as cancelled (see "
                                   "the log); ckprofd tries again");
  if (!c.done) {
    cancelling_.push_back(std::move(c));
    ArmStep(/*after_failure=*/!s);
  }
  return s;
}

int64_t Scheduler::CancelSome(Cancelling& c, int64_t budget) {
  const Outcome o{Kind::kCancelled, 0, 0, c.why};
  if (!c.marked) {
    auto job = jobs_.find(c.job_id);
    // A retry revived the job (or it is gone) before the cancel was stored: the rest stays
    // queued.
    if (job == jobs_.end() || !job->second.rec.cancelled ||
        (policy_.Queued(c.job_id) == 0 && !c.mark_anyway)) {
      c.done = true;
      return 0;
    }
    if (Status s = store_.MarkQueuedCancelled(c.job_id, c.now, ResultJson(o, "", -1, nullptr));
        !s) {
      // The Store refused (a full disk): the tasks stay queued in a paused job; a later step
      // tries again.
      spdlog::error("job {}: cancelling its queued tasks: {}", c.job_id, s.error());
      return -1;
    }
    c.marked = true;
    c.taken = policy_.TakeQueued(c.job_id);
    c.taken_total = static_cast<int64_t>(c.taken.size());
    c.at = Clock::now();
    CountFinal(job->second, Kind::kCancelled, static_cast<int>(c.taken_total));
  }
  const std::string summary = o.Summary();
  const std::vector<int64_t> ids = c.taken.Next(static_cast<size_t>(std::max<int64_t>(budget, 1)));
  for (int64_t id : ids) Forget(id, TaskState::kCancelled, summary);
  c.done = c.taken.empty();
  if (c.done) {
    spdlog::log(c.taken_total >= kLargeCancel ? spdlog::level::info : spdlog::level::debug,
                "job {}: its {} cancelled task(s) forgotten in {:.2f} s", c.job_id, c.taken_total,
                SecondsSince(c.at));
  }
  return static_cast<int64_t>(ids.size());
}

bool Scheduler::Forgetting(int64_t job_id) const {
  return std::any_of(cancelling_.begin(), cancelling_.end(), [&](const Cancelling& c) {
    return c.job_id == job_id && c.marked && !c.done;
  });
}

void Scheduler::FinishCancelling(int64_t job_id) {
  auto it = std::find_if(cancelling_.begin(), cancelling_.end(),
                         [&](const Cancelling& c) { return c.job_id == job_id; });
  if (it == cancelling_.end()) return;
  const bool was_marked = it->marked;
  while (!it->done && CancelSome(*it, std::numeric_limits<int64_t>::max()) >= 0) {
  }
  if (!was_marked && it->marked) {
    // Stored only now (the first tries had failed): the job ends once its running tasks have.
    if (auto job = jobs_.find(job_id); job != jobs_.end()) MaybeFinishJob(job->second, it->now);
  }
  cancelling_.erase(it);
}

Result<int64_t> Scheduler::RetryInSteps(Job& job, const Identity& who, const RetryOptions& options,
                                        bool write_out) {
  const int64_t job_id = job.rec.id;
  // What it takes: of named tasks, those of their rows that ended; else from the job's counts
  // (the rows are read in the steps).
  int64_t runs = 0;
  if (!options.positions.empty()) {
    auto rows = RowsAt(job_id, options.positions);
    if (!rows) return Error{rows.error()};
    // (While its cancel forgets its tasks, those read cancelled and the steps take them after.)
    const bool forgetting = Forgetting(job_id);
    for (const auto& r : *rows) {
      runs += OutcomeOf(r.state) && (forgetting || !tasks_.count(r.id)) ? 1 : 0;
    }
  } else {
    for (Kind k : CountColumns()) {
      if (options.failed_only ? IsFailure(k) : Retryable(k)) {
        runs += job.counts.of(TraitsOf(k).state);
      }
    }
  }
  if (runs == 0) return int64_t{0};
  if (options.admit) {
    if (Status s = options.admit(runs); !s) return Error{s.error()};
  }
  if (Status s = ApplyRunSettings(job, who, options); !s) return Error{s.error()};
  const bool unmarked = !write_out && job.rec.cancelled;
  if (!write_out) {
    if (job.rec.cancelled) {
      // Revived: its cancel's mark goes, so that the rows it ended read 'queued' again (a
      // whole retry takes every one of them).
      if (Status s = store_.SetJobCancelled(job_id, false, "", /*marked_requeued=*/true); !s) {
        return Error{s.error()};
      }
    }
    if (Status s = store_.SetJobFinished(job_id, 0); !s) return Error{s.error()};
  }
  job.rec.cancelled = false;
  job.rec.cancel_reason.clear();
  if (job.rec.finished_at > 0) job.clock_start = 0;  // revived: its time limit starts again
  job.rec.finished_at = 0;
  job.requeuing = true;         // paused until the last step
  store_.SetBulkWriting(true);  // until CompactStep (its rows may be rewritten: a large log)
  policy_.UpdateJob(job_id, ParamsOf(job));
  Requeuing r;
  r.job_id = job_id;
  r.wanted.insert(options.positions.begin(), options.positions.end());
  r.failed_only = options.failed_only;
  r.write_out = write_out;
  r.unmarked = unmarked;
  r.since = UnixNow();
  r.expected = runs;
  r.by = who.user;
  r.at = Clock::now();
  requeuing_.push_back(std::move(r));
  spdlog::info("job {}: {} task(s) to queue again, retried by {} (uid {}); in steps", job_id, runs,
               who.user, who.uid);
  ArmStep();
  Changed();
  return runs;
}

int64_t Scheduler::RequeueSome(Requeuing& r, int64_t budget) {
  auto it = jobs_.find(r.job_id);
  if (it == jobs_.end()) {
    r.done = true;
    return 0;
  }
  Job& job = it->second;
  budget = std::max<int64_t>(budget, 1);
  auto rows = store_.JobTasksBriefAfter(r.job_id, r.after, budget);
  if (!rows) {
    spdlog::error("job {}: queueing its retried tasks again: {} (tried again later)", r.job_id,
                  rows.error());
    return -1;
  }
  auto takes = [&](Kind kind, int64_t position) {
    if (!r.wanted.empty()) return r.wanted.count(position) > 0;
    return r.failed_only ? IsFailure(kind) : Retryable(kind);
  };
  std::vector<std::pair<Task, Kind>> take;  // and how each ended
  std::vector<int64_t> write, out;          // rows to store as 'queued' again; as cancelled
  int64_t reused = 0;                       // of those taken, copies of a stored success
  for (const TaskRecord& row : *rows) {
    if (tasks_.count(row.id)) continue;  // queued or running
    if (row.marked || row.state == TaskState::kQueued) {
      // Ended by the cancel's mark ('queued' in the Store; the mark is gone already unless
      // write_out): taken as it is, or written out as the cancelled row it reads as.
      if (takes(Kind::kCancelled, row.position)) {
        take.emplace_back(TaskFromRecord(row), Kind::kCancelled);
      } else if (r.write_out) {
        out.push_back(row.id);
      }
      continue;
    }
    auto kind = OutcomeOf(row.state);
    // (One that ended after the retry was running when it was asked for: not taken.)
    if (!kind || row.ended_at > r.since || !takes(*kind, row.position)) continue;
    take.emplace_back(TaskFromRecord(row), *kind);
    write.push_back(row.id);
    if (row.reused_from && *kind == Kind::kSucceeded) ++reused;  // it runs this time
  }
  if (Status s = store_.SetRetried(r.job_id, out, write); !s) {
    spdlog::error("job {}: queueing its retried tasks again: {} (tried again later)", r.job_id,
                  s.error());
    return -1;
  }
  if (!rows->empty()) r.after = {rows->back().position, rows->back().id};
  for (const auto& [t, kind] : take) {
    CountFinal(job, kind, -1);
    Enqueue(tasks_.emplace(t.id, t).first->second);
  }
  job.reused -= reused;
  r.requeued += static_cast<int64_t>(take.size());
  if (static_cast<int64_t>(rows->size()) < budget && r.write_out && !r.revived) {
    // Every row seen: the job revived in the Store, its mark gone (what it ended and the retry
    // took reads 'queued' from now on; the rest has rows of its own).
    Status s = store_.SetJobCancelled(r.job_id, false, "", /*marked_requeued=*/true);
    if (s) s = store_.SetJobFinished(r.job_id, 0);
    if (!s) {
      spdlog::error("job {}: reviving it after its retry: {} (tried again later)", r.job_id,
                    s.error());
      return -1;
    }
    r.revived = true;
  }
  if (static_cast<int64_t>(rows->size()) < budget) {
    r.done = true;
    job.requeuing = false;
    policy_.UpdateJob(r.job_id, ParamsOf(job));
    spdlog::log(r.requeued == r.expected ? spdlog::level::info : spdlog::level::warn,
                "job {}: {} task(s) queued again in {:.2f} s (retry by {}){}", r.job_id, r.requeued,
                SecondsSince(r.at), r.by,
                r.requeued == r.expected ? "" : fmt::format("; {} were expected", r.expected));
  }
  return static_cast<int64_t>(rows->size());
}

void Scheduler::Requeued(int64_t job_id) {
  if (auto it = jobs_.find(job_id); it != jobs_.end()) MaybeFinishJob(it->second, UnixNow());
  Dispatch();
  Changed();
  ArmCompaction();  // (ends the bulk writing, truncates the log once quiet)
}

Status Scheduler::FinishRequeuing(int64_t job_id) {
  auto it = std::find_if(requeuing_.begin(), requeuing_.end(),
                         [&](const Requeuing& r) { return r.job_id == job_id; });
  if (it == requeuing_.end()) return Status::Ok();
  while (!it->done) {
    if (RequeueSome(*it, kMaxStepRows) < 0) {
      return MakeError("job " + std::to_string(job_id) +
                       ": its retry is still queueing its tasks again, and the database refused " +
                       "the next step (see the log); try again later");
    }
  }
  requeuing_.erase(it);
  Requeued(job_id);
  return Status::Ok();
}

bool Scheduler::DropRequeuing(int64_t job_id) {
  auto it = std::find_if(requeuing_.begin(), requeuing_.end(),
                         [&](const Requeuing& r) { return r.job_id == job_id; });
  if (it == requeuing_.end()) return false;
  const bool unmarked = it->unmarked;
  spdlog::info("job {}: its retry stopped after {} of {} task(s) queued again ({:.2f} s)", job_id,
               it->requeued, it->expected, SecondsSince(it->at));
  requeuing_.erase(it);
  if (auto job = jobs_.find(job_id); job != jobs_.end()) {
    job->second.requeuing = false;
    policy_.UpdateJob(job_id, ParamsOf(job->second));
  }
  ArmCompaction();  // (ends the bulk writing)
  return unmarked;
}

std::string Scheduler::RequeuingProgress(int64_t job_id) const {
  for (const Requeuing& r : requeuing_) {
    if (r.job_id == job_id) return fmt::format("{} of {} so far", r.requeued, r.expected);
  }
  return "";
}

void Scheduler::RequeueStep() {
  int64_t budget = StepRows();
  const auto start = Clock::now();
  int64_t done = 0;
  bool failed = false;
  while (budget > 0 && !requeuing_.empty()) {
    Requeuing& r = requeuing_.front();
    const int64_t rows = RequeueSome(r, budget);
    if (rows < 0) {
      failed = true;
      break;
    }
    budget -= std::max<int64_t>(rows, 1);
    done += rows;
    if (r.done) {
      const int64_t job_id = r.job_id;
      requeuing_.pop_front();
      Requeued(job_id);  // (after: its end may cancel other jobs)
    }
  }
  if (done > 0) {
    spdlog::trace("retry step: {} row(s) in {:.1f} ms", done, SecondsSince(start) * 1e3);
    TookStep(done, SecondsSince(start));
    Changed();
  }
  if (StepsLeft()) ArmStep(failed);
}

void Scheduler::CancelStep() {
  int64_t budget = StepSize(forget_step_);
  const auto start = Clock::now();
  int64_t done = 0;
  bool failed = false;
  while (budget > 0 && !cancelling_.empty()) {
    Cancelling& c = cancelling_.front();
    const bool was_marked = c.marked;
    const int64_t took = c.done ? 0 : CancelSome(c, budget);
    if (took < 0) {
      failed = true;
      break;
    }
    if (!was_marked && c.marked) {
      // Stored by this step (the first try had failed): the job ends once its running tasks
      // have.
      if (auto job = jobs_.find(c.job_id); job != jobs_.end()) MaybeFinishJob(job->second, c.now);
    }
    if (c.done) cancelling_.pop_front();
    budget -= std::max<int64_t>(took, 1);
    done += took;
  }
  if (done > 0) {
    spdlog::trace("cancel step: {} task(s) in {:.1f} ms", done, SecondsSince(start) * 1e3);
    TookForgetStep(done, SecondsSince(start));
    Changed();
  }
  if (StepsLeft()) {
    ArmStep(failed);
  } else {
    ArmCompaction();
  }
}

void Scheduler::DropStep(int64_t budget) {
  if (budget <= 0) budget = StepRows();
  const auto start = Clock::now();
  int64_t done = 0;
  bool failed = false;
  while (budget > 0 && !dropping_.empty()) {
    auto& [job_id, progress] = dropping_.front();
    const int64_t before = progress.rows;
    if (Status s = store_.DeleteDropped(job_id, budget, &progress); !s) {
      spdlog::error("job {}: removing its rows: {} (tried again later; it stays hidden)", job_id,
                    s.error());
      failed = true;
      break;
    }
    const int64_t rows = progress.rows - before;
    done += rows;
    budget -= std::max<int64_t>(rows, 1);
    if (progress.done) {
      spdlog::debug("job {}: its {} task rows are removed", job_id, progress.rows);
      dropping_.pop_front();
    }
  }
  if (done > 0) {
    spdlog::trace("removal step: {} row(s) in {:.1f} ms", done, SecondsSince(start) * 1e3);
    TookStep(done, SecondsSince(start));
  }
  if (StepsLeft()) {
    ArmStep(failed);
  } else {
    ArmCompaction();  // (also ends the bulk writing that RemoveJobs began)
  }
}

bool Scheduler::LargeWorkWaits() {
  if (!store_.LogBehind()) {
    log_wait_since_.reset();
    return false;
  }
  if (!log_wait_since_) log_wait_since_ = Clock::now();
  // (A checkpoint that cannot catch up does not stop large work: the log grows instead.)
  return SecondsSince(*log_wait_since_) < kLongestLogWait;
}

void Scheduler::LargeWorkBegins() { store_.SetBulkWriting(true); }

void Scheduler::LargeWorkEnded() { ArmCompaction(); }  // (which ends the bulk writing)

void Scheduler::ArmStep(bool after_failure) {
  if (step_armed_ || shutting_down_) return;
  step_armed_ = true;
  if (after_failure) {  // a failing Store: a while later
    step_timer_.expires_after(std::chrono::seconds(5));
    step_timer_.async_wait([this](std::error_code ec) { OnStepTimer(ec); });
    return;
  }
  // Behind whatever the io thread has to do already (a request, a task's end): posted, not a
  // timer of 0 s (whose arming is a system call a step). A step pending when the Scheduler
  // goes is not run.
  asio::post(step_timer_.get_executor(), [this, alive = std::weak_ptr<void>(alive_)] {
    if (!alive.expired()) OnStepTimer({});
  });
}

void Scheduler::OnStepTimer(std::error_code ec) {
  if (ec) return;
  if (LargeWorkWaits()) {
    step_timer_.expires_after(kLogWaitPoll);
    step_timer_.async_wait([this](std::error_code e) { OnStepTimer(e); });
    return;
  }
  step_armed_ = false;
  // Cancels first: their tasks still count as queued work; then retries, whose tasks wait.
  if (!cancelling_.empty()) {
    CancelStep();
  } else if (!requeuing_.empty()) {
    RequeueStep();
  } else {
    DropStep();
  }
}

void Scheduler::ArmCompaction() {
  compact_wanted_ = true;
  compact_timer_.expires_after(kQuietBeforeCompaction);
  compact_timer_.async_wait([this](std::error_code ec) {
    if (ec) return;
    CompactStep();
  });
}

void Scheduler::CompactStep() {
  if (!compact_wanted_ || shutting_down_) return;
  // Not while steps go on, nor while a submit is being stored: later.
  if (StepsLeft() || !submitting_.empty()) {
    ArmCompaction();
    return;
  }
  const auto start = Clock::now();
  auto left = store_.ShrinkStep(shrink_pages_);
  const double took = SecondsSince(start);
  spdlog::trace("compaction step: {} page(s) in {:.1f} ms, {} free page(s) left", shrink_pages_,
                took * 1e3, left ? *left : -1);
  shrink_pages_ = Adapted(shrink_pages_, shrink_pages_, took, kCompactStepSeconds, kMinShrinkPages,
                          kMaxShrinkPages);
  if (!left) {
    spdlog::warn("database: giving free pages back: {}", left.error());
  } else if (*left > 0) {
    // More to give back: the next step after a pause, and after other work had its turn.
    compact_timer_.expires_after(kCompactionPause);
    compact_timer_.async_wait([this](std::error_code ec) {
      if (!ec) CompactStep();
    });
    return;
  }
  compact_wanted_ = false;
  store_.SetBulkWriting(false);
  store_.TruncateLogSoon();
  // Freed memory back to the system (a million tasks' records and queues).
  TrimHeapSoon();
  spdlog::debug("compacted after large work ({:.3f} s for the last step)", SecondsSince(start));
}

}  // namespace ckprof

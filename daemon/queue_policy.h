// QueuePolicy: which queued task a free GPU runs next, and the users' fair-share accounts.
//
// Pure policy, as Ninja's Plan is to its Builder: it holds the job queues, which job runs on
// which GPU and each user's decayed GPU time, and answers Pick(). It knows nothing of the
// Store, of Asio or of processes: the Scheduler (the mechanism) tells it every change and asks
// it what to start.
//
// The policy. Between users, fair share: the user with the least effective usage goes first
// (GPU seconds decayed with a half-life, plus the time so far of their running tasks; ties:
// fewer running tasks, then the lower uid). Within a user: higher job priority, then submit
// order (job id). Within a job: rank order (priority_rank; a long task is not left for last,
// see NextOf in queue_policy.cpp) or, for a longest-first job, the most estimated work first.
// A job takes a GPU only when it is not paused, its not-before time has come, it runs
// on fewer than its max_gpus, its user runs fewer tasks than the per-user cap
// (SetUserGpuCap), and the GPU is one it may use. A drained GPU takes nothing.
//
// Single-threaded plain value type (the Scheduler's, on the daemon's io thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ckprof {

class QueuePolicy {
  // rank (0 for longest-first jobs), then the larger first, position, id.
  using QueueKey = std::tuple<int64_t, double, int64_t, int64_t>;
  // A rank-ordered job's queued tasks by size: -est_cost, rank, position, id.
  using CostKey = std::tuple<double, int64_t, int64_t, int64_t>;

 public:
  // What the policy needs of a job.
  struct JobParams {
    uint32_t uid = 0;
    int priority = 0;            // higher first, within its user
    bool longest_first = false;  // its tasks by estimated work, not by rank
    // Takes no GPU: cancelled (its queued tasks are being ended) or still being stored.
    bool paused = false;
    double not_before = 0;  // Unix seconds before which it takes no GPU; 0 = none
    int max_gpus = 0;       // GPUs at once; 0 = no limit
    std::vector<int> gpus;  // the GPUs it may use; empty = any
  };
  // A queued task as the policy orders it. Its values must not change while it is queued.
  struct TaskKey {
    int64_t id = 0;
    int64_t rank = 0;      // priority_rank
    int64_t position = 0;  // 1-based place in its job
    double est_cost = 0;   // estimated work (FLOPs)
  };
  // A user's decayed GPU seconds as of `updated_at` (Unix seconds).
  struct Usage {
    double usage = 0;
    double updated_at = 0;
  };

  // `gpus`: the GPU indexes there are; `half_life_s`: how fast usage decays (> 0).
  QueuePolicy(std::vector<int> gpus, double half_life_s);

  // Jobs. AddJob comes once per job, before its tasks; UpdateJob changes its parameters
  // (priority, hold, GPUs...) with its queue kept. Unknown job ids are ignored.
  void AddJob(int64_t job_id, JobParams params);
  void UpdateJob(int64_t job_id, JobParams params);
  // Forgets a job that has nothing queued or running (false, and nothing changed, otherwise).
  bool RemoveJob(int64_t job_id);
  const JobParams* Params(int64_t job_id) const;

  // Tasks. Both are idempotent.
  void Enqueue(int64_t job_id, const TaskKey& task);
  void Dequeue(int64_t job_id, const TaskKey& task);
  size_t Queued(int64_t job_id) const;
  bool IsQueued(int64_t job_id, const TaskKey& task) const;
  // The job's queued task ids, in its queue order; the first `limit` of them where given.
  std::vector<int64_t> QueuedTasks(int64_t job_id, size_t limit = SIZE_MAX) const;
  size_t queued_total() const { return queued_total_; }
  // A job's queued tasks taken out at once (its cancel): the policy has none of them from then
  // on. Freeing a million entries takes a while (~0.1 s): Next hands them over a part at a time.
  class Taken {
   public:
    size_t size() const { return queue_.size(); }
    bool empty() const { return queue_.empty(); }
    // Up to `n` of the ids, in queue order, gone from here.
    std::vector<int64_t> Next(size_t n);

   private:
    friend class QueuePolicy;
    std::set<QueueKey> queue_;
    std::set<CostKey> by_cost_;
  };
  Taken TakeQueued(int64_t job_id);

  // GPUs. Started: a task of `job_id` runs on `gpu` from `now` on; Stopped: it ended (its time
  // is charged with Charge). Unknown GPUs are ignored.
  void SetDrained(int gpu, bool drained);
  bool Drained(int gpu) const;
  void Started(int gpu, int64_t job_id, double now);
  void Stopped(int gpu);
  // The job's tasks running now.
  int Running(int64_t job_id) const;
  // How many GPUs the job may use at once (not drained, allowed, capped by max_gpus).
  int GpusOf(int64_t job_id) const;
  // The most tasks of one user running at once, over all their jobs; 0 = no limit. A user at
  // it is passed over by Pick (their work waits, the others' runs).
  void SetUserGpuCap(int cap) { user_gpu_cap_ = cap; }
  int user_gpu_cap() const { return user_gpu_cap_; }
  // The user's tasks running now.
  int RunningOfUser(uint32_t uid) const { return RunningOfUser(uid, /*freed_gpu=*/-1); }

  // Fair share.
  void SetHalfLife(double half_life_s);
  void Charge(uint32_t uid, double seconds, double now);
  void SetUsage(uint32_t uid, Usage usage);
  // Every user with an account.
  std::vector<std::pair<uint32_t, Usage>> AllUsage() const;
  Usage UsageOf(uint32_t uid) const;
  // Decayed usage at `now`, plus the running tasks' time so far.
  double EffectiveUsage(uint32_t uid, double now) const;

  // The task `gpu` runs next (a free GPU), or none. Changes nothing.
  std::optional<int64_t> Pick(int gpu, double now) const;
  // The same, as if the task running on `gpu` had ended and been charged already.
  std::optional<int64_t> PickAfterEnd(int gpu, double now) const;
  // Who a freed GPU goes to before `uid`'s work, by fair share: the users whom Pick serves
  // first and whose work may start now, in Pick's order, each with why ("less GPU time
  // lately", ...). (Within a user, priority and submit order decide: none of fair share.)
  struct Ahead {
    uint32_t uid = 0;
    std::string why;
  };
  std::vector<Ahead> UsersAhead(uint32_t uid, double now) const;
  // Every user with queued work that is not paused, in fair share's order (Candidates', as
  // Pick serves them; a user at the per-user GPU cap keeps their place, passed over until a
  // task of theirs ends): `usage`'s PLACE.
  std::vector<uint32_t> FairShareOrder(double now) const;
  double half_life_s() const { return half_life_s_; }
  // The earliest not-before time after `now` of a job with queued work that is not paused;
  // 0 = none.
  double NextNotBefore(double now) const;

 private:
  struct JobQueue {
    JobParams params;
    std::set<QueueKey> queue;
    std::set<CostKey> by_cost;  // rank order only: the same tasks as queue
    double queued_cost = 0;     // rank order only: the sum of their est_cost
    int running = 0;
  };
  struct Account {
    Usage usage;
    std::set<std::pair<int, int64_t>> active_jobs;  // (-priority, job id): queued, not paused
  };
  struct Slot {
    int gpu = 0;
    bool drained = false;
    int64_t job_id = 0;  // 0 = free
    double since = 0;
  };

  // A user as fair share orders them (Candidates).
  struct Candidate {
    double usage;
    int running;
    uint32_t uid;
  };
  // (`capped_too`: users at the per-user cap too, who Pick passes over.)
  std::vector<Candidate> Candidates(double now, int freed_gpu, bool capped_too = false) const;
  static std::string WhyAhead(const Candidate& a, const Candidate& b);
  // Whether a task of the job may start now (queued, not paused, its not-before come, below
  // its max_gpus; `freed_job`'s task on the freed GPU counted as ended).
  bool MayStartNow(int64_t job_id, double now, int64_t freed_job) const;
  static QueueKey KeyOf(const JobQueue& job, const TaskKey& t);
  void UpdateActive(int64_t job_id, const JobQueue& job, std::optional<int> old_priority);
  int64_t NextOf(const JobQueue& job) const;
  int GpusFor(const JobParams& params) const;
  std::optional<int64_t> PickImpl(int gpu, double now, int freed_gpu) const;
  double EffectiveUsage(uint32_t uid, double now, int freed_gpu) const;
  int RunningOfUser(uint32_t uid, int freed_gpu) const;
  Slot* FindSlot(int gpu);
  const Slot* FindSlot(int gpu) const;

  double half_life_s_;
  std::vector<Slot> slots_;
  std::map<int64_t, JobQueue> jobs_;
  std::map<uint32_t, Account> accounts_;
  size_t queued_total_ = 0;
  int user_gpu_cap_ = 0;
};

}  // namespace ckprof

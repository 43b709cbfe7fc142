#include "daemon/queue_policy.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <tuple>

namespace ckprof {

QueuePolicy::QueuePolicy(std::vector<int> gpus, double half_life_s) : half_life_s_(half_life_s) {
  for (int g : gpus) slots_.push_back(Slot{g});
}

QueuePolicy::QueueKey QueuePolicy::KeyOf(const JobQueue& job, const TaskKey& t) {
  return {job.params.longest_first ? 0 : t.rank, -t.est_cost, t.position, t.id};
}

QueuePolicy::Slot* QueuePolicy::FindSlot(int gpu) {
  for (auto& s : slots_) {
    if (s.gpu == gpu) return &s;
  }
  return nullptr;
}

const QueuePolicy::Slot* QueuePolicy::FindSlot(int gpu) const {
  return const_cast<QueuePolicy*>(this)->FindSlot(gpu);
}

void QueuePolicy::AddJob(int64_t job_id, JobParams params) {
  JobQueue& job = jobs_[job_id];
  job.params = std::move(params);
  UpdateActive(job_id, job, std::nullopt);
}

void QueuePolicy::UpdateJob(int64_t job_id, JobParams params) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  JobQueue& job = it->second;
  const JobParams old = job.params;
  // The queue's keys depend on the order: a job's order is fixed at submit.
  params.longest_first = old.longest_first;
  if (params.uid != old.uid) {
    accounts_[old.uid].active_jobs.erase({-old.priority, job_id});
    job.params = std::move(params);
    UpdateActive(job_id, job, std::nullopt);
    return;
  }
  job.params = std::move(params);
  UpdateActive(job_id, job, old.priority);
}

bool QueuePolicy::RemoveJob(int64_t job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return true;
  if (!it->second.queue.empty() || it->second.running > 0) return false;
  accounts_[it->second.params.uid].active_jobs.erase({-it->second.params.priority, job_id});
  jobs_.erase(it);
  return true;
}

const QueuePolicy::JobParams* QueuePolicy::Params(int64_t job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second.params;
}

void QueuePolicy::UpdateActive(int64_t job_id, const JobQueue& job,
                               std::optional<int> old_priority) {
  Account& a = accounts_[job.params.uid];
  if (old_priority) a.active_jobs.erase({-*old_priority, job_id});
  const auto key = std::make_pair(-job.params.priority, job_id);
  if (job.queue.empty() || job.params.paused) {
    a.active_jobs.erase(key);
  } else {
    a.active_jobs.insert(key);
  }
}

void QueuePolicy::Enqueue(int64_t job_id, const TaskKey& t) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  JobQueue& job = it->second;
  if (job.queue.insert(KeyOf(job, t)).second) {
    ++queued_total_;
    if (!job.params.longest_first) {
      job.by_cost.emplace(-t.est_cost, t.rank, t.position, t.id);
      job.queued_cost += t.est_cost;
    }
  }
  UpdateActive(job_id, job, std::nullopt);
}

void QueuePolicy::Dequeue(int64_t job_id, const TaskKey& t) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  JobQueue& job = it->second;
  if (job.queue.erase(KeyOf(job, t))) {
    --queued_total_;
    if (!job.params.longest_first) {
      job.by_cost.erase({-t.est_cost, t.rank, t.position, t.id});
      // (Exactly 0 once empty: a sum of doubles drifts.)
      job.queued_cost = job.by_cost.empty() ? 0 : job.queued_cost - t.est_cost;
    }
  }
  UpdateActive(job_id, job, std::nullopt);
}

size_t QueuePolicy::Queued(int64_t job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? 0 : it->second.queue.size();
}

bool QueuePolicy::IsQueued(int64_t job_id, const TaskKey& task) const {
  auto it = jobs_.find(job_id);
  return it != jobs_.end() && it->second.queue.count(KeyOf(it->second, task)) > 0;
}

QueuePolicy::Taken QueuePolicy::TakeQueued(int64_t job_id) {
  Taken taken;
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return taken;
  JobQueue& job = it->second;
  queued_total_ -= job.queue.size();
  taken.queue_.swap(job.queue);
  taken.by_cost_.swap(job.by_cost);
  job.queued_cost = 0;
  UpdateActive(job_id, job, std::nullopt);
  return taken;
}

std::vector<int64_t> QueuePolicy::Taken::Next(size_t n) {
  std::vector<int64_t> ids;
  ids.reserve(std::min(n, queue_.size()));
  auto end = queue_.begin();
  for (; end != queue_.end() && ids.size() < n; ++end) ids.push_back(std::get<3>(*end));
  queue_.erase(queue_.begin(), end);
  // (by_cost holds the same tasks, in another order: as many of its entries go.)
  auto cost_end = by_cost_.begin();
  std::advance(cost_end, queue_.empty() ? by_cost_.size() : std::min(ids.size(), by_cost_.size()));
  by_cost_.erase(by_cost_.begin(), cost_end);
  return ids;
}

std::vector<int64_t> QueuePolicy::QueuedTasks(int64_t job_id, size_t limit) const {
  std::vector<int64_t> ids;
  if (auto it = jobs_.find(job_id); it != jobs_.end()) {
    ids.reserve(std::min(limit, it->second.queue.size()));
    for (const auto& key : it->second.queue) {
      if (ids.size() >= limit) break;
      ids.push_back(std::get<3>(key));
    }
  }
  return ids;
}

void QueuePolicy::SetDrained(int gpu, bool drained) {
  if (Slot* s = FindSlot(gpu)) s->drained = drained;
}

bool QueuePolicy::Drained(int gpu) const {
  const Slot* s = FindSlot(gpu);
  return s && s->drained;
}

void QueuePolicy::Started(int gpu, int64_t job_id, double now) {
  Slot* s = FindSlot(gpu);
  if (!s) return;
  if (s->job_id) Stopped(gpu);
  s->job_id = job_id;
  s->since = now;
  if (auto it = jobs_.find(job_id); it != jobs_.end()) ++it->second.running;
}

void QueuePolicy::Stopped(int gpu) {
  Slot* s = FindSlot(gpu);
  if (!s || !s->job_id) return;
  if (auto it = jobs_.find(s->job_id); it != jobs_.end()) --it->second.running;
  s->job_id = 0;
  s->since = 0;
}

int QueuePolicy::Running(int64_t job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? 0 : it->second.running;
}

int QueuePolicy::GpusOf(int64_t job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? 0 : GpusFor(it->second.params);
}

int QueuePolicy::GpusFor(const JobParams& p) const {
  int n = 0;
  for (const auto& s : slots_) {
    if (s.drained) continue;
    if (p.gpus.empty() || std::find(p.gpus.begin(), p.gpus.end(), s.gpu) != p.gpus.end()) ++n;
  }
  return p.max_gpus > 0 ? std::min(n, p.max_gpus) : n;
}

void QueuePolicy::SetHalfLife(double half_life_s) { half_life_s_ = half_life_s; }

void QueuePolicy::Charge(uint32_t uid, double seconds, double now) {
  Usage& u = accounts_[uid].usage;
  u.usage = u.usage * std::exp2(-(now - u.updated_at) / half_life_s_) + seconds;
  u.updated_at = now;
}

void QueuePolicy::SetUsage(uint32_t uid, Usage usage) { accounts_[uid].usage = usage; }

std::vector<std::pair<uint32_t, QueuePolicy::Usage>> QueuePolicy::AllUsage() const {
  std::vector<std::pair<uint32_t, Usage>> out;
  for (const auto& [uid, a] : accounts_) out.emplace_back(uid, a.usage);
  return out;
}

QueuePolicy::Usage QueuePolicy::UsageOf(uint32_t uid) const {
  auto it = accounts_.find(uid);
  return it == accounts_.end() ? Usage{} : it->second.usage;
}

double QueuePolicy::EffectiveUsage(uint32_t uid, double now) const {
  return EffectiveUsage(uid, now, /*freed_gpu=*/-1);
}

double QueuePolicy::EffectiveUsage(uint32_t uid, double now, int freed_gpu) const {
  double usage = 0;
  if (auto it = accounts_.find(uid); it != accounts_.end()) {
    const Usage& u = it->second.usage;
    usage = u.usage * std::exp2(-(now - u.updated_at) / half_life_s_);
  }
  for (const auto& s : slots_) {
    if (!s.job_id || s.gpu == freed_gpu) continue;
    if (jobs_.at(s.job_id).params.uid == uid) usage += std::max(0.0, now - s.since);
  }
  return usage;
}

int QueuePolicy::RunningOfUser(uint32_t uid, int freed_gpu) const {
  int running = 0;
  for (const auto& s : slots_) {
    if (s.job_id && s.gpu != freed_gpu && jobs_.at(s.job_id).params.uid == uid) ++running;
  }
  return running;
}

// A job in rank order runs its tasks by priority_rank, with one exception near its end: a task
// so long that, started after all the others, it would still be running when they are done
// (the rest of the queued work spread over the job's GPUs is less than it) starts now. Started
// in rank order, a long task drawn late ends a sweep alone on one GPU while the others idle. It
// only ever moves tasks of the last G rounds, and never on one GPU, where order cannot shorten
// a sweep; with equal sizes it is rank order. Sizes are the configs' estimated FLOPs.
int64_t QueuePolicy::NextOf(const JobQueue& job) const {
  const int64_t head = std::get<3>(*job.queue.begin());
  if (job.params.longest_first || job.by_cost.empty()) return head;
  const int gpus = GpusFor(job.params);
  if (gpus < 2) return head;
  const CostKey& top = *job.by_cost.begin();
  const double largest = -std::get<0>(top);
  return (job.queued_cost - largest) / gpus < largest ? std::get<3>(top) : head;
}

std::optional<int64_t> QueuePolicy::Pick(int gpu, double now) const {
  return PickImpl(gpu, now, /*freed_gpu=*/-1);
}

std::optional<int64_t> QueuePolicy::PickAfterEnd(int gpu, double now) const {
  return PickImpl(gpu, now, gpu);
}

// The fair-share rule: users with work, least effective usage first; ties: fewer running
// tasks, then the lower uid. Pick serves them in this order, and UsersAhead says it.
std::vector<QueuePolicy::Candidate> QueuePolicy::Candidates(double now, int freed_gpu,
                                                            bool capped_too) const {
  std::vector<Candidate> users;
  for (const auto& [uid, a] : accounts_) {
    if (a.active_jobs.empty()) continue;
    const int running = RunningOfUser(uid, freed_gpu);
    if (!capped_too && user_gpu_cap_ > 0 && running >= user_gpu_cap_) continue;  // at the cap
    users.push_back({EffectiveUsage(uid, now, freed_gpu), running, uid});
  }
  std::sort(users.begin(), users.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(a.usage, a.running, a.uid) < std::tie(b.usage, b.running, b.uid);
  });
  return users;
}

// Why `a` comes before `b` in Candidates' order.
std::string QueuePolicy::WhyAhead(const Candidate& a, const Candidate& b) {
  if (a.usage < b.usage) return "less GPU time lately";
  if (a.running < b.running) return "as much GPU time lately and fewer tasks running";
  return "as much GPU time lately and as many tasks running: a lower uid";
}

bool QueuePolicy::MayStartNow(int64_t job_id, double now, int64_t freed_job) const {
  const JobQueue& job = jobs_.at(job_id);
  const JobParams& p = job.params;
  if (job.queue.empty() || p.paused || p.not_before > now) return false;
  const int running = job.running - (job_id == freed_job ? 1 : 0);
  return p.max_gpus <= 0 || running < p.max_gpus;
}

std::vector<QueuePolicy::Ahead> QueuePolicy::UsersAhead(uint32_t uid, double now) const {
  std::vector<Ahead> out;
  const std::vector<Candidate> users = Candidates(now, /*freed_gpu=*/-1);
  // Where `uid` stands (a user at the per-user cap is no candidate: as if last).
  Candidate me{EffectiveUsage(uid, now), RunningOfUser(uid), uid};
  for (const Candidate& c : users) {
    if (c.uid == uid) break;
    if (std::tie(me.usage, me.running, me.uid) < std::tie(c.usage, c.running, c.uid)) break;
    // Only a user whose work may start now takes a freed GPU first.
    const auto& active = accounts_.at(c.uid).active_jobs;
    if (std::none_of(active.begin(), active.end(), [&](const auto& key) {
          return MayStartNow(key.second, now, /*freed_job=*/0);
        })) {
      continue;
    }
    out.push_back({c.uid, WhyAhead(c, me)});
  }
  return out;
}

std::vector<uint32_t> QueuePolicy::FairShareOrder(double now) const {
  std::vector<uint32_t> out;
  for (const Candidate& c : Candidates(now, /*freed_gpu=*/-1, /*capped_too=*/true)) {
    out.push_back(c.uid);
  }
  return out;
}

std::optional<int64_t> QueuePolicy::PickImpl(int gpu, double now, int freed_gpu) const {
  const Slot* slot = FindSlot(gpu);
  if (!slot || slot->drained) return std::nullopt;
  const int64_t freed_job = [&]() -> int64_t {
    const Slot* f = freed_gpu >= 0 ? FindSlot(freed_gpu) : nullptr;
    return f ? f->job_id : 0;
  }();
  for (const auto& c : Candidates(now, freed_gpu)) {
    for (const auto& [neg_prio, job_id] : accounts_.at(c.uid).active_jobs) {
      if (!MayStartNow(job_id, now, freed_job)) continue;
      const JobQueue& job = jobs_.at(job_id);
      const JobParams& p = job.params;
      if (!p.gpus.empty() && std::find(p.gpus.begin(), p.gpus.end(), gpu) == p.gpus.end()) {
        continue;
      }
      return NextOf(job);
    }
  }
  return std::nullopt;
}

double QueuePolicy::NextNotBefore(double now) const {
  double next = 0;
  for (const auto& [id, job] : jobs_) {
    const JobParams& p = job.params;
    if (job.queue.empty() || p.paused || p.not_before <= now) continue;
    if (next == 0 || p.not_before < next) next = p.not_before;
  }
  return next;
}

}  // namespace ckprof

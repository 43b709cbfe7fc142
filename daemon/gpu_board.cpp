#include "daemon/gpu_board.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <map>
#include <set>

#include "daemon/unix_time.h"

namespace ckprof {

bool GpuBoard::Has(int gpu) const {
  for (int g : gpus_) {
    if (g == gpu) return true;
  }
  return false;
}

int GpuBoard::AddSlot() {
  const int index = gpus_.empty() ? 0 : gpus_.back() + 1;
  gpus_.push_back(index);
  OnSlotAdded(index);
  return index;
}

LocalGpuBoard::LocalGpuBoard(std::vector<int> gpus, std::string lock_dir, BoardOptions options)
    : GpuBoard(std::move(gpus)), lock_dir_(std::move(lock_dir)), options_(options) {
  for (int g : gpus_) OnSlotAdded(g);
}

LocalGpuBoard::~LocalGpuBoard() = default;

void LocalGpuBoard::OnSlotAdded(int gpu) {
  Gpu g;
  g.index = gpu;
  gpu_state_.push_back(std::move(g));
}

LocalGpuBoard::Gpu* LocalGpuBoard::Find(int gpu) {
  for (auto& g : gpu_state_) {
    if (g.index == gpu) return &g;
  }
  return nullptr;
}

const LocalGpuBoard::Gpu* LocalGpuBoard::Find(int gpu) const {
  return const_cast<LocalGpuBoard*>(this)->Find(gpu);
}

bool LocalGpuBoard::Drained(int gpu) const {
  const Gpu* g = Find(gpu);
  return g && g->drained;
}

BoardDecision LocalGpuBoard::UpdateOptions(const BoardOptions& options) {
  options_ = options;
  BoardDecision d;
  // (All of them when health checks are now off.)
  d.dispatch = ReleaseSuspects(d);
  return d;
}

// --- Whether a GPU may take a task ---

void LocalGpuBoard::BeginPass() {
  in_pass_ = true;
  probed_in_pass_ = false;
}

void LocalGpuBoard::EndPass() { in_pass_ = false; }

Admission LocalGpuBoard::MayStart(int index) {
  Gpu* gpu = Find(index);
  if (!gpu || gpu->drained) return {false};
  if (!ForeignAllows(*gpu)) return {false};
  if (!TakeHostLock(*gpu)) return {false, std::chrono::milliseconds(250)};
  return {true};
}

void LocalGpuBoard::NothingWaits(int index) {
  if (Gpu* g = Find(index)) g->lock_holder.clear();
}

void LocalGpuBoard::ReleaseIdle() {
  for (auto& gpu : gpu_state_) {
    if (!gpu.busy && gpu.host_lock) gpu.host_lock.reset();
    if (gpu.drained) gpu.lock_holder.clear();  // it waits for nothing
  }
}

bool LocalGpuBoard::TakeHostLock(Gpu& gpu) {
  if (lock_dir_.empty() || gpu.host_lock) return true;
  const std::string path = lock_dir_ + "/gpu" + std::to_string(gpu.index) + ".lock";
  LockAttempt a = FileLock::TryAcquire(path, 0644);
  if (a.lock) {
    if (!gpu.lock_holder.empty())
      spdlog::info("GPU {}: free again ({} let it go)", gpu.index, gpu.lock_holder);
    gpu.host_lock = std::move(a.lock);
    gpu.lock_holder.clear();
    return true;
  }
  std::string holder = a.busy ? a.holder.Describe() : "unknown: " + a.error;
  // A root daemon serves everyone: a lock that a plain user's process holds (any account may
  // open the file and flock it), or one whose holder cannot be told (it exited, a process it
  // started keeps the descriptor), must not hold everyone's work back. Only root's are waited
  // for (another root ckprofd's; profilers never hold one); the user's profiler on that GPU is
  // a foreign process (foreign_gpu_use) like any other.
  if (a.busy && geteuid() == 0 && a.holder.uid != 0) {
    if (holder != gpu.lock_ignored) {
      spdlog::warn(
          "GPU {}: its host lock {} is held by {}, not by an admin's daemon: not waited "
          "for (a user's lock never holds the system daemon back)",
          gpu.index, path, holder);
      gpu.lock_ignored = std::move(holder);
    }
    gpu.lock_holder.clear();
    return true;
  }
  if (holder != gpu.lock_holder) {
    if (a.busy) {
      spdlog::warn("GPU {} is in use by another ckprofd or profiler ({} holds {}): its tasks wait",
                   gpu.index, holder, path);
    } else {
      spdlog::error("GPU {}: {}; its tasks wait", gpu.index, a.error);
    }
    gpu.lock_holder = std::move(holder);
  }
  return false;
}

// --- Foreign processes and GPU state (the watch) ---

void LocalGpuBoard::AttachWatch(GpuWatch* watch) {
  watch_ = watch;
  if (!watch_) return;
  auto ids = watch_->probe().Identities();
  for (auto& g : gpu_state_) {
    if (auto it = ids.find(g.index); it != ids.end()) g.identity = it->second;
  }
  // A first look, so that `ckprof gpus` names what is there before any task starts.
  if (watch_->probe().cheap()) {
    Refresh();
  } else {
    snapshot_asked_ = true;
    watch_->PollNow();
  }
  UpdateWatch();
}

void LocalGpuBoard::Refresh() {
  if (!watch_ || !watch_->probe().cheap()) return;
  auto procs = watch_->probe().Processes();
  snapshot_at_ = std::chrono::steady_clock::now();
  ApplyProcesses(procs ? *procs : std::map<int, std::vector<ProbedProcess>>{});
  for (auto& g : gpu_state_) ReadNow(g);
}

void LocalGpuBoard::OnSnapshot(GpuSnapshot snapshot) {
  snapshot_asked_ = false;
  snapshot_at_ = snapshot.taken;
  if (!snapshot.error.empty()) {
    // Unseen is not busy: a probe that fails holds no GPU back.
    if (snapshot.error != probe_error_) {
      spdlog::warn(
          "cannot see which processes use the GPUs: {}; foreign_gpu_use is not applied "
          "until this works again",
          snapshot.error);
    }
    probe_error_ = snapshot.error;
    ApplyProcesses({});
  } else {
    if (!probe_error_.empty()) spdlog::info("the GPUs can be seen again");
    probe_error_.clear();
    ApplyProcesses(snapshot.processes);
  }
  for (auto& [index, reading] : snapshot.readings) {
    if (Gpu* g = Find(index)) g->reading = reading;
  }
}

void LocalGpuBoard::ApplyProcesses(const std::map<int, std::vector<ProbedProcess>>& processes) {
  const bool look = options_.foreign_gpu_use != ForeignGpuUse::kIgnore;
  for (auto& gpu : gpu_state_) {
    std::vector<GpuUser> foreign;
    if (auto it = processes.find(gpu.index); look && it != processes.end()) {
      for (const ProbedProcess& p : it->second) {
        if (p.ours || (gpu.busy && gpu.run_group > 0 && p.pgid == gpu.run_group)) continue;
        foreign.push_back(p.user);
      }
    }
    auto pids = [](const std::vector<GpuUser>& users) {
      std::set<int64_t> out;
      for (const auto& u : users) out.insert(u.pid);
      return out;
    };
    if (pids(foreign) != pids(gpu.foreign)) {
      if (foreign.empty()) {
        spdlog::info("GPU {}: no foreign process on it any more", gpu.index);
      } else {
        std::string who;
        for (const auto& u : foreign) who += (who.empty() ? "" : ", ") + u.Describe();
        spdlog::warn("GPU {}: in use by {}{}", gpu.index, who,
                     options_.foreign_gpu_use == ForeignGpuUse::kWait
                         ? ": it takes no task until they are gone"
                         : "");
      }
    }
    if (gpu.busy) {
      for (const auto& u : foreign) {
        if (!pids(gpu.contended).count(u.pid)) gpu.contended.push_back(u);
      }
    }
    gpu.foreign = std::move(foreign);
  }
  UpdateWatch();
}

bool LocalGpuBoard::ForeignAllows(Gpu& gpu) {
  if (!watch_ || options_.foreign_gpu_use == ForeignGpuUse::kIgnore) return true;
  const auto now = std::chrono::steady_clock::now();
  if (watch_->probe().cheap()) {
    // Looked at now: once for all GPUs of one dispatch pass, else each time but right after a
    // task's end, whose last look (EndContext) serves the next start on its GPU: they come
    // within a millisecond, as their readings do (ReadNow).
    const bool just_looked = now - end_look_at_ < std::chrono::milliseconds(1);
    if ((!in_pass_ || !probed_in_pass_) && !just_looked) {
      auto procs = watch_->probe().Processes();
      snapshot_at_ = now;
      probed_in_pass_ = in_pass_;
      ApplyProcesses(procs ? *procs : std::map<int, std::vector<ProbedProcess>>{});
    }
  } else if (now - snapshot_at_ >
             std::chrono::milliseconds(static_cast<int64_t>(2000 * options_.foreign_poll_s))) {
    if (!snapshot_asked_) {
      snapshot_asked_ = true;
      watch_->PollNow();  // its snapshot comes back through OnSnapshot, then a dispatch
    }
    return false;
  }
  return options_.foreign_gpu_use != ForeignGpuUse::kWait || gpu.foreign.empty();
}

std::optional<GpuReading> LocalGpuBoard::ReadNow(Gpu& gpu) {
  if (!watch_) return std::nullopt;
  // (A task's end and the next start on its GPU come within a millisecond: one reading.)
  if (watch_->probe().cheap() && (!gpu.reading || UnixNow() - gpu.reading->at > 1e-3)) {
    gpu.reading = watch_->probe().ReadingOf(gpu.index);
  }
  return gpu.reading;
}

void LocalGpuBoard::UpdateWatch() {
  if (!watch_) return;
  bool active = false;
  for (const auto& g : gpu_state_) active = active || g.busy || !g.foreign.empty();
  watch_->SetActive(active);
}

// --- A run on a GPU ---

void LocalGpuBoard::NoteStart(int index) {
  Gpu* gpu = Find(index);
  if (!gpu) return;
  gpu->busy = true;
  gpu->run_group = 0;
  // A foreign process already there (foreign_gpu_use "flag") contends this task too.
  gpu->contended = gpu->foreign;
  gpu->before = ReadNow(*gpu);
}

void LocalGpuBoard::NoteHandle(int index, int64_t handle) {
  if (Gpu* gpu = Find(index)) gpu->run_group = handle;
}

RunContext LocalGpuBoard::EndContext(int index) {
  RunContext context;
  Gpu* g = Find(index);
  if (!g || !watch_) return context;
  // The last look, so that a process that came in the last moments is seen too.
  if (watch_->probe().cheap() && options_.foreign_gpu_use != ForeignGpuUse::kIgnore) {
    auto procs = watch_->probe().Processes();
    if (procs) {
      snapshot_at_ = end_look_at_ = std::chrono::steady_clock::now();
      ApplyProcesses(*procs);
    }
  }
  context.contended = g->contended;
  GpuState state = g->identity;
  state.before = g->before;
  // A reading older than the start (a slow probe's) says nothing of the end.
  if (auto after = ReadNow(*g); after && (!g->before || after->at > g->before->at)) {
    state.after = after;
  }
  context.gpu_state = std::move(state);
  return context;
}

BoardDecision LocalGpuBoard::NoteEnd(int index, const EndOnGpu& end) {
  BoardDecision d;
  Gpu* gpu = Find(index);
  if (!gpu) return d;
  gpu->busy = false;
  const int limit = options_.health_failures;
  if (limit <= 0) return d;
  using Kind = Outcome::Kind;
  if (!end.device_error.empty()) {
    ++gpu->device_errors;
    gpu->last_device_error = end.device_error;
    gpu->error_tasks.emplace_back(end.job_id, end.task_id);
    if (gpu->device_errors >= limit && !gpu->suspect && !gpu->drained) {
      gpu->suspect = true;
      gpu->drained = true;
      d.drained.emplace_back(gpu->index, true);
      spdlog::warn(
          "GPU {}: {} device errors in a row (the last, task {}: {}); it takes no task "
          "until another GPU shows that the profiler works",
          gpu->index, gpu->device_errors, end.task_id, end.device_error);
    }
    d.dispatch = ReleaseSuspects(d);
    return d;
  }
  if (end.outcome != Kind::kSucceeded && end.outcome != Kind::kUnsupported) return d;
  // The profiler works here.
  gpu->device_errors = 0;
  gpu->error_tasks.clear();
  every_gpu_failing_ = false;
  if (gpu->suspect) {  // (a start prepared before it was suspect)
    gpu->suspect = false;
    gpu->drained = false;
    d.drained.emplace_back(gpu->index, false);
    return d;
  }
  // The suspects are broken: drained, and the tasks they failed run again elsewhere.
  for (Gpu& g : gpu_state_) {
    if (!g.suspect) continue;
    g.suspect = false;
    g.drained_by = "ckprofd";
    g.drained_at = UnixNow();
    g.drain_reason = fmt::format(
        "{} device errors in a row while GPU {} ran the profiler (the last: {}); an admin "
        "resumes it with 'ckprof resume {}'",
        g.device_errors, gpu->index, g.last_device_error, g.index);
    spdlog::error("GPU {} drained: {}", g.index, g.drain_reason);
    std::map<int64_t, std::vector<int64_t>> by_job;
    for (const auto& [job_id, task_id] : g.error_tasks) by_job[job_id].push_back(task_id);
    g.error_tasks.clear();
    for (auto& [job_id, ids] : by_job) d.requeue.push_back({g.index, job_id, std::move(ids)});
    d.changed = true;
  }
  return d;
}

bool LocalGpuBoard::ReleaseSuspects(BoardDecision& d) {
  // No GPU that might show the profiler working (one not drained, with no device error since
  // its last working run) is left, or health checks are off: it is the profiler or the
  // driver, not one GPU. The suspects take tasks again (each is suspect anew at its next
  // error and let go again while this holds); their failed tasks stay failed.
  bool any_clean = false, any_suspect = false;
  for (const Gpu& g : gpu_state_) {
    any_suspect = any_suspect || g.suspect;
    any_clean = any_clean || (!g.suspect && !g.drained && g.device_errors == 0);
  }
  if (!any_suspect || (any_clean && options_.health_failures > 0)) return false;
  for (Gpu& g : gpu_state_) {
    if (!g.suspect) continue;
    g.suspect = false;
    g.error_tasks.clear();
    g.drained = false;
    d.drained.emplace_back(g.index, false);
  }
  if (!every_gpu_failing_ && options_.health_failures > 0) {  // once, until a run works again
    spdlog::warn(
        "device errors on every GPU that could take a task: the profiler or the "
        "driver, not one GPU; no GPU is drained for it");
  }
  every_gpu_failing_ = true;
  return true;
}

// --- What an admin and `gpus` see ---

Result<BoardDecision> LocalGpuBoard::SetDrained(int index, bool drained, const std::string& by,
                                                const std::string& reason) {
  Gpu* g = Find(index);
  if (!g) return MakeError("this daemon drives no GPU " + std::to_string(index));
  if (!drained && !g->drained) {
    return MakeError("GPU " + std::to_string(index) + " is not drained: nothing to resume");
  }
  BoardDecision d;
  g->drained = drained;
  d.drained.emplace_back(index, drained);
  g->suspect = false;
  g->device_errors = 0;
  g->error_tasks.clear();
  g->drain_reason = drained ? "drained by " + by + (reason.empty() ? "" : ": " + reason) : "";
  g->drained_by = drained ? by : "";
  g->drained_at = drained ? UnixNow() : 0;
  spdlog::info("GPU {} {} by {}{}", index, drained ? "drained" : "resumed", by,
               reason.empty() ? "" : ": " + reason);
  // An admin's drain may leave the suspects with no GPU that could clear them.
  d.dispatch = ReleaseSuspects(d) || !drained;
  d.changed = true;
  return d;
}

std::vector<DrainRecord> LocalGpuBoard::Drains() const {
  std::vector<DrainRecord> out;
  for (const Gpu& g : gpu_state_) {
    if (g.drained && !g.suspect)
      out.push_back({g.index, g.drained_by, g.drained_at, g.drain_reason});
  }
  return out;
}

Result<BoardDecision> LocalGpuBoard::RestoreDrain(const DrainRecord& drain) {
  Gpu* g = Find(drain.gpu);
  if (!g) return MakeError("this daemon drives no GPU " + std::to_string(drain.gpu));
  BoardDecision d;
  g->drained = true;
  g->suspect = false;
  g->drain_reason = drain.reason;
  g->drained_by = drain.by;
  g->drained_at = drain.at;
  d.drained.emplace_back(drain.gpu, true);
  d.changed = true;
  return d;
}

GpuWait LocalGpuBoard::WhyNot(int index) const {
  const Gpu* g = Find(index);
  if (!g || g->drained) return GpuWait::kDrained;
  if (!g->foreign.empty()) return GpuWait::kForeign;
  if (!g->lock_holder.empty()) return GpuWait::kLocked;
  return GpuWait::kNone;
}

void LocalGpuBoard::Describe(int index, GpuInfo* info) const {
  const Gpu* g = Find(index);
  if (!g) return;
  info->drained = g->drained;
  info->drain_reason = g->drain_reason;
  if (g->drained && !g->suspect) {
    info->drained_by = g->drained_by;
    info->drained_at = g->drained_at;
  }
  if (g->suspect) {
    info->drain_reason = fmt::format(
        "suspect: {} device errors in a row (the last: {}); drained once another GPU runs the "
        "profiler",
        g->device_errors, g->last_device_error);
  }
  info->held_by = g->lock_holder;
  info->foreign = g->foreign;
  info->model = g->identity.name;
  info->reading = g->reading;
}

std::string LocalGpuBoard::ModelOf(int index) const {
  const Gpu* g = Find(index);
  return g ? g->identity.name : "";
}

}  // namespace ckprof

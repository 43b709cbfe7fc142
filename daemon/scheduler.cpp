#include "daemon/scheduler.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "common/ck_command.h"
#include "common/convert.h"
#include "common/json_util.h"
#include "common/outcome.h"
#include "common/repeats.h"
#include "common/text_table.h"
#include "common/wire_fields.h"
#include "daemon/acting_as.h"
#include "daemon/gpu_health.h"
#include "daemon/task_result_codec.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using Kind = Outcome::Kind;

BoardOptions BoardOptionsOf(const SchedulerOptions& o) {
  BoardOptions b;
  b.foreign_gpu_use = o.foreign_gpu_use;
  b.foreign_poll_s = o.foreign_poll_s;
  b.health_failures = o.health_failures;
  return b;
}

// How often at most a user's usage is written with a task's end (see OnRunDone).
constexpr double kUsageStoreInterval_s = 5;

}  // namespace

Scheduler::Scheduler(asio::any_io_executor ex, Store& store, Launcher& launcher,
                     SchedulerOptions options)
    : ex_(ex),
      store_(store),
      launcher_(launcher),
      job_end_runner_(ex),
      options_(std::move(options)),
      policy_(options_.gpus, options_.half_life_s),
      not_before_timer_(ex),
      job_timeout_timer_(ex),
      store_retry_timer_(ex),
      end_retry_timer_(ex),
      handle_flush_timer_(ex),
      host_lock_timer_(ex),
      step_timer_(ex),
      compact_timer_(ex) {
  for (int g : options_.gpus) {
    Gpu gpu;
    gpu.index = g;
    gpus_.push_back(std::move(gpu));
  }
  if (launcher_.Remote()) {
    board_ = std::make_unique<SlotBoard>(options_.gpus, launcher_.DrainAdvice());
  } else {
    board_ =
        std::make_unique<LocalGpuBoard>(options_.gpus, options_.lock_dir, BoardOptionsOf(options_));
  }
  policy_.SetUserGpuCap(options_.max_gpus_per_user);
}

Scheduler::~Scheduler() = default;

void Scheduler::UpdateOptions(const SchedulerOptions& o) {
  std::vector<int> gpus = options_.gpus;
  std::string lock_dir = options_.lock_dir;
  options_ = o;
  options_.gpus = gpus;  // the GPU set and its locks are fixed for the daemon's life
  options_.lock_dir = lock_dir;
  policy_.SetHalfLife(options_.half_life_s);
  const bool cap_changed = policy_.user_gpu_cap() != options_.max_gpus_per_user;
  policy_.SetUserGpuCap(options_.max_gpus_per_user);
  // (A board lets its suspect GPUs go when health checks are now off; a changed per-user cap
  // may start work.)
  const BoardDecision d = board_->UpdateOptions(BoardOptionsOf(options_));
  Apply(d);
  if (d.dispatch || cap_changed) Dispatch();
}

void Scheduler::AttachGpuWatch(GpuWatch* watch) { board_->AttachWatch(watch); }

void Scheduler::RefreshGpus() { board_->Refresh(); }

void Scheduler::OnGpuSnapshot(GpuSnapshot snapshot) {
  board_->OnSnapshot(std::move(snapshot));
  Dispatch();
}

Scheduler::Task Scheduler::TaskFromRecord(const TaskRecord& r) {
  Task t;
  t.id = r.id;
  t.job_id = r.job_id;
  t.position = r.position;
  t.rank = r.rank;
  t.run = r.run;
  t.est_cost = r.est_cost;
  t.attempts = r.attempts;
  t.gpu = r.gpu;
  t.op = ParseOperationType(r.op).value_or(ConvOp::kFwd);
  return t;
}

QueuePolicy::JobParams Scheduler::ParamsOf(const Job& job) {
  const JobRecord& rec = job.rec;
  QueuePolicy::JobParams p;
  p.uid = rec.uid;
  p.priority = rec.priority;
  p.longest_first = rec.order == TaskOrder::kLongestFirst;
  p.paused = rec.cancelled || !rec.held_by.empty() || !job.waiting_on.empty() || job.requeuing;
  p.not_before = rec.not_before;
  p.max_gpus = rec.max_gpus;
  p.gpus = rec.gpus;
  return p;
}

bool Scheduler::Ended(const Job& job) const {
  return !job.requeuing && policy_.Queued(job.rec.id) == 0 && policy_.Running(job.rec.id) == 0 &&
         job.final_count() >= job.total;
}

Scheduler::Gpu* Scheduler::FindGpu(int index) {
  for (auto& g : gpus_) {
    if (g.index == index) return &g;
  }
  return nullptr;
}

void Scheduler::ResolveTarget(Job& job) {
  auto t = ResolveProfiler(job.rec.profiler_path);
  if (t.ok()) {
    job.target = *t;
    job.target_error.clear();
  } else {
    job.target.reset();
    job.target_error = t.error();
  }
}

std::vector<TaskRecord> Scheduler::MakeTaskRecords(const std::vector<CkConfig>& configs, int repeat,
                                                   size_t from, size_t to) {
  const size_t runs = repeat > 1 ? static_cast<size_t>(repeat) : 1;
  to = std::min(to, configs.size());
  from = std::min(from, to);
  // (A large submit's are made a chunk at a time, each next one on the pool while the io
  // thread stores the one before: Service::StoreJob.)
  std::vector<TaskRecord> records((to - from) * runs);
  for (size_t i = from; i < to; ++i) {
    const CkConfig& c = configs[i];
    TaskRecord& t = records[(i - from) * runs];
    t.position = static_cast<int64_t>(i) + 1;
    t.rank = c.priority_rank() > 0 ? c.priority_rank() : t.position;
    t.op = std::string(OperationTypeName(c.op));
    t.config = ConfigJsonText(c);
    t.est_cost = c.Flops();
    t.problem = ProblemKey(c);
    if (runs == 1) continue;
    t.run = 1;
    for (size_t k = 1; k < runs; ++k) {
      TaskRecord& again = records[(i - from) * runs + k];
      again = t;
      again.run = static_cast<int>(k) + 1;
    }
  }
  return records;
}

Result<int64_t> Scheduler::Submit(JobRecord job, const std::vector<CkConfig>& configs) {
  std::vector<TaskRecord> records = MakeTaskRecords(configs, job.repeat);
  return Submit(std::move(job), std::move(records));
}

Result<int64_t> Scheduler::Submit(JobRecord job, std::vector<TaskRecord> records) {
  // At once, in the same steps as a submit that yields between them (daemon/large_jobs.cpp).
  auto id = BeginSubmit(std::move(job), static_cast<int64_t>(records.size()));
  if (!id) return id;
  Status s = AddSubmitTasks(*id, records);
  if (s) s = CommitSubmit(*id);
  if (!s) {
    AbortSubmit(*id);
    return Error{s.error()};
  }
  return id;
}

void Scheduler::Enqueue(Task& t) { policy_.Enqueue(t.job_id, t.key()); }

void Scheduler::Dequeue(Task& t) { policy_.Dequeue(t.job_id, t.key()); }

Scheduler::Task* Scheduler::PickTask(const Gpu& gpu, double now) {
  std::optional<int64_t> id = policy_.Pick(gpu.index, now);
  return id ? &tasks_.at(*id) : nullptr;
}

void Scheduler::Dispatch() {
  if (dispatching_) {
    dispatch_again_ = true;
    return;
  }
  dispatching_ = true;
  do {
    dispatch_again_ = false;
    if (shutting_down_) break;
    const double now = UnixNow();
    board_->BeginPass();
    for (auto& gpu : gpus_) {
      if (policy_.Drained(gpu.index) || gpu.task_id) continue;
      while (!gpu.task_id) {
        Task* t = PickTask(gpu, now);
        if (!t) board_->NothingWaits(gpu.index);
        if (!t || !MayStart(gpu)) break;
        StartTask(*t, gpu, now);
        if (store_retry_timer_.expiry() > std::chrono::steady_clock::now()) break;
      }
    }
    board_->EndPass();
    ArmNotBeforeTimer(now);
  } while (dispatch_again_);
  dispatching_ = false;
  board_->ReleaseIdle();
  Changed();
}

bool Scheduler::MayStart(const Gpu& gpu) {
  const Admission a = board_->MayStart(gpu.index);
  if (a.ok || a.retry_after.count() == 0 || host_lock_armed_) return a.ok;
  host_lock_armed_ = true;
  host_lock_timer_.expires_after(a.retry_after);
  host_lock_timer_.async_wait([this](const asio::error_code& ec) {
    if (ec) return;  // cancelled: the scheduler may be gone
    host_lock_armed_ = false;
    Dispatch();
  });
  return false;
}

void Scheduler::ArmNotBeforeTimer(double now) {
  const double next = policy_.NextNotBefore(now);
  if (next == 0 || next == not_before_armed_) return;
  not_before_armed_ = next;
  ArmAt(not_before_timer_, next, now, [this] {
    not_before_armed_ = 0;
    Dispatch();
  });
}

void Scheduler::ArmAt(asio::steady_timer& timer, double at, double now,
                      std::function<void()> fire) {
  // At most a day at a time: a far-away time must not overflow the clock's duration (the
  // timer then fires early, its caller finds nothing due and arms again).
  const double delay_s = std::clamp(at - now, 0.0, 86400.0);
  timer.expires_after(std::chrono::microseconds(static_cast<int64_t>(delay_s * 1e6) + 1000));
  timer.async_wait([fire = std::move(fire)](const asio::error_code& ec) {
    if (!ec) fire();
  });
}

Scheduler::Start Scheduler::PrepareStart(Task& task, Gpu& gpu) {
  Job& job = jobs_.at(task.job_id);
  Start start;
  start.task_id = task.id;
  start.gpu_index = gpu.index;
  start.attempt = task.attempts + 1;
  // The command: from the stored config and the job's profiler.
  auto config_text = store_.TaskConfig(task.id);
  Result<CkConfig> cfg = Error{config_text ? "" : config_text.error()};
  if (config_text) {
    auto cfg_json = ParseOrderedJson(*config_text);
    cfg = cfg_json ? ConfigFromJson(*cfg_json, static_cast<size_t>(task.position - 1))
                   : Result<CkConfig>(Error{cfg_json.error()});
  }
  // Described even when it cannot start, as `results` describes it.
  if (cfg) start.description = cfg->description();
  if (!cfg) {
    start.error = cfg.error();
  } else if (!job.target) {
    ResolveTarget(job);  // the profiler may have appeared since
  }
  if (start.error.empty() && !job.target) start.error = job.target_error;
  if (start.error.empty()) {
    auto cmd = BuildCommand(*job.target, *cfg);
    if (cmd) {
      start.argv = std::move(*cmd);
    } else {
      start.error = cmd.error();
    }
  }
  start.command = start.argv.empty() ? "" : FormatCommandLine(start.argv);
  return start;
}

void Scheduler::StartTask(Task& task, Gpu& gpu, double now) {
  // The config's read and the start's record (or the spawn failure's): one transaction.
  Start start;
  Outcome failure{Kind::kSpawnFailed, 0, 0, ""};  // when the command cannot be built
  std::string failure_json;
  Status s = store_.BeginGroup();
  if (s) {
    start = PrepareStart(task, gpu);
    start.now = now;
    if (start.error.empty()) {
      s = store_.MarkRunning(task.id, start.attempt, gpu.index, now);
    } else {
      failure.reason = start.error;
      failure_json = ResultJson(failure, start.command, -1, nullptr);
      s = store_.MarkRunning(task.id, start.attempt, -1, now);
      if (s) {
        s = store_.FinishAttempt(task.id, start.attempt, failure.kind, StateOf(failure.kind), now,
                                 failure_json, nullptr);
      }
    }
    if (s) {
      s = store_.CommitGroup();
    } else {
      store_.RollbackGroup();
    }
  }
  if (!s) {
    // The state dir is full or read-only: run nothing we cannot record; try again shortly.
    spdlog::error("cannot record the start of task {}: {}; retrying in 1 s", task.id, s.error());
    store_retry_timer_.expires_after(std::chrono::seconds(1));
    store_retry_timer_.async_wait([this](const asio::error_code& ec) {
      if (!ec) Dispatch();
    });
    return;
  }
  if (!start.error.empty()) {
    Dequeue(task);
    task.attempts = start.attempt;
    FinishWithoutRun(task, failure, failure_json, start.description, now);
    return;
  }
  LaunchStart(std::move(start));
}

void Scheduler::LaunchStart(Start start, std::optional<int64_t> adopt) {
  const double now = start.now;
  Task& task = tasks_.at(start.task_id);
  Gpu& gpu = *FindGpu(start.gpu_index);
  Job& job = jobs_.at(task.job_id);
  Dequeue(task);
  const int attempt = start.attempt;
  const std::string& command = start.command;
  const std::string& description = start.description;
  task.attempts = attempt;
  task.gpu = gpu.index;
  policy_.Started(gpu.index, job.rec.id, now);
  if (job.first_start == 0) job.first_start = now;
  if (job.clock_start == 0) {
    job.clock_start = now;
    if (job.rec.job_timeout_s > 0) ArmJobTimeoutTimer();
  }

  RunSpec spec;
  spec.argv = std::move(start.argv);
  // The submitter's own (submit --env) first: the pin variables and markers below win.
  for (const auto& e : job.rec.env) {
    const size_t eq = e.find('=');
    spec.set_env.emplace_back(e.substr(0, eq), e.substr(eq + 1));
  }
  // A remote launcher pins the GPU its cluster grants; `gpu` is only a slot then.
  const bool remote = launcher_.Remote();
  for (const auto& var : options_.pin_env) {
    if (!remote) spec.set_env.emplace_back(var, std::to_string(gpu.index));
  }
  // CUDA numbers GPUs fastest first unless told otherwise; nvidia-smi (the GPU watch) and
  // every other tool number them by PCI bus.
  if (std::find(options_.pin_env.begin(), options_.pin_env.end(), "CUDA_VISIBLE_DEVICES") !=
      options_.pin_env.end()) {
    spec.set_env.emplace_back("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  }
  spec.set_env.emplace_back("CKPROFD_STATE", options_.state_dir);
  spec.set_env.emplace_back("CKPROFD_TASK",
                            std::to_string(task.id) + ":" + std::to_string(attempt));
  if (options_.run_as_owner) {
    spec.uid = job.rec.uid;
    spec.gid = job.rec.gid;
    spec.groups = std::vector<gid_t>(job.rec.groups.begin(), job.rec.groups.end());
    // Another user's profiler gets their environment, not the daemon's (spawn.h).
    if (job.rec.uid != geteuid()) spec.base_env = OwnerEnvironment(job.rec.uid);
  }
  spec.cwd = job.rec.cwd;
  const double timeout = job.rec.timeout_s >= 0 ? job.rec.timeout_s : options_.default_timeout_s;
  spec.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000));
  spec.grace = std::chrono::milliseconds(static_cast<int64_t>(options_.grace_s * 1000));
  spec.capture_head = spec.capture_tail = options_.capture_bytes;
  spec.start_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(options_.start_timeout_s * 1000));
  // The profiler is opened once, here: the run executes this file and its measurement is
  // identified by it, whatever the path (a symlink its user controls) names meanwhile.
  gpu.exec_fd.reset();
  if (!remote && !spec.argv.empty()) {
    // A path the submitter named is opened with her rights (ActingAs): a root daemon opens no
    // file she could not, in another user's 0700 directory or a device only root may open.
    // The admin's profiler_path is the daemon's own (uid 0: as itself), wherever it lies.
    const bool admins = !options_.admin_profiler_path.empty() &&
                        job.rec.profiler_path == options_.admin_profiler_path;
    ActingAs as(admins ? 0 : job.rec.uid, job.rec.gid, job.rec.groups);
    const int fd = as.ok() ? open(spec.argv[0].c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK) : -1;
    struct stat st {};
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
      gpu.exec_fd.reset(fd);
      spec.exec_fd = fd;
    } else if (fd >= 0) {
      close(fd);  // not a regular file: the exec says what it is
    }
  }
  if (remote) {
    spec.name = job.rec.name.empty() ? "ckprof-" + std::to_string(job.rec.id) : job.rec.name;
    spec.comment = fmt::format("ckprof job {} #{} task {} attempt {} from {}", job.rec.id,
                               task.position, task.id, attempt, options_.remote_tag);
    const std::string owner = job.rec.owner.empty() ? std::to_string(job.rec.uid) : job.rec.owner;
    spec.stem = fmt::format("{}/job-{}/t{}.a{}", owner, job.rec.id, task.id, attempt);
    spec.run_key = task.id * 65536 + attempt;
  }

  gpu.task_id = task.id;
  gpu.busy_since = now;
  board_->NoteStart(gpu.index);
  const int64_t task_id = task.id;
  const int gpu_index = gpu.index;
  spec.on_started = [this, task_id, attempt](pid_t pid) { RecordHandle(task_id, attempt, pid); };
  spec.on_output = [this, task_id](bool is_stderr, std::string_view data) {
    EmitOutput(task_id, is_stderr, data);
  };
  EmitStarted(task_id, gpu_index, attempt);
  auto on_done = [this, task_id, gpu_index, attempt, command, description](RunResult r) {
    OnRunDone(task_id, gpu_index, attempt, command, description, std::move(r));
  };
  gpu.run = adopt ? launcher_.Adopt(std::move(spec), *adopt, std::move(on_done))
                  : launcher_.Start(std::move(spec), std::move(on_done));
  spdlog::info("{} job {} task {} (#{}, rank {}) {} {}, attempt {}: {}", adopt ? "follow" : "start",
               job.rec.id, task.id, task.position, task.rank,
               remote ? fmt::format("in {}, slot", launcher_.Name()) : "on GPU", gpu.index, attempt,
               command);
  Emit(job, EventKind::kTaskStarted, [&](JobEventFrame& e) {
    e.task_id = task.id;
    e.position = task.position;
    e.priority_rank = task.rank;
    e.operation = OperationTypeName(task.op);
    e.description = description;
    e.gpu = remote ? -1 : gpu.index;  // a remote executor grants the GPU later
    e.attempt = attempt;
  });
}

// With the next transaction (usually another task's start or end, within milliseconds), or on
// its own a moment later.
void Scheduler::RecordHandle(int64_t task_id, int attempt, int64_t handle) {
  for (auto& g : gpus_) {
    if (g.task_id == task_id) board_->NoteHandle(g.index, handle);
  }
  store_.SetHandleLater(task_id, attempt, handle);
  if (launcher_.Remote()) {
    // A remote executor's id of the run: stored now, so that a restart follows the run instead
    // of starting the task again.
    if (Status s = store_.FlushHandles(); !s) {
      spdlog::error("cannot record the {} job of task {}: {}", launcher_.Name(), task_id,
                    s.error());
    }
    return;
  }
  if (handle_flush_armed_) return;
  handle_flush_armed_ = true;
  handle_flush_timer_.expires_after(std::chrono::milliseconds(100));
  handle_flush_timer_.async_wait([this](const asio::error_code& ec) {
    if (ec) return;  // cancelled: the scheduler may be gone
    handle_flush_armed_ = false;
    if (Status s = store_.FlushHandles(); !s) {
      spdlog::error("cannot record the process groups of started tasks: {}", s.error());
    }
  });
}

void Scheduler::FinishWithoutRun(Task& task, const Outcome& outcome, const std::string& result_json,
                                 const std::string& description, double now) {
  Job& job = jobs_.at(task.job_id);
  CountFinal(job, outcome.kind, +1);
  spdlog::warn("job {} task {} (#{}) not started: {}", job.rec.id, task.id, task.position,
               outcome.Summary());
  const Task done = task;
  Forget(task.id, StateOf(outcome.kind), outcome.Summary());
  EmitTaskFinished(job, [&] {
    return EventResult(done, StateOf(outcome.kind), done.attempts, -1, now, now, result_json,
                       description);
  });
  MaybeFinishJob(job, now);
}

TaskResult Scheduler::EventResult(const Task& task, TaskState state, int attempt, int gpu,
                                  double started_at, double ended_at,
                                  const std::string& result_json,
                                  const std::string& description) const {
  // Read back from what was stored, as `results` reads it.
  TaskRecord rec;
  rec.id = task.id;
  rec.job_id = task.job_id;
  rec.position = task.position;
  rec.rank = task.rank;
  rec.run = task.run;
  rec.op = OperationTypeName(task.op);
  rec.state = state;
  rec.attempts = attempt;
  rec.gpu = gpu;
  rec.started_at = started_at;
  rec.ended_at = ended_at;
  rec.result = result_json;
  TaskResult tr = TaskResultFromRecord(rec, /*with_output=*/false);
  tr.description = description;
  return tr;
}

void Scheduler::EmitTaskFinished(Job& job, const std::function<TaskResult()>& result) {
  Emit(job, EventKind::kTaskFinished, [&](JobEventFrame& e) { e.task = result(); });
}

void Scheduler::OnRunDone(int64_t task_id, int gpu_index, int attempt, const std::string& command,
                          const std::string& description, RunResult r) {
  PendingEnd end;
  end.now = UnixNow();
  end.task_id = task_id;
  end.gpu_index = gpu_index;
  end.attempt = attempt;
  end.command = command;
  end.description = description;
  const Task& task = tasks_.at(task_id);
  const Job& job = jobs_.at(task.job_id);
  const Gpu* gpu = FindGpu(gpu_index);
  // Interrupted by our own shutdown: requeued for the next start while attempts remain.
  // A device error ends the task like any failure; should its GPU be drained for it
  // (NoteHealth), the task runs again elsewhere.
  if (options_.health_failures > 0) end.device_error = DeviceErrorIn(r);
  // An interruption by our own stop (an admin's SIGTERM, a restart, an upgrade) is not the
  // task's doing and uses up none of its attempts; one by the cluster (a node lost, a
  // preemption) does, as a crash of the daemon does (Recover).
  const bool our_stop = r.outcome.kind == Kind::kInterrupted && shutting_down_;
  end.requeue = r.outcome.kind == Kind::kInterrupted && !job.rec.cancelled &&
                (our_stop || attempt < options_.max_attempts);
  end.outcome = r.outcome.kind;
  end.state = end.requeue ? TaskState::kQueued : StateOf(r.outcome.kind);
  end.started_at = gpu ? gpu->busy_since : end.now;
  end.elapsed = r.elapsed_s > 0 ? r.elapsed_s : end.now - end.started_at;
  policy_.Charge(job.rec.uid, end.elapsed, end.now);
  const QueuePolicy::Usage u = policy_.UsageOf(job.rec.uid);
  end.usage = UsageRecord{job.rec.uid, u.usage, u.updated_at};
  // A user's usage goes to the Store with an end at most every few seconds (and all of it when
  // the daemon stops): written with every end, it cost a statement and a page per task. A crash
  // forgets at most those seconds of GPU time, a rounding error next to the hour's half-life.
  end.store_usage = end.now - usage_stored_at_[job.rec.uid] >= kUsageStoreInterval_s;
  const RunContext context = board_->EndContext(gpu_index);
  end.result_json = ResultJson(r.outcome, command, gpu_index, &r, &context);
  if (!end.requeue) end.measurement = MeasurementOf(task, job, FindGpu(gpu_index), r, context);
  if (Gpu* g = FindGpu(gpu_index)) g->exec_fd.reset();
  end.run = std::move(r);
  // The end and the start of the GPU's next task: recorded in one transaction, applied to memory
  // once it committed.
  std::optional<Start> next;
  Status s = store_.BeginGroup();
  if (s) s = RecordEnd(end);
  if (s) next = PrepareNextStart(end);
  if (s && next) s = store_.MarkRunning(next->task_id, next->attempt, gpu_index, next->now);
  if (s) {
    s = store_.CommitGroup();
  } else if (store_.grouped()) {
    store_.RollbackGroup();
  }
  if (!s) {
    // The state dir is full or failing. Until the end is recorded the task stays running and
    // its GPU stays taken, so that what `status` and `results` say agree and nothing is lost.
    spdlog::error("cannot record the end of task {}: {}; GPU {} waits until it is recorded",
                  task_id, s.error(), gpu_index);
    pending_ends_.push_back(std::move(end));
    ArmEndRetry();
    return;
  }
  ApplyEnd(std::move(end), std::move(next));
}

std::optional<Scheduler::Start> Scheduler::PrepareNextStart(const PendingEnd& end) {
  Gpu* gpu = FindGpu(end.gpu_index);
  // (After a device error the board may take the GPU out: Dispatch decides, once it has.)
  if (!gpu || policy_.Drained(end.gpu_index) || end.requeue || !end.device_error.empty() ||
      shutting_down_ || !pending_ends_.empty() ||
      store_retry_timer_.expiry() > std::chrono::steady_clock::now()) {
    return std::nullopt;  // left to Dispatch, after the end is applied
  }
  // What the policy will pick once the end is applied: the GPU free, its job one task lighter.
  const double now = UnixNow();
  std::optional<int64_t> picked = policy_.PickAfterEnd(gpu->index, now);
  if (!picked) return std::nullopt;
  // (The ending task is still the GPU's: its own processes are not foreign to the check, and
  // its host lock is held.)
  if (!MayStart(*gpu)) return std::nullopt;
  Start start = PrepareStart(tasks_.at(*picked), *gpu);
  if (!start.error.empty()) return std::nullopt;  // Dispatch records why it cannot start
  start.now = now;
  return start;
}

Status Scheduler::RecordEnd(const PendingEnd& e) {
  return store_.FinishAttempt(e.task_id, e.attempt, e.outcome, e.state, e.now, e.result_json,
                              e.store_usage ? &e.usage : nullptr,
                              e.measurement ? &*e.measurement : nullptr);
}

void Scheduler::ArmEndRetry() {
  end_retry_timer_.expires_after(std::chrono::seconds(1));
  end_retry_timer_.async_wait([this](const asio::error_code& ec) {
    if (ec) return;
    FlushPendingEnds();
    if (!pending_ends_.empty()) ArmEndRetry();
  });
}

void Scheduler::FlushPendingEnds() {
  while (!pending_ends_.empty()) {
    if (Status s = RecordEnd(pending_ends_.front()); !s) return;
    PendingEnd e = std::move(pending_ends_.front());
    pending_ends_.pop_front();
    spdlog::info("the end of task {} is recorded now", e.task_id);
    ApplyEnd(std::move(e));
  }
}

void Scheduler::ApplyEnd(PendingEnd end, std::optional<Start> next) {
  const double now = end.now;
  const int64_t task_id = end.task_id;
  const int gpu_index = end.gpu_index;
  const int attempt = end.attempt;
  const bool requeue = end.requeue;
  const double elapsed = end.elapsed;
  const TaskState state = end.state;
  const std::string& description = end.description;
  const RunResult& r = end.run;
  const Outcome& outcome = r.outcome;
  Task& task = tasks_.at(task_id);
  Job& job = jobs_.at(task.job_id);
  Gpu* gpu = FindGpu(gpu_index);
  if (end.store_usage) usage_stored_at_[end.usage.uid] = now;
  policy_.Stopped(gpu_index);
  if (gpu) {
    gpu->task_id = 0;
    gpu->run = 0;
    ++gpu->tasks_run;
    Apply(
        board_->NoteEnd(gpu_index, EndOnGpu{task.job_id, task_id, end.outcome, end.device_error}));
  }
  job.elapsed_sum += elapsed;
  ++job.elapsed_n;
  if (requeue) {
    if (!shutting_down_) Enqueue(task);
  } else {
    CountFinal(job, outcome.kind, +1);
  }
  if (spdlog::should_log(spdlog::level::info)) {  // (its pieces are formatted before the call)
    spdlog::info(
        "end job {} task {} (#{}) {}: {} in {:.3f} s{}", job.rec.id, task_id, task.position,
        r.placement ? fmt::format("in {} job {} on {} GPU {}", r.placement->executor,
                                  r.placement->job_id, r.placement->node, r.placement->granted)
                    : fmt::format("on GPU {}", gpu_index),
        outcome.Summary(), elapsed,
        r.perf.has_best
            ? fmt::format(", best {:.4g} ms {:.4g} TFlops", r.perf.avg_ms, r.perf.tflops)
            : "");
  }
  const Task done = task;
  if (!requeue) Forget(task_id, state, outcome.Summary());  // `task` is gone from here on
  EmitTaskFinished(job, [&] {
    return EventResult(done, state, attempt, gpu_index, end.started_at, now, end.result_json,
                       description);
  });
  MaybeFinishJob(job, now);
  if (shutting_down_) {  // (then there is no `next`)
    MaybeFinishShutdown();
    return;
  }
  if (next) LaunchStart(std::move(*next));
  Dispatch();
}

void Scheduler::Apply(const BoardDecision& d) {
  for (const auto& [gpu, drained] : d.drained) policy_.SetDrained(gpu, drained);
  for (const auto& r : d.requeue) RequeueFailedOn(r);
  if (!d.drained.empty() || d.changed) StoreDrains();
  if (d.changed) Changed();
}

void Scheduler::StoreDrains() {
  std::vector<DrainRecord> drains = board_->Drains();
  drains.insert(drains.end(), kept_drains_.begin(), kept_drains_.end());
  if (drains == stored_drains_) return;
  if (Status s = store_.SetDrains(drains); !s) {
    spdlog::error("cannot record the drained GPUs (they are drained until ckprofd stops): {}",
                  s.error());
    return;
  }
  stored_drains_ = std::move(drains);
}

Status Scheduler::RestoreDrains() {
  auto drains = store_.Drains();
  if (!drains) return Error{drains.error()};
  stored_drains_ = *drains;
  for (const DrainRecord& r : *drains) {
    auto d = board_->RestoreDrain(r);
    if (!d) {
      // (Its drain is kept for when the GPU is driven again.)
      spdlog::warn("GPU {} was drained ({}), but {}: its drain is kept, not applied", r.gpu,
                   r.reason, d.error());
      kept_drains_.push_back(r);
      continue;
    }
    spdlog::info("GPU {} is still drained: {}", r.gpu, r.reason);
    for (const auto& [gpu, drained] : d->drained) policy_.SetDrained(gpu, drained);
  }
  return Status::Ok();
}

void Scheduler::RequeueFailedOn(const BoardDecision::Requeue& r) {
  const int64_t job_id = r.job_id;
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || it->second.rec.finished_at > 0 || it->second.rec.cancelled) {
    spdlog::warn(
        "GPU {}: job {} has ended: 'ckprof retry {}' runs the {} task(s) it failed "
        "again",
        r.gpu, job_id, job_id, r.task_ids.size());
    return;
  }
  auto requeued = RequeueFinal(it->second, r.task_ids);
  if (!requeued) {
    spdlog::error("job {}: cannot requeue the tasks GPU {} failed: {}", job_id, r.gpu,
                  requeued.error());
  } else {
    spdlog::info("job {}: {} task(s) GPU {} failed run again elsewhere", job_id, *requeued, r.gpu);
  }
}

void Scheduler::MaybeFinishShutdown() {
  if (!shutdown_done_ || (!launcher_.Remote() && running_count() > pending_ends_.size())) return;
  // Only ends that cannot be recorded are left: one last try, then they stay "running" in
  // the store and the next start requeues them as interrupted.
  FlushPendingEnds();
  if (!pending_ends_.empty()) {
    spdlog::error("{} task end(s) could not be recorded; they run again after the restart",
                  pending_ends_.size());
  }
  StoreUsage();
  auto done = std::move(shutdown_done_);
  shutdown_done_ = nullptr;
  done();
}

void Scheduler::StoreUsage() {
  std::vector<UsageRecord> usage;
  for (const auto& [uid, u] : policy_.AllUsage()) {
    if (u.updated_at > 0) usage.push_back(UsageRecord{uid, u.usage, u.updated_at});
  }
  if (Status s = store_.SetUsage(usage); !s) {
    spdlog::error("cannot record the users' GPU time: {}", s.error());
  }
}

void Scheduler::CountFinal(Job& job, Kind kind, int delta) { job.counts.Add(StateOf(kind), delta); }

void Scheduler::MaybeFinishJob(Job& job, double now) {
  if (!Ended(job)) return;
  if (job.rec.finished_at == 0) {
    job.rec.finished_at = now;
    if (Status s = store_.SetJobFinished(job.rec.id, now); !s) {
      spdlog::error("cannot record the end of job {}: {}", job.rec.id, s.error());
    }
    spdlog::info("job {} {}: {}", job.rec.id, job.rec.cancelled ? "cancelled" : "finished",
                 MakeSummary(job).counts.Describe());
    if (!shutting_down_) RunOnEnd(job);
    SettleDependents(job.rec.id);
  }
  Emit(job, EventKind::kJobFinished);
}

bool Scheduler::JobEnded(int64_t job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() || Ended(it->second);
}

std::vector<JobRecord> Scheduler::UnendedJobRecords() const {
  std::vector<JobRecord> out;
  for (const auto& [id, job] : jobs_) {
    if (!Ended(job)) out.push_back(job.rec);
  }
  return out;
}

void Scheduler::Emit(Job& job, EventKind kind, const std::function<void(JobEventFrame&)>& fill) {
  const bool job_finished = kind == EventKind::kJobFinished;
  // Nobody to tell: not even built.
  if (std::all_of(job.watchers.begin(), job.watchers.end(),
                  [&](const JobWatcher* w) { return !job_finished && w->EndOnly(); })) {
    return;
  }
  JobEventFrame frame;
  frame.event = kind;
  frame.job_id = job.rec.id;
  if (fill) fill(frame);
  frame.job = MakeSummary(job);
  JobEvent event;
  event.job_finished = job_finished;
  AppendObject(event.frame, frame);
  event.frame += '\n';
  // Watchers may remove themselves while being told; iterate over a copy.
  auto watchers = job.watchers;
  for (JobWatcher* w : watchers) {
    // (One removed meanwhile may be gone: asked nothing before it is found still there.)
    if (std::find(job.watchers.begin(), job.watchers.end(), w) == job.watchers.end()) continue;
    if (job_finished || !w->EndOnly()) w->OnJobEvent(event);
  }
}

void Scheduler::AddWatcher(int64_t job_id, JobWatcher* w) {
  auto it = jobs_.find(job_id);
  if (it != jobs_.end()) it->second.watchers.push_back(w);
}

void Scheduler::RemoveWatcher(int64_t job_id, JobWatcher* w) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  std::erase(it->second.watchers, w);
}

bool Scheduler::MayActOn(const Job& job, const Identity& who) const {
  return who.admin || who.uid == job.rec.uid;
}

Status Scheduler::Cancel(int64_t job_id, const Identity& who, const std::vector<int>& positions) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return MakeError("no job " + std::to_string(job_id));
  Job& job = it->second;
  if (!positions.empty()) {
    if (Status s = CheckCancelTasks(job_id, who, positions); !s) return s;
    TasksCancelled done;
    if (Status s = CancelTasks(job_id, who, positions, done); !s) return s;
    return EndCancelTasks(job_id, who, positions, done);
  }
  if (Status s = MayCancel(job, who); !s) return s;
  // Nothing is changed for a job that has ended: a finished job stays finished.
  if (job.rec.cancelled) {
    return MakeError("job " + std::to_string(job_id) + " already " +
                     (JobEnded(job_id) ? "cancelled" : "being cancelled") + ": nothing to cancel");
  }
  if (JobEnded(job_id)) {
    return MakeError("job " + std::to_string(job_id) + " already finished: nothing to cancel");
  }
  const std::string by = "cancelled by " + who.user;
  spdlog::info("job {} cancelled by {} (uid {})", job_id, who.user, who.uid);
  return CancelJob(job, by, by);
}

Status Scheduler::CancelJob(Job& job, const std::string& reason, const std::string& why) {
  const int64_t job_id = job.rec.id;
  // A retry still queueing its tasks again stops where it is (a million of them are not all
  // queued now to be cancelled at once): the cancel takes those it queued; the rest stay as
  // they ended, and those its cancel's mark had ended are marked again.
  if (Status s = store_.SetJobCancelled(job_id, true, reason); !s) return s;
  const bool mark_anyway = DropRequeuing(job_id);
  job.rec.cancelled = true;
  job.rec.cancel_reason = reason;
  policy_.UpdateJob(job_id, ParamsOf(job));
  const double now = UnixNow();
  const size_t queued = policy_.Queued(job_id);
  for (auto& g : gpus_) {
    if (g.task_id && tasks_.at(g.task_id).job_id == job_id) launcher_.Cancel(g.run);
  }
  // Paused from now on (the cancel is stored); its queued tasks end in steps, the first now.
  Status stepped = CancelInSteps(job_id, why, now, mark_anyway);
  if (!stepped) return stepped;
  spdlog::info("job {} cancelled ({}): {} queued task(s) dropped", job_id, reason, queued);
  MaybeFinishJob(job, now);
  Changed();
  return Status::Ok();
}

Status Scheduler::CancelQueued(Job& job, const std::vector<int64_t>& ids, const std::string& why,
                               double now) {
  Outcome o{Kind::kCancelled, 0, 0, why};
  if (Status s =
          store_.SetTasksState(ids, TaskState::kCancelled, ResultJson(o, "", -1, nullptr), now);
      !s) {
    return s;
  }
  ForgetCancelled(job, ids, o.Summary());
  return Status::Ok();
}

void Scheduler::ForgetCancelled(Job& job, const std::vector<int64_t>& ids,
                                const std::string& summary) {
  for (int64_t id : ids) {
    Dequeue(tasks_.at(id));
    CountFinal(job, Kind::kCancelled, +1);
    Forget(id, TaskState::kCancelled, summary);
  }
}

// The positions a job has: an error naming the first it has not.
Status Scheduler::CheckPositions(const Job& job, const std::vector<int>& positions) const {
  const int64_t configs = job.total / std::max(job.rec.repeat, 1);
  for (int p : positions) {
    if (p < 1 || p > configs) {
      return MakeError("job " + std::to_string(job.rec.id) + " has no task #" + std::to_string(p) +
                       " (its tasks are #1 to #" + std::to_string(configs) + ")");
    }
  }
  return Status::Ok();
}

Status Scheduler::MayCancel(const Job& job, const Identity& who) const {
  if (MayActOn(job, who)) return Status::Ok();
  return MakeError("job " + std::to_string(job.rec.id) + " belongs to " + job.rec.owner +
                   "; only its owner or an admin may cancel it");
}

Status Scheduler::CheckCancelTasks(int64_t job_id, const Identity& who,
                                   const std::vector<int>& positions) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return MakeError("no job " + std::to_string(job_id));
  const Job& job = it->second;
  if (Status s = MayCancel(job, who); !s) return s;
  if (Status s = CheckPositions(job, positions); !s) return s;
  if (job.requeuing) return StillRequeuing(job_id, "cancel tasks of it");
  return Status::Ok();
}

Status Scheduler::CancelTasks(int64_t job_id, const Identity& who, std::span<const int> positions,
                              TasksCancelled& done) {
  const auto started = std::chrono::steady_clock::now();
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return MakeError("job " + std::to_string(job_id) + " was removed");
  Job& job = it->second;
  if (job.requeuing) return StillRequeuing(job_id, "cancel tasks of it");
  const std::set<int64_t> wanted(positions.begin(), positions.end());
  std::vector<int64_t> queued;
  if (policy_.Queued(job_id) > wanted.size() * 64) {
    // Many queued (a million): the named tasks' rows looked up, not every queued one.
    auto rows = RowsAt(job_id, std::vector<int>(positions.begin(), positions.end()));
    if (!rows) return MakeError(rows.error());
    for (const auto& r : *rows) {
      auto t = tasks_.find(r.id);
      if (t != tasks_.end() && policy_.IsQueued(job_id, t->second.key())) queued.push_back(r.id);
    }
  } else {
    for (int64_t id : policy_.QueuedTasks(job_id)) {
      if (wanted.count(tasks_.at(id).position)) queued.push_back(id);
    }
  }
  std::vector<Gpu*> running;
  for (auto& g : gpus_) {
    if (!g.task_id) continue;
    const Task& t = tasks_.at(g.task_id);
    if (t.job_id == job_id && wanted.count(t.position)) running.push_back(&g);
  }
  if (!queued.empty() || !running.empty()) {
    const double now = UnixNow();
    if (Status s = CancelQueued(job, queued, "cancelled by " + who.user, now); !s) return s;
    for (Gpu* g : running) launcher_.Cancel(g->run);
    done.queued += static_cast<int64_t>(queued.size());
    done.running += static_cast<int64_t>(running.size());
    MaybeFinishJob(job, now);
    Changed();
  }
  TookCancelStep(static_cast<int64_t>(positions.size()),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return Status::Ok();
}

Status Scheduler::EndCancelTasks(int64_t job_id, const Identity& who,
                                 const std::vector<int>& positions, const TasksCancelled& done) {
  if (done.queued == 0 && done.running == 0) {
    return MakeError("job " + std::to_string(job_id) + " " + TaskListText(positions) +
                     " already ended: nothing to " + "cancel ('ckprof retry " +
                     std::to_string(job_id) + " " + std::to_string(positions.front()) +
                     "' runs it again)");
  }
  spdlog::info("job {}: {} queued and {} running task(s) cancelled by {} (uid {})", job_id,
               done.queued, done.running, who.user, who.uid);
  return Status::Ok();
}

Result<int64_t> Scheduler::Retry(int64_t job_id, const Identity& who, const RetryOptions& options) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return MakeError("no job " + std::to_string(job_id));
  Job& job = it->second;
  if (!MayActOn(job, who)) {
    return MakeError("job " + std::to_string(job_id) + " belongs to " + job.rec.owner +
                     "; only its owner or an admin may retry it");
  }
  if (Status s = CheckPositions(job, options.positions); !s) return Error{s.error()};
  if (job.requeuing) return Error{StillRequeuing(job_id, "retry it again").error()};
  // A large job's retry reads its rows in steps (a million of them are not read and queued at
  // once), unless it names tasks and no cancel's mark has to be written out: then only their
  // rows are read.
  const bool large = job.total > StepRows();
  // A cancel under way: its tasks are all cancelled now (the Store has them so already). Of a
  // large job, those it still forgets are taken by the retry's steps, which run after it.
  if (!large || !Forgetting(job_id)) FinishCancelling(job_id);
  if (large) {
    auto marked = store_.HasCancelMark(job_id);
    if (!marked) return Error{marked.error()};
    if (options.positions.empty() || *marked) {
      const bool partial = !options.positions.empty() || options.failed_only;
      return RetryInSteps(job, who, options, /*write_out=*/*marked && partial);
    }
  }
  // Final tasks live in the Store only (their brief rows: no config or result text, since a
  // job may have a million of them).
  auto rows = large ? RowsAt(job_id, options.positions) : store_.JobTasksBrief(job_id);
  if (!rows) return Error{rows.error()};
  const std::set<int64_t> wanted(options.positions.begin(), options.positions.end());
  std::vector<int64_t> ids;
  for (const auto& r : *rows) {
    auto kind = OutcomeOf(r.state);
    if (!kind || tasks_.count(r.id)) continue;
    const bool take = options.failed_only ? IsFailure(*kind)
                      : wanted.empty()    ? Retryable(*kind)
                                          : true;
    if (take && (wanted.empty() || wanted.count(r.position))) ids.push_back(r.id);
  }
  if (options.admit) {
    if (Status s = options.admit(static_cast<int64_t>(ids.size())); !s) return Error{s.error()};
  }
  if (Status s = ApplyRunSettings(job, who, options); !s) return Error{s.error()};
  auto requeued = RequeueFinal(job, ids, &*rows);
  if (requeued && *requeued > 0) {
    spdlog::info("job {}: {} task(s) requeued by {} (uid {})", job_id, *requeued, who.user,
                 who.uid);
    Dispatch();
  }
  return requeued;
}

Status Scheduler::StillRequeuing(int64_t job_id, const std::string& then) const {
  const std::string id = std::to_string(job_id);
  return MakeError("job " + id + ": its retry is still queueing its tasks again (" +
                   RequeuingProgress(job_id) + "); " + then +
                   " once that is done ('ckprof status " + id +
                   "' shows it), or cancel the whole job ('ckprof cancel " + id + "')");
}

Result<std::vector<TaskRecord>> Scheduler::RowsAt(int64_t job_id,
                                                  const std::vector<int>& positions) {
  return store_.JobTasksAt(job_id, positions, /*brief=*/true);
}

Status Scheduler::ApplyRunSettings(Job& job, const Identity& who, const RetryOptions& options) {
  if (!options.timeout_s && !options.profiler_path) return Status::Ok();
  const double timeout = options.timeout_s.value_or(job.rec.timeout_s);
  const std::string profiler = options.profiler_path.value_or(job.rec.profiler_path);
  if (Status s = store_.SetJobRunSettings(job.rec.id, timeout, profiler); !s) return s;
  job.rec.timeout_s = timeout;
  if (profiler != job.rec.profiler_path) {
    job.rec.profiler_path = profiler;
    ResolveTarget(job);
  }
  spdlog::info("job {}: timeout {} s, profiler {} (retry by {})", job.rec.id, job.rec.timeout_s,
               job.rec.profiler_path, who.user);
  return Status::Ok();
}

Result<int64_t> Scheduler::RequeueFinal(Job& job, const std::vector<int64_t>& task_ids,
                                        const std::vector<TaskRecord>* brief_rows) {
  const int64_t job_id = job.rec.id;
  std::vector<TaskRecord> read;
  if (!brief_rows) {
    auto rows = store_.JobTasksBrief(job_id);
    if (!rows) return Error{rows.error()};
    read = std::move(*rows);
    brief_rows = &read;
  }
  std::vector<int64_t> taken(task_ids);  // looked up once per row: sorted
  std::sort(taken.begin(), taken.end());
  std::vector<std::pair<Task, Kind>> retry;  // and how each ended
  std::vector<int64_t> ids, unmarked;        // retried; those with a row of their own
  int64_t marked = 0, marked_retried = 0;    // rows the job's cancel mark ended
  for (const auto& r : *brief_rows) {
    if (r.marked) ++marked;
    if (!std::binary_search(taken.begin(), taken.end(), r.id)) continue;
    auto kind = OutcomeOf(r.state);
    if (!kind || tasks_.count(r.id)) continue;
    retry.emplace_back(TaskFromRecord(r), *kind);
    ids.push_back(r.id);
    if (r.marked) {
      ++marked_retried;
    } else {
      unmarked.push_back(r.id);
    }
    if (r.reused_from && *kind == Kind::kSucceeded) --job.reused;  // it runs this time
  }
  if (ids.empty()) return int64_t{0};
  // When the retry takes every task the cancel's mark ended (`ckprof retry J` of a cancelled
  // job), their rows stay as stored, 'queued', and only the mark goes: a million of them are
  // not written out as cancelled and then back as queued.
  const bool marked_requeued = marked == marked_retried;
  if (job.rec.cancelled) {
    // Retrying a cancelled job revives it.
    if (Status s = store_.SetJobCancelled(job_id, false, "", marked_requeued); !s) {
      return Error{s.error()};
    }
    job.rec.cancelled = false;
    job.rec.cancel_reason.clear();
    policy_.UpdateJob(job_id, ParamsOf(job));
  }
  if (Status s = store_.SetTasksState(marked_requeued ? unmarked : ids, TaskState::kQueued, "", 0);
      !s) {
    return Error{s.error()};
  }
  if (Status s = store_.SetJobFinished(job_id, 0); !s) return Error{s.error()};
  if (job.rec.finished_at > 0) job.clock_start = 0;  // revived: its time limit starts again
  job.rec.finished_at = 0;
  for (const auto& [t, kind] : retry) {
    CountFinal(job, kind, -1);
    Enqueue(tasks_.emplace(t.id, t).first->second);
  }
  return static_cast<int64_t>(ids.size());
}

Status Scheduler::Boost(int64_t job_id, int priority, const Identity& who) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return MakeError("no job " + std::to_string(job_id));
  if (!who.admin) return MakeError("only an admin may change a job's priority");
  Job& job = it->second;
  if (Status s = store_.SetJobPriority(job_id, priority); !s) return s;
  job.rec.priority = priority;
  policy_.UpdateJob(job_id, ParamsOf(job));
  Dispatch();
  return Status::Ok();
}

Status Scheduler::SetDrained(int gpu_index, bool drained, const Identity& who,
                             const std::string& reason) {
  if (!who.admin) return MakeError("only an admin may drain or resume a GPU");
  auto d = board_->SetDrained(gpu_index, drained, who.user, reason);
  if (!d) return MakeError(d.error());
  Apply(*d);
  if (d->dispatch) Dispatch();
  Changed();
  return Status::Ok();
}

JobSummary Scheduler::MakeSummary(const Job& job) const {
  JobSummary s;
  s.id = job.rec.id;
  s.owner_uid = job.rec.uid;
  s.owner = job.rec.owner;
  s.name = job.rec.name;
  s.priority = job.rec.priority;
  s.order = job.rec.order;
  s.total = job.total;
  s.counts = job.counts;
  s.counts.at(TaskState::kQueued) = static_cast<int64_t>(policy_.Queued(job.rec.id));
  s.counts.at(TaskState::kRunning) = policy_.Running(job.rec.id);
  s.reused = job.reused;
  for (const auto& g : gpus_) {
    // (Under a remote executor the indexes are slots, not GPUs: none is named.)
    if (g.task_id && tasks_.at(g.task_id).job_id == job.rec.id && !launcher_.Remote()) {
      s.gpus_in_use.push_back(g.index);
    }
  }
  s.allowed_gpus = job.rec.gpus;
  s.max_gpus = job.rec.max_gpus;
  s.timeout_s = job.rec.timeout_s >= 0 ? job.rec.timeout_s : options_.default_timeout_s;
  s.not_before = job.rec.not_before;
  s.job_timeout_s = job.rec.job_timeout_s;
  s.submitted_at = job.rec.submitted_at;
  s.started_at = job.first_start;
  s.finished_at = job.rec.finished_at;
  const bool ended = Ended(job);
  if (!ended && job.clock_start > 0 && job.rec.job_timeout_s > 0) {
    s.job_deadline = job.clock_start + job.rec.job_timeout_s;
  }
  if (ended) {
    s.state = job.rec.cancelled ? JobState::kCancelled : JobState::kFinished;  // no eta_s
  } else if (job.rec.cancelled) {
    s.state = JobState::kCancelling;
  } else if (!job.rec.held_by.empty()) {
    s.state = JobState::kHeld;
  } else if (s.counts.running() > 0) {
    s.state = JobState::kRunning;
  } else if (job.rec.not_before > UnixNow() || !job.waiting_on.empty() || job.requeuing) {
    // (Also once some of it ran: a retry of a deferred job waits for its time again.)
    s.state = JobState::kWaiting;
  } else {
    s.state = s.done() > 0 ? JobState::kRunning : JobState::kQueued;
  }
  if (!ended && job.elapsed_n > 0) {
    double avg = job.elapsed_sum / static_cast<double>(job.elapsed_n);
    double lanes = std::max<double>(1, s.counts.running());
    s.eta_s =
        avg *
        (static_cast<double>(s.counts.queued()) + 0.5 * static_cast<double>(s.counts.running())) /
        lanes;
  }
  s.profiler = job.target ? job.target->Describe() : "not found: " + job.target_error;
  s.repeat = job.rec.repeat > 1 ? job.rec.repeat : 1;
  if (!ended) s.held_by = job.rec.held_by;
  s.after = job.rec.after;
  s.after_ok = job.rec.after_ok;
  if (job.rec.cancelled) s.cancel_reason = job.rec.cancel_reason;
  return s;
}

Result<JobSummary> Scheduler::Summary(int64_t job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return MakeError("no job " + std::to_string(job_id));
  JobSummary s = MakeSummary(it->second);
  s.waiting_reason = WaitingReason(it->second, s);
  s.estimated_start = EstimatedStart(it->second, s);
  s.on_end = it->second.rec.on_end_result;  // (status J only: not in each event's summary)
  return s;
}

std::vector<JobSummary> Scheduler::List(bool include_finished) const {
  std::vector<JobSummary> out;
  for (const auto& [id, job] : jobs_) {
    if (!include_finished && JobEnded(id)) continue;
    out.push_back(MakeSummary(job));
    out.back().waiting_reason = WaitingReason(job, out.back());
  }
  return out;
}

UserUse Scheduler::UseOf(uint32_t uid) const {
  UserUse u;
  for (const auto& [id, job] : jobs_) {
    if (job.rec.uid != uid || Ended(job)) continue;
    ++u.jobs;
    u.queued_runs += static_cast<int64_t>(policy_.Queued(id)) + policy_.Running(id);
  }
  // A retry's tasks not queued again yet count as queued.
  for (const Requeuing& r : requeuing_) {
    if (auto it = jobs_.find(r.job_id); it != jobs_.end() && it->second.rec.uid == uid) {
      u.queued_runs += std::max<int64_t>(r.expected - r.requeued, 0);
    }
  }
  // Those being stored count whole: two large submits at once cannot both fit under a limit.
  for (const auto& [id, sub] : submitting_) {
    if (sub.job.rec.uid != uid) continue;
    ++u.jobs;
    u.queued_runs += sub.runs;
  }
  u.gpus_in_use = policy_.RunningOfUser(uid);
  return u;
}

Result<std::vector<TaskResult>> Scheduler::Results(int64_t job_id, bool with_output) {
  if (!jobs_.count(job_id)) return MakeError("no job " + std::to_string(job_id));
  auto rows = store_.JobTasks(job_id);
  if (!rows) return Error{rows.error()};
  std::vector<TaskResult> out;
  out.reserve(rows->size());
  for (const auto& row : *rows) out.push_back(TaskResultFromRecord(row, with_output));
  return out;
}

double Scheduler::NoiseThreshold(int64_t job_id) const {
  auto it = jobs_.find(job_id);
  return it != jobs_.end() ? it->second.rec.noise_threshold : kDefaultNoiseThreshold;
}

std::vector<GpuInfo> Scheduler::Gpus() const {
  std::vector<GpuInfo> out;
  for (const auto& g : gpus_) {
    GpuInfo i;
    i.index = g.index;
    board_->Describe(g.index, &i);
    i.task_id = g.task_id;
    if (g.task_id) {
      i.job_id = tasks_.at(g.task_id).job_id;
      i.position = tasks_.at(g.task_id).position;
      i.owner_uid = jobs_.at(i.job_id).rec.uid;
      i.owner = jobs_.at(i.job_id).rec.owner;
      i.busy_since = g.busy_since;
    }
    i.tasks_run = g.tasks_run;
    if (g.task_id && g.run) i.placement = launcher_.Where(g.run);
    out.push_back(i);
  }
  return out;
}

size_t Scheduler::running_count() const {
  size_t n = 0;
  for (const auto& g : gpus_) n += g.task_id ? 1 : 0;
  return n;
}

void Scheduler::Shutdown(std::function<void()> done) {
  shutting_down_ = true;
  not_before_timer_.cancel();
  job_timeout_timer_.cancel();
  store_retry_timer_.cancel();
  end_retry_timer_.cancel();
  host_lock_timer_.cancel();
  shutdown_done_ = std::move(done);
  // A retry still queueing a large job's tasks again: finished, so that the Store has all of
  // them queued for the next start.
  while (!requeuing_.empty()) {
    const Requeuing& r = requeuing_.front();
    const int64_t job_id = r.job_id, left = r.expected - r.requeued;
    FinishCancelling(job_id);  // (its steps take what a cancel forgets: that first)
    if (Status s = FinishRequeuing(job_id); !s) {
      spdlog::error(
          "job {}: its retry stops with about {} task(s) not queued again ({}); "
          "'ckprof retry {}' once ckprofd is back",
          job_id, left, s.error(), job_id);
      requeuing_.pop_front();
    }
  }
  if (launcher_.Remote()) {
    // The cluster's jobs go on; the next start follows them (Recover).
    spdlog::info("{} task(s) left running in {}; the next ckprofd follows them", running_count(),
                 launcher_.Name());
  } else {
    for (auto& g : gpus_) {
      if (g.task_id && g.run) launcher_.Interrupt(g.run);
    }
  }
  MaybeFinishShutdown();
}

void Scheduler::Changed() {
  board_->UpdateWatch();
  if (on_change) on_change();
}

}  // namespace ckprof

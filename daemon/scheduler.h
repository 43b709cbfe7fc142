// Scheduler: ckprofd's mechanism for running jobs, as Ninja's Builder is to its Plan.
//
// It owns the in-memory view of every job and task (the working set; configs and results stay
// in the Store), asks the QueuePolicy (daemon/queue_policy.h: fair share, priorities, task
// order) which task each free GPU runs next and its GpuBoard (daemon/gpu_board.h: host locks,
// foreign processes, health) whether the GPU may take it, records every transition in the
// Store before acting on it, starts the task through the Launcher, applies what the board
// decides at each end (drains, requeues) and tells the job's watchers. Each GPU runs one task at a
// time; a GPU that frees takes the next task at once. Recover (daemon/recovery.cpp) loads it after
// a stop or a crash.
//
// Single-threaded: construct, call and destroy on the daemon's io thread; callbacks (watchers,
// on_change) are called on it too.
#pragma once

#include <sys/types.h>

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/ck_config.h"
#include "common/json_util.h"
#include "common/profiler_path.h"
#include "common/protocol.h"
#include "common/result.h"
#include "daemon/gpu_board.h"
#include "daemon/gpu_watch.h"
#include "daemon/id_table.h"
#include "daemon/identity.h"
#include "daemon/launcher.h"
#include "daemon/profiler_identity.h"
#include "daemon/queue_policy.h"
#include "daemon/store.h"
#include "daemon/task_result_codec.h"
#include "daemon/unique_fd.h"
#include "daemon/unix_time.h"

namespace ckprof {

struct SchedulerOptions {
  std::vector<int> gpus;  // GPU indexes this daemon drives
  std::vector<std::string> pin_env = {"HIP_VISIBLE_DEVICES"};
  double default_timeout_s = 0;  // per task; 0 = none
  double grace_s = 5;            // SIGTERM -> SIGKILL
  double start_timeout_s = 10;   // from spawn to the profiler's exec (RunSpec::start_timeout)
  // ckprofd's variables that other users' profilers get (ChildEnvironment's allow-list).
  std::vector<std::string> pass_env;
  double half_life_s = 3600;     // fair-share decay
  int max_attempts = 3;          // automatic requeues after interruption
  bool run_as_owner = false;     // root daemon: tasks run as the submitter
  std::string on_job_end;        // a shell command run (as the daemon) when any job ends
  std::string sendmail;          // mails a job's end to its owner (submit --mail); "" = none
  double on_end_timeout_s = 60;  // a job-end command that runs longer is stopped
  size_t capture_bytes = 16384;  // head and tail kept per stream
  // The daemon's own profiler_path (its config's, set by root): opened as the daemon at a
  // start. Any other path a job names is opened with its submitter's rights (ActingAs).
  std::string admin_profiler_path;
  std::string state_dir;  // marks our processes (CKPROFD_STATE)
  // Host-wide per-GPU locks (gpu<N>.lock here), held while a task of ours runs on the GPU and
  // inherited by its profiler; a GPU another daemon holds waits. "" = no host locks.
  std::string lock_dir;
  ForeignGpuUse foreign_gpu_use = ForeignGpuUse::kWait;
  double foreign_poll_s = 0.5;  // a GPU watch's snapshot older than twice this is renewed
  // A GPU whose tasks end with this many device errors in a row (DeviceErrorIn) is drained,
  // once another GPU shows that the profiler works; its tasks go elsewhere. 0 = never.
  int health_failures = 3;
  // Reuse (submit --reuse auto): a stored success of the same problem, profiler build and GPU
  // model at most this old is copied instead of run; shared between users unless not
  // share_results (then each user reuses their own).
  double reuse_max_age_s = 30 * 86400.0;
  bool share_results = true;
  // A remote launcher's name for this daemon in its jobs' comments: host and state dir.
  std::string remote_tag;
  // A user's tasks running at once, over all their jobs (the QueuePolicy skips a user at it;
  // the config's max_gpus_per_user). 0 = no limit.
  int max_gpus_per_user = 0;
  // Rows per step of a large submit, cancel or removal (daemon/large_jobs.cpp): each step is
  // one transaction, and other requests are served between steps. 0 = as many as take about
  // 2 ms (kStepSeconds in large_jobs.cpp). (Tests set a few hundred, so that a small job takes
  // several steps; also from the environment, CKPROFD_STEP_ROWS.)
  int64_t step_rows = 0;
};

// A job's progress event, as the frame a watcher sends: one JSON object and its newline.
struct JobEvent {
  std::string frame;
  bool job_finished = false;  // the job's last event
  // A followed task's output: a watcher that falls behind may drop it (and says so).
  bool droppable = false;
};

// Receives a job's progress events (see Scheduler for their JSON). Must stay valid until
// removed with RemoveWatcher.
class JobWatcher {
 public:
  virtual ~JobWatcher() = default;
  virtual void OnJobEvent(const JobEvent& event) = 0;
  // Told only the job's end (job_finished): no task event is even built for such watchers.
  virtual bool EndOnly() const { return false; }
};

// What a retry takes and changes (Scheduler::Retry).
struct RetryOptions {
  std::vector<int> positions;  // only these #N (then whatever way they ended); empty = all
  bool failed_only = false;    // only failed, crashed, timed out (and spawn-failed, interrupted)
  std::optional<double> timeout_s;           // the job's new per-task timeout (0 = none)
  std::optional<std::string> profiler_path;  // the job's new profiler (checked by the caller)
  // Asked how many runs the retry would queue again, before anything changes; its refusal
  // (a per-user limit) is the retry's. Null: no limit.
  std::function<Status(int64_t runs)> admit;
};

class Scheduler {
 public:
  Scheduler(asio::any_io_executor ex, Store& store, Launcher& launcher, SchedulerOptions options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Loads the Store, stops profilers a dead daemon left running (their process groups are in
  // the Store; /proc is searched for our marker too), requeues interrupted tasks (up to
  // max_attempts) and starts dispatching. Call once, before anything else.
  Status Recover();

  // Stores a job with its configs (durably) and queues its tasks. `job` carries the owner,
  // options and profiler path. Returns the job id.
  Result<int64_t> Submit(JobRecord job, const std::vector<CkConfig>& configs);
  // The same with the task records already made by MakeTaskRecords (which any thread may call:
  // the daemon makes them on its conversion pool).
  Result<int64_t> Submit(JobRecord job, std::vector<TaskRecord> records);
  // `repeat` > 1: each config becomes that many tasks (runs 1..repeat, next to each other).
  // Those of configs [from, to) only where given (their positions still the whole list's).
  static std::vector<TaskRecord> MakeTaskRecords(const std::vector<CkConfig>& configs,
                                                 int repeat = 1, size_t from = 0,
                                                 size_t to = SIZE_MAX);
  // A submit in steps (daemon/large_jobs.cpp), so that a million tasks do not stall every other
  // client: BeginSubmit stores the job, hidden (a crash before CommitSubmit leaves a job that
  // Recover removes) with ids for `runs` tasks; AddSubmitTasks stores a step's records and
  // queues them, paused; CommitSubmit makes the job whole, visible and runnable (a crash after it
  // keeps it); AbortSubmit forgets it and removes what was stored. The caller yields to the io
  // thread between steps; StepRows says how many records a step should take.
  Result<int64_t> BeginSubmit(JobRecord job, int64_t runs);
  Status AddSubmitTasks(int64_t job_id, std::span<TaskRecord> records);
  Status CommitSubmit(int64_t job_id);
  void AbortSubmit(int64_t job_id);
  // Rows a step of large work takes: step_rows_ (or options_.step_rows, CKPROFD_STEP_ROWS).
  int64_t StepRows() const;
  // Positions a part of a cancel naming tasks should take (CancelTasks), adapted likewise.
  int64_t CancelStepPositions() const;
  int64_t StepSize(int64_t adapted) const;
  // Whether large work (a step of it) should wait a moment: the database's log checkpoints are
  // behind it (Store::LogBehind), for 2 s at most. Where it waits, kLogWaitPoll.
  bool LargeWorkWaits();
  // Large work in steps done outside the Scheduler's own (a cancel naming thousands of tasks):
  // its writes are bulk writing (the log copied by passive checkpoints, no RESTART holding a
  // step back) until LargeWorkEnded, after which the database compacts once quiet.
  void LargeWorkBegins();
  void LargeWorkEnded();
  static constexpr std::chrono::milliseconds kLogWaitPoll{2};

  // Refuses a job whose --after or --after-ok names a job that does not exist (a cycle cannot
  // be made: a job may only wait for jobs older than itself), or an --after-ok job that already
  // ended without every task succeeded (daemon/job_deps.cpp). Submit checks it again.
  Status CheckDependencies(const JobRecord& job) const;
  // `positions` empty: the whole job (it becomes cancelled); else only the tasks at those #N
  // (queued ones end cancelled, running ones are stopped; the job goes on).
  Status Cancel(int64_t job_id, const Identity& who, const std::vector<int>& positions = {});
  // A cancel naming tasks, in parts (Cancel does all three at once): CheckCancelTasks checks the
  // job, the caller's right and every position before anything changes; CancelTasks cancels
  // those of a part of the positions (their rows looked up then: the caller may yield to the
  // io thread between parts, so that 4,096 named tasks of a million-task job are not one
  // stall); EndCancelTasks says what was done, or that nothing was there to cancel. A part
  // finds the job as it is then: gone, or being queued again by a retry, it is an error.
  struct TasksCancelled {
    int64_t queued = 0;   // ended cancelled
    int64_t running = 0;  // stopped
  };
  Status CheckCancelTasks(int64_t job_id, const Identity& who,
                          const std::vector<int>& positions) const;
  Status CancelTasks(int64_t job_id, const Identity& who, std::span<const int> positions,
                     TasksCancelled& done);
  Status EndCancelTasks(int64_t job_id, const Identity& who, const std::vector<int>& positions,
                        const TasksCancelled& done);
  // Requeues the job's ended tasks: without positions those that ended failed, crashed, timed
  // out, spawn-failed, interrupted or cancelled; with positions, those tasks however they ended;
  // failed_only keeps the failures alone. New settings apply to every task that starts from now
  // on. Returns how many were requeued.
  Result<int64_t> Retry(int64_t job_id, const Identity& who, const RetryOptions& options = {});
  Status Boost(int64_t job_id, int priority, const Identity& who);
  // Changes a job's settings (daemon/job_edit.cpp): its owner may edit work that has not
  // ended (any priority: it orders the owner's own jobs only; the caller checks the timeout
  // against the user limits); admins anything. Takes effect at the next pick; logged.
  Status Edit(int64_t job_id, const EditOptions& edit, const Identity& who);
  // ckprof hold (`hold`) and release: a held job's queued tasks do not start; its running ones
  // finish. Its owner or an admin may hold it; whoever held it, or an admin, releases it.
  Status Hold(int64_t job_id, bool hold, const Identity& who);
  // What `clean` removes. Jobs named in `job_ids`: each must exist, have ended and be the
  // caller's (an admin: anyone's), else nothing is removed and the error names it. None named:
  // the ended jobs that ended at least `older_than_s` ago, the caller's own or (`everyone`,
  // admins only) anyone's.
  struct CleanOptions {
    double older_than_s = 0;
    bool everyone = false;
    std::vector<int64_t> job_ids;
    bool dry_run = false;  // remove nothing: say what would go
  };
  // Removes those jobs with their tasks, results and measurements. Returns their ids, their
  // tasks counted, and their summaries as they were.
  Result<CleanReply> Clean(const Identity& who, const CleanOptions& options);
  // The daemon's expiry (keep_finished_days): every job that ended before `before`.
  Result<std::vector<int64_t>> ExpireEndedBefore(double before);

  // Task output (daemon/task_log.cpp). The output of the job's tasks at `positions` (empty:
  // every task that has any), a running task's as written so far; each stream cut to its last
  // `lines` lines (0: all that is kept); at most about `budget` bytes, the other tasks counted
  // as omitted.
  Result<LogReply> Log(int64_t job_id, const std::vector<int>& positions, int lines, size_t budget);
  // What `log` shows of a running task of the job instead of its stored row (its output so
  // far, its GPU), by task id: at most one per GPU.
  struct LiveLog {
    int gpu = -1;
    double started_at = 0;
    std::optional<RunOutput> output;
  };
  using LiveLogs = std::map<int64_t, LiveLog>;
  LiveLogs LiveLogsOf(int64_t job_id) const;
  // Log's answer for `rows` (the job's, or those at the positions `named`), for any thread:
  // a large job's whole log is made on the pool from rows read there (Store::ReadJobTasks).
  static LogReply LogOf(JobSummary job, const std::vector<TaskRecord>& rows, bool named, int lines,
                        size_t budget, const LiveLogs& live);
  // Follows the task at `position` (of a repeated config: the run that runs, else the next to
  // run): `first` holds its output so far. Unless `ended` (it is final already), `w` is told
  // TaskLogEvent frames (its output as it comes, each start, then "ended", which is marked
  // job_finished: the last) until StopFollowing.
  struct Following {
    LogReply first;
    bool ended = false;
    int64_t task_id = 0;
  };
  Result<Following> FollowLog(int64_t job_id, int position, int lines, JobWatcher* w);
  void StopFollowing(int64_t task_id, JobWatcher* w);
  // Follows every task of the job (`log J -f`): `first` holds, for each task that runs now, its
  // output so far; once the job has ended (`ended`), every task's, as Log gives them (`lines`
  // and `budget` as Log's). Unless `ended`, `w` is told the TaskLogEvent frames of each of the
  // job's tasks (each start, its output, its "ended"; none marked job_finished), then the job's
  // job_finished event as `watch` gets it (with the job's summary; the last), until
  // StopFollowingJob. (`task_id` is left 0.)
  Result<Following> FollowJobLog(int64_t job_id, int lines, size_t budget, JobWatcher* w);
  void StopFollowingJob(int64_t job_id, JobWatcher* w);
  // An admin drains (or resumes) a GPU, saying why or not (`reason`): kept across restarts.
  Status SetDrained(int gpu, bool drained, const Identity& who, const std::string& reason = "");

  Result<JobSummary> Summary(int64_t job_id) const;
  std::vector<JobSummary> List(bool include_finished) const;
  // The user's jobs that have not ended, their runs not ended (queued or running) and their
  // tasks running now (UserUse's counts; its limits are left for the caller).
  UserUse UseOf(uint32_t uid) const;
  // Every task's result, one per run of a repeated job, in position and run order.
  Result<std::vector<TaskResult>> Results(int64_t job_id, bool with_output);
  // Accounting (daemon/usage.cpp, ckprof usage): per user (and `per_job`, per job) the
  // attempts Store::TallyAttempts counted, with each user's fair-share usage and place now
  // (of `uid` alone unless uid < 0); the window and `you` are left for the caller.
  UsageReply Usage(const std::vector<Store::AttemptTally>& tallies, int64_t uid,
                   bool per_job) const;
  // Which build each executable is (daemon/profiler_identity.h); any thread may use it.
  ProfilerIdentities& profiler_identities() { return identities_; }
  // The job's noise threshold (what its repeated configs' results are merged with).
  double NoiseThreshold(int64_t job_id) const;
  std::vector<GpuInfo> Gpus() const;
  // The cluster's GPU nodes under a remote executor (empty for local GPUs).
  std::vector<ClusterNode> Cluster() { return launcher_.Cluster(); }
  std::vector<AllocationInfo> Allocations() const { return launcher_.Allocations(); }
  bool remote() const { return launcher_.Remote(); }
  // Where tasks run: the launcher's name ("local", "slurm").
  std::string executor() const { return std::string(launcher_.Name()); }
  bool JobExists(int64_t job_id) const { return jobs_.count(job_id) > 0; }
  // Whether the job's retry is still queueing its tasks again, a step at a time (a large job).
  bool RequeuingInSteps(int64_t job_id) const {
    auto it = jobs_.find(job_id);
    return it != jobs_.end() && it->second.requeuing;
  }
  bool JobEnded(int64_t job_id) const;
  // The records of the jobs not ended yet (at start: whose profilers to identify again).
  std::vector<JobRecord> UnendedJobRecords() const;

  void AddWatcher(int64_t job_id, JobWatcher* w);
  void RemoveWatcher(int64_t job_id, JobWatcher* w);

  // Stops dispatching, interrupts every running task (they are requeued on the next start)
  // and calls `done` once all of them were reaped and recorded.
  void Shutdown(std::function<void()> done);

  // Settings that may change on SIGHUP (not the GPU set).
  void UpdateOptions(const SchedulerOptions& options);

  // Watches the GPUs through `watch` (null: nobody watches; the default): foreign processes
  // (foreign_gpu_use) and each task's GPU state. Before a task starts its GPU is looked at:
  // at once with a cheap probe (sysfs), else through the watch's latest snapshot (renewed
  // first when it is older than twice foreign_poll_s). The watch must outlive the Scheduler's
  // use of it; call before Recover. Reads each GPU's identity now.
  void AttachGpuWatch(GpuWatch* watch);
  // A snapshot from the watch: who uses each GPU, and how each GPU is.
  void OnGpuSnapshot(GpuSnapshot snapshot);
  // Looks at the GPUs now when the probe is cheap (before `ckprof gpus` answers).
  void RefreshGpus();

  size_t running_count() const;
  size_t queued_count() const { return policy_.queued_total(); }
  // Called after every change of running/queued counts (for systemd STATUS=).
  std::function<void()> on_change;

 private:
  // A queued or running task (final ones live in the Store only).
  struct Task {
    int64_t id = 0;
    int64_t job_id = 0;
    int64_t position = 0;
    int64_t rank = 0;
    int run = 0;  // 1..repeat in a repeated job
    double est_cost = 0;
    ConvOp op = ConvOp::kFwd;
    int attempts = 0;
    int gpu = -1;
    QueuePolicy::TaskKey key() const { return {id, rank, position, est_cost}; }
  };
  // The one way a stored task becomes a Task.
  static Task TaskFromRecord(const TaskRecord& r);
  struct Job {
    JobRecord rec;
    std::optional<ProfilerTarget> target;
    std::string target_error;  // why the profiler path did not resolve
    // Final tasks by outcome (queued and running: the policy's, not counted here).
    int64_t total = 0;
    TaskCounts counts;
    int64_t reused = 0;  // of the succeeded, copied from a stored success (not run)
    int64_t final_count() const { return counts.ended(); }
    double first_start = 0;
    // When its --job-timeout clock started (its first start; again at a retry's); 0 = not yet.
    double clock_start = 0;
    double elapsed_sum = 0;
    int64_t elapsed_n = 0;
    std::vector<JobWatcher*> watchers;
    // Of its --after and --after-ok jobs, those that have not ended (daemon/job_deps.cpp): it
    // is paused until none is left.
    std::set<int64_t> waiting_on;
    // A retry's tasks are being queued again in steps (Requeuing): paused, and not ended,
    // until the last step.
    bool requeuing = false;
  };
  // What runs on a GPU (or a remote executor's slot); the rest of its state is the board's
  // (board_).
  struct Gpu {
    int index = 0;
    int64_t task_id = 0;
    Launcher::RunId run = 0;
    double busy_since = 0;
    int64_t tasks_run = 0;
    // The running task's profiler, open: what the runner executes (RunSpec::exec_fd), and
    // what its measurement is identified by.
    UniqueFd exec_fd;
  };

  // What the policy knows of a job.
  static QueuePolicy::JobParams ParamsOf(const Job& job);
  // The one test of a job's end: nothing queued, nothing running, every task final.
  bool Ended(const Job& job) const;
  void Dispatch();
  // The policy's pick for a free GPU, or nullptr.
  Task* PickTask(const Gpu& gpu, double now);
  // A task's start: prepared (its command built from the stored config), then recorded in the
  // Store, then launched.
  struct Start {
    int64_t task_id = 0;
    int gpu_index = -1;
    int attempt = 0;
    double now = 0;  // its started_at
    std::vector<std::string> argv;
    std::string command, description;
    std::string error;  // why it cannot start (a spawn failure)
  };
  void StartTask(Task& task, Gpu& gpu, double now);
  // Reads the task's config (inside the caller's Store group) and builds its command line.
  // Changes nothing in memory.
  Start PrepareStart(Task& task, Gpu& gpu);
  // A start recorded in the Store: the task leaves its queue, takes its GPU and its process
  // is launched.
  // `adopt`: a remote run a previous daemon started (its stored handle, 0 when none was
  // stored), followed instead of started (Recover).
  void LaunchStart(Start start, std::optional<int64_t> adopt = std::nullopt);
  // Recover's part for a remote launcher: the tasks that were running are followed again.
  Status AdoptRunning(const std::vector<TaskRecord>& was_running);
  // The run's handle (its process group; a remote executor's id of it), once known: stored.
  void RecordHandle(int64_t task_id, int attempt, int64_t handle);
  void OnRunDone(int64_t task_id, int gpu_index, int attempt, const std::string& command,
                 const std::string& description, RunResult result);
  // A run's end, as recorded in the Store and then applied to memory.
  struct PendingEnd {
    int64_t task_id = 0;
    int gpu_index = -1;
    int attempt = 0;
    bool requeue = false;
    double started_at = 0;  // the attempt's, as stored
    double now = 0, elapsed = 0;
    Outcome::Kind outcome = Outcome::Kind::kSucceeded;
    TaskState state = TaskState::kQueued;  // the task's, once recorded
    std::string command, description, result_json;
    UsageRecord usage;
    bool store_usage = false;  // written with the end
    std::string device_error;  // the line naming a device error (DeviceErrorIn); "" = none
    RunResult run;
    std::optional<MeasurementRecord> measurement;  // a success's figures, for reuse and `best`
  };
  // What ApplyReuse works out at a submit's first step and keeps for its next ones (a million
  // tasks are stored in thousands of steps): whether anything may be reused, the GPU model, the
  // builds, and the lookups made, one per problem and build (forgotten past kMaxReuseLookups).
  struct ReuseLookups {
    bool ready = false;   // worked out
    bool active = false;  // results may be reused
    std::string model;
    std::map<ConvOp, std::string> builds;
    double since = 0;  // measured no earlier than this (reuse_max_age_s)
    int64_t uid = -1;  // only this user's measurements; -1 = everyone's
    std::map<std::pair<std::string, std::string>, std::optional<ReusableRecord>> found;
  };
  static constexpr size_t kMaxReuseLookups = 100000;
  // Reuse at submit (daemon/reuse.cpp): each record of a problem measured with the same
  // profiler build on the GPU model that the job's GPUs are becomes a succeeded task copying
  // that result (reused_from). Returns how many. `lookups`: the submit's, across its steps.
  int64_t ApplyReuse(const JobRecord& job, std::span<TaskRecord> records, ReuseLookups& lookups);
  // The figures of a run that ended, when they may be reused (a success with a best kernel,
  // nothing foreign on its GPU, its profiler build known).
  std::optional<MeasurementRecord> MeasurementOf(const Task& task, const Job& job, const Gpu* gpu,
                                                 const RunResult& r, const RunContext& context);
  // Carries out a board's decision: the policy's drained GPUs, the requeues, what `gpus`
  // shows. The caller dispatches (d.dispatch) where it would not anyway.
  void Apply(const BoardDecision& d);
  // The board's lasting drains, stored when they changed (with those of GPUs this daemon does
  // not drive now, kept as they were); Recover puts them back.
  void StoreDrains();
  Status RestoreDrains();
  // Runs the tasks a drained GPU failed again (those of jobs that have not ended).
  void RequeueFailedOn(const BoardDecision::Requeue& r);
  // Asks the board whether `gpu` may take a task now; arms the host-lock retry when it says
  // to ask again later.
  bool MayStart(const Gpu& gpu);
  // Final tasks `task_ids` of `job` queued again (retry); how many. The caller dispatches.
  // `brief_rows`: the job's JobTasksBrief, when the caller has read them.
  Result<int64_t> RequeueFinal(Job& job, const std::vector<int64_t>& task_ids,
                               const std::vector<TaskRecord>* brief_rows = nullptr);
  // An error naming the first of `positions` (#N) the job has not.
  Status CheckPositions(const Job& job, const std::vector<int>& positions) const;
  // Queued tasks `ids` of `job` end cancelled (stored first), `why` their error ("cancelled by
  // alice").
  Status CancelQueued(Job& job, const std::vector<int64_t>& ids, const std::string& why,
                      double now);
  // The whole job is cancelled (stored first, with `reason`: "cancelled by alice", "job 7
  // failed ..."): its queued tasks end cancelled (in steps), its running ones are stopped.
  // `why`: its tasks' error.
  Status CancelJob(Job& job, const std::string& reason, const std::string& why);
  Status RecordEnd(const PendingEnd& end);
  // The task the end's GPU starts next, prepared for the end's transaction; none when Dispatch
  // is to decide after the end is applied (no task, a requeue, a drained GPU, a failing Store).
  std::optional<Start> PrepareNextStart(const PendingEnd& end);
  // Applies a recorded end to memory, then launches `next` (recorded with it), then dispatches.
  void ApplyEnd(PendingEnd end, std::optional<Start> next = std::nullopt);
  void ArmEndRetry();
  void FlushPendingEnds();
  void MaybeFinishShutdown();
  // Writes every user's usage (a stopping daemon: the ends only write it now and then).
  void StoreUsage();
  // Applies the final end of a task that never reached a process (recorded by StartTask with
  // `result_json`).
  void FinishWithoutRun(Task& task, const Outcome& outcome, const std::string& result_json,
                        const std::string& description, double now);
  void Enqueue(Task& t);
  void Dequeue(Task& t);
  // Drops a task that reached a final state from memory (its record lives in the Store), and
  // ends its followers' streams.
  void Forget(int64_t task_id, TaskState state, const std::string& error);
  // A followed task's output, and its starts (task_log.cpp).
  void EmitOutput(int64_t task_id, bool is_stderr, std::string_view data);
  void EmitStarted(int64_t task_id, int gpu, int attempt);
  // Tells the task's followers and its job's (`last`: the task's followers' last event).
  void EmitLogEvent(int64_t task_id, TaskLogEvent event, bool last);
  // Whether anyone follows the task's output: itself or its job.
  bool LogFollowed(int64_t task_id) const;
  // A task's log entry: its stored result and output, or a running one's output so far.
  static TaskResult LogEntry(const TaskRecord& row, int lines, const LiveLogs& live);
  // Removes ended jobs from memory, and from the Store in steps (they are marked dropped
  // first: nothing loads them again).
  Result<std::vector<int64_t>> RemoveJobs(const std::vector<int64_t>& ids, const std::string& by);
  // Steps of large work (daemon/large_jobs.cpp), each posted to the io thread after the last.
  // A cancelled job's queued tasks end cancelled, at once (see Cancelling), their entries then
  // forgotten a step at a time (the first at once: a small job's cancel is done when it
  // returns). The Store's refusal of the cancel is returned; a later step tries again.
  Status CancelInSteps(int64_t job_id, const std::string& why, double now,
                       bool mark_anyway = false);
  void CancelStep();
  void OnStepTimer(std::error_code ec);
  // Removed jobs' rows deleted a step at a time; `budget` rows at most (0: a step's).
  void DropStep(int64_t budget = 0);
  // Once large work is done: memory given back (TrimHeapSoon), then the database file shrunk
  // (incremental vacuum) and its log truncated, a step at a time while nothing else runs.
  void ArmCompaction();
  void CompactStep();
  // A cancelled job's queued tasks end at once: one row in the Store (MarkQueuedCancelled),
  // not a million rewritten, and the policy's queue of them taken whole (the job is paused
  // first: none starts meanwhile). Only their entries here (tasks_, the taken queue) are
  // forgotten a step at a time, so that the cancel does not free a million at once.
  struct Cancelling {
    int64_t job_id = 0;
    std::string why;  // their error ("cancelled by alice")
    double now = 0;
    bool marked = false;  // the Store has them cancelled (and `taken` holds them)
    bool done = false;    // all forgotten (or a retry revived the job before the mark)
    // Marked even with nothing queued: a retry in steps it stopped had taken the job's
    // previous mark away, so rows not yet visited read 'queued' until this one covers them.
    bool mark_anyway = false;
    QueuePolicy::Taken taken;
    int64_t taken_total = 0;                   // how many were taken
    std::chrono::steady_clock::time_point at;  // when
  };
  // A retry of a large job (every retryable task, or every failed one): the job revived and
  // paused at once (its cancel's mark gone: those rows are 'queued' again), then its rows read
  // a step at a time, in (position, id) order, each final one the retry takes written back to
  // 'queued' and queued here.
  struct Requeuing {
    int64_t job_id = 0;
    std::set<int64_t> wanted;  // the positions named (then however they ended); empty = all
    bool failed_only = false;
    // A partial retry of a job whose cancel's mark ended its queued tasks: the rows of it the
    // retry does not take are written out as cancelled in the steps, and the job revived in
    // the Store (the mark gone) only at the last (before: a crash leaves it cancelled).
    bool write_out = false;
    bool revived = false;    // (write_out) the Store has the job revived
    bool unmarked = false;   // (a whole retry of a cancelled job) its cancel's mark taken away
    double since = 0;        // the retry's time: a task that ended after it is not taken
    int64_t expected = 0;    // what the retry said it queues (the job's counts then)
    int64_t requeued = 0;    // queued again so far
    Store::RowsAfter after;  // the last row read
    bool done = false;
    std::string by;  // who retried it
    std::chrono::steady_clock::time_point at;
  };
  struct Submitting {
    Job job;              // moved to jobs_ by CommitSubmit
    int64_t runs = 0;     // tasks the job will have
    int64_t next_id = 0;  // the next task's id (reserved by the Store)
    int64_t reused = 0;
    ReuseLookups reuse;
  };
  // The cancel stored (the first call) and up to `budget` of its tasks forgotten; how many it
  // took (-1 when the Store refused, logged).
  int64_t CancelSome(Cancelling& c, int64_t budget);
  // A cancel still under way for `job_id` done at once (a retry reads the job's tasks next).
  void FinishCancelling(int64_t job_id);
  // Retry of every retryable (or failed) task of a large job, in steps (Requeuing); what it
  // queues again.
  Result<int64_t> RetryInSteps(Job& job, const Identity& who, const RetryOptions& options,
                               bool write_out);
  // The rows of a job's tasks at `positions` (each run of each; Store::JobTasksAt): of a
  // large job, what a cancel or a retry of named tasks looks at.
  Result<std::vector<TaskRecord>> RowsAt(int64_t job_id, const std::vector<int>& positions);
  // Up to `budget` of its rows read and those taken queued again; rows read (-1 when the Store
  // refused, logged). The last step unpauses the job.
  int64_t RequeueSome(Requeuing& r, int64_t budget);
  // A retry in steps of `job_id` still under way done at once (at shutdown); refused when the
  // Store refuses.
  Status FinishRequeuing(int64_t job_id);
  // A retry in steps of `job_id` stopped where it is, for a cancel of the job: the rows it took
  // are queued (the cancel takes them), the rest stay as they ended. Whether the rows not yet
  // visited need a cancel's mark again (Requeuing::unmarked).
  bool DropRequeuing(int64_t job_id);
  // What a retry in steps of the job has done so far ("1488 of 1000000"); empty when none.
  std::string RequeuingProgress(int64_t job_id) const;
  // The refusal of a request that cannot be met while a retry in steps of the job runs.
  Status StillRequeuing(int64_t job_id, const std::string& then) const;
  // A cancel of `job_id` stored and still forgetting its tasks in steps (they read cancelled).
  bool Forgetting(int64_t job_id) const;
  // Its last step done (and its entry gone): the job may end, its tasks start.
  void Requeued(int64_t job_id);
  void RequeueStep();
  // A retry's changes of the job's timeout and profiler (RetryOptions), stored.
  Status ApplyRunSettings(Job& job, const Identity& who, const RetryOptions& options);
  bool StepsLeft() const {
    return !cancelling_.empty() || !requeuing_.empty() || !dropping_.empty();
  }
  // The queued tasks `ids` of a job, their cancel stored: out of the queue, counted, forgotten.
  void ForgetCancelled(Job& job, const std::vector<int64_t>& ids, const std::string& summary);
  // Adapts step_rows_ to a step that took `seconds` for `rows`; forget_step_ likewise.
  void TookStep(int64_t rows, double seconds);
  void TookForgetStep(int64_t entries, double seconds);
  void TookCancelStep(int64_t positions, double seconds);
  void ArmStep(bool after_failure = false);
  JobSummary MakeSummary(const Job& job) const;
  // Why the job's queued tasks wait (daemon/job_reason.cpp); "" when they do not.
  std::string WaitingReason(const Job& job, const JobSummary& s) const;
  // When the first task of a job that has not started would start (daemon/job_reason.cpp): the
  // work ahead of it (its owner's jobs that Pick serves first; of each other user's, what fair
  // share gives them meanwhile: as much as its owner's, plus their lead in usage), each job's
  // tasks at its measured mean time (else the daemon's), spread over the GPUs it may use as they
  // free. 0 = unknown (held, waiting for jobs, nothing measured yet).
  double EstimatedStart(const Job& job, const JobSummary& s) const;
  void CountFinal(Job& job, Outcome::Kind kind, int delta);
  // Tells the job's watchers a JobEventFrame (built, by `fill` and the job's summary, only
  // when one of them wants it).
  void Emit(Job& job, EventKind kind, const std::function<void(JobEventFrame&)>& fill = nullptr);
  void MaybeFinishJob(Job& job, double now);
  // Dependencies (daemon/job_deps.cpp).
  // Fills job.waiting_on from its dependencies (at submit and at a start); "" or the reason to
  // cancel it instead (an --after-ok job ended without every task succeeded).
  std::string TrackDependencies(Job& job);
  // A job ended: each job waiting for it goes on waiting for the rest, runs, or (--after-ok
  // and it did not succeed) is cancelled, which may end others in turn (a worklist, not a
  // recursion: a chain of a thousand jobs is fine).
  void SettleDependents(int64_t ended_job);
  // The reason a job waiting on `dep` with --after-ok is cancelled ("" = dep succeeded).
  static std::string FailedDependency(const Job& dep);
  // The job's end commands (its --on-end as its owner, the config's on_job_end), started and
  // not waited for (daemon/on_end.cpp); their environment: CKPROF_JOB_ID, _NAME, _STATE, ...
  void RunOnEnd(const Job& job);
  std::vector<std::pair<std::string, std::string>> OnEndEnvironment(const Job& job) const;
  // The environment another user's run starts from (UserEnvironment with pass_env).
  std::vector<std::string> OwnerEnvironment(uint32_t uid) const;
  // Keeps how the job's --on-end ended with the job (the Store, then memory) for its owner's
  // `status`; a job removed meanwhile is left alone.
  void RecordOnEndResult(int64_t job_id, OnEndResult result);
  // `result` is asked only when a watcher wants the task's result.
  void EmitTaskFinished(Job& job, const std::function<TaskResult()>& result);
  // The task_finished event's task, as `results` will read it from the Store.
  TaskResult EventResult(const Task& task, TaskState state, int attempt, int gpu, double started_at,
                         double ended_at, const std::string& result_json,
                         const std::string& description) const;
  void ArmNotBeforeTimer(double now);
  // Calls `fire` on the io thread at unix time `at` (or a day from `now`, whichever is first),
  // unless `timer` is armed again or cancelled first.
  static void ArmAt(asio::steady_timer& timer, double at, double now, std::function<void()> fire);
  // Whole-job time limits (submit --job-timeout, daemon/job_deps.cpp): the timer is armed for
  // the first deadline of a job that runs; at it, each job past its own is cancelled, saying
  // why.
  void ArmJobTimeoutTimer();
  void CancelJobsPastTheirTimeout();
  bool MayActOn(const Job& job, const Identity& who) const;
  // MayActOn, as a cancel's refusal.
  Status MayCancel(const Job& job, const Identity& who) const;
  void ResolveTarget(Job& job);
  void Changed();
  Gpu* FindGpu(int index);

  asio::any_io_executor ex_;
  Store& store_;
  Launcher& launcher_;
  // Job-end commands (on_end.cpp) run on this host whatever the executor: never through
  // launcher_ (under Slurm that would make each a batch job).
  ProcessRunner job_end_runner_;
  SchedulerOptions options_;
  std::map<int64_t, Job> jobs_;
  // Queued and running tasks only, by id: a table that grows by pages of ids, never moving
  // (rehashing) the million tasks it may hold on the io thread at once (daemon/id_table.h).
  IdTable<Task> tasks_;
  std::unordered_map<int64_t, std::vector<JobWatcher*>> followers_;  // `log -f`, by task
  // The jobs waiting for each job (its --after, --after-ok dependents), until it ends.
  std::map<int64_t, std::vector<int64_t>> dependents_;
  std::deque<int64_t> ended_to_settle_;     // SettleDependents' worklist
  std::vector<DrainRecord> stored_drains_;  // as the Store has them
  std::vector<DrainRecord> kept_drains_;    // stored for GPUs this daemon does not drive now
  bool settling_ = false;
  // `log J -f`, by job: each follower, and what tells it the job's end (in the job's watchers).
  struct JobLogFollower {
    JobWatcher* watcher = nullptr;
    std::unique_ptr<JobWatcher> end;
  };
  std::unordered_map<int64_t, std::vector<JobLogFollower>> job_followers_;
  QueuePolicy policy_;                          // the queues, GPUs' jobs and fair-share accounts
  std::map<uint32_t, double> usage_stored_at_;  // when the Store last got a user's usage
  std::vector<Gpu> gpus_;
  // Each GPU's (slot's) own state: locks, foreign processes, health (daemon/gpu_board.h).
  std::unique_ptr<GpuBoard> board_;
  ProfilerIdentities identities_;
  bool dispatching_ = false;
  bool dispatch_again_ = false;
  bool shutting_down_ = false;
  std::function<void()> shutdown_done_;
  asio::steady_timer not_before_timer_;
  asio::steady_timer job_timeout_timer_;
  double job_timeout_armed_ = 0;  // the deadline it is armed for (unix seconds); 0 = none
  asio::steady_timer store_retry_timer_;
  asio::steady_timer end_retry_timer_;
  asio::steady_timer handle_flush_timer_;  // Store::FlushHandles, 100 ms after a start
  asio::steady_timer host_lock_timer_;     // retries GPUs whose host lock another daemon holds
  bool host_lock_armed_ = false;
  bool handle_flush_armed_ = false;
  std::deque<PendingEnd> pending_ends_;  // ends the Store could not record yet, in order
  double not_before_armed_ = 0;
  // Large work in steps (daemon/large_jobs.cpp).
  std::map<int64_t, Submitting> submitting_;  // jobs being stored in steps (not in jobs_ yet)
  std::deque<Cancelling> cancelling_;
  std::deque<Requeuing> requeuing_;
  std::deque<std::pair<int64_t, Store::DropProgress>> dropping_;  // jobs whose rows go
  asio::steady_timer step_timer_;                                 // the next CancelStep or DropStep
  asio::steady_timer compact_timer_;  // CompactStep, once things are quiet
  bool step_armed_ = false;
  // Expires with the Scheduler: what is posted to the io thread checks it first.
  std::shared_ptr<void> alive_ = std::make_shared<char>(0);
  bool compact_wanted_ = false;
  std::optional<std::chrono::steady_clock::time_point> log_wait_since_;  // LargeWorkWaits
  int64_t step_rows_ = 2000;    // adapted to kStepSeconds a step (unless options_.step_rows)
  int64_t forget_step_ = 2000;  // a cancel's entries forgotten a step, adapted likewise
  int64_t cancel_step_ = 256;   // positions of a cancel naming tasks a part, adapted likewise
  int64_t shrink_pages_ = 64;   // pages a compaction step gives back, adapted likewise
};

}  // namespace ckprof

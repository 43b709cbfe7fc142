// Store: ckprofd's durable state in SQLite (WAL) — jobs, tasks, attempts, results and the
// per-user usage that fair share decays.
//
// Every scheduler transition is a Store call that commits before it returns (or a group of
// them that commits at once, see BeginGroup), so the caller may act on it (spawn, answer a
// client) knowing a crash cannot lose it. Submits commit with
// synchronous=FULL (an acknowledged job survives power loss); task transitions with the
// configured durability (NORMAL by default: they survive a daemon crash, and a power loss can
// at worst re-run the last tasks). Single-threaded: call only from the daemon's io thread.
// WAL checkpoints (copying the log into the database file, and their fsyncs) run on a thread
// of their own with a second connection, so that no commit waits for one.
#pragma once

#include <sqlite3.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/outcome.h"
#include "common/protocol.h"
#include "common/result.h"
#include "common/states.h"

namespace ckprof {

struct JobRecord {
  int64_t id = 0;
  uint32_t uid = 0, gid = 0;
  std::vector<uint32_t> groups;  // supplementary groups of the submitter
  std::string owner;             // user name
  std::string name;
  int priority = 0;
  std::vector<int> gpus;  // allowed; empty = any
  int max_gpus = 0;
  TaskOrder order = TaskOrder::kRank;  // of the job's tasks
  double not_before = 0;
  double timeout_s = 0;  // 0 = none
  std::string profiler_path;
  std::string cwd;
  std::string input_format;
  bool cancelled = false;
  double submitted_at = 0;
  double finished_at = 0;
  int repeat = 1;                // runs of each config (submit --repeat)
  bool reuse = true;             // submit --reuse auto (true) or never
  double noise_threshold = 0;    // a repeated config whose CV is above it is noisy
  std::string on_end;            // a shell command run as the owner when the job ends ("" = none)
  std::vector<std::string> env;  // "K=V" its profilers and --on-end get (submit --env)
  std::optional<OnEndResult> on_end_result;  // how on_end ended (table job_on_end); none yet
  // Held (ckprof hold) by this user ("" = not held), whose uid is held_by_uid: its queued
  // tasks do not start until released.
  std::string held_by;
  int64_t held_by_uid = -1;
  // The jobs it waits for (submit --after: their end; --after-ok: their end with every task
  // succeeded, else it is cancelled).
  std::vector<int64_t> after, after_ok;
  // Why it was cancelled ("cancelled by alice", "job 7 failed (--after-ok 7)"); "" = it was not.
  std::string cancel_reason;
  double job_timeout_s = 0;  // the whole job's time limit from its first start; 0 = none
  bool mail = false;         // its end is mailed to its owner (submit --mail)
};

// A GPU drained by an admin or for its health (table gpu_drains): who ("ckprofd" for its
// health), when, and why as `gpus` shows it ("drained by alice: fan noise").
struct DrainRecord {
  int gpu = -1;
  std::string by;
  double at = 0;
  std::string reason;
  bool operator==(const DrainRecord&) const = default;
};

struct TaskRecord {
  int64_t id = 0;
  int64_t job_id = 0;
  int64_t position = 0;                  // 1-based within the job
  int64_t rank = 0;                      // priority_rank
  int run = 0;                           // 1..repeat in a repeated job; 0 otherwise
  std::string op;                        // profile_grouped_conv_fwd, ...
  std::string config;                    // the config's JSON text
  double est_cost = 0;                   // FLOPs, for ordering and ETA
  TaskState state = TaskState::kQueued;  // (a name the Store does not know: failed)
  int attempts = 0;
  int gpu = -1;
  // The running attempt's handle: its process group (a local run), or its executor's id of it
  // (a remote run: Placement::job_id); 0 = not known (yet).
  int64_t handle = 0;
  double started_at = 0, ended_at = 0;
  std::string result;  // JSON: parsed perf, captures, error, returncode, command
  // ProblemKey of its config (common/ck_config.h): what reuse and the tuning table group by.
  std::string problem;
  // Not run: the task whose stored success this one copies (submit --reuse); 0 = none.
  int64_t reused_from = 0;
  // Ended by its job's cancel without a row of its own (MarkQueuedCancelled: stored 'queued',
  // read as cancelled). Read by JobTasks and JobTasksBrief.
  bool marked = false;
};

// A success's figures, recorded with its end: what reuse looks up and `best` ranks.
struct MeasurementRecord {
  std::string profiler;   // ProfilerIdentities::Of the executable that ran
  std::string gpu_model;  // "" = unknown
  int gpu = -1;
  std::string best_name, split_k;
  double avg_ms = 0, tflops = 0, gbps = 0;
};

// A stored success that a new task may reuse (Store::FindReusable).
struct ReusableRecord {
  int64_t task_id = 0, job_id = 0, position = 0;
  int gpu = -1;
  double measured_at = 0;
  std::string result;  // the task's result JSON
};

// A row of the tuning table: the best of one problem's measurements with one profiler build on
// one GPU model (Store::Best).
struct BestRecord {
  std::string problem, op, profiler, gpu_model;
  std::string best_name, split_k;
  double avg_ms = 0, tflops = 0, gbps = 0;
  int64_t job_id = 0, task_id = 0;  // the best measurement's
  int64_t measured = 0;             // how many times it was measured
  double first_at = 0, last_at = 0, best_at = 0;
};
struct BestFilter {
  std::string op;         // profile_grouped_conv_fwd, ...; "" = any
  std::string profiler;   // a resolved executable path; "" = any
  std::string gpu_model;  // a part of the model's name, any case; "" = any
  int64_t uid = -1;       // only this user's measurements; -1 = everyone's
};

struct AttemptRecord {
  int64_t task_id = 0;
  int attempt = 0;
  int gpu = -1;
  int64_t handle = 0;  // as TaskRecord::handle
  double started_at = 0, ended_at = 0;
  std::string outcome;
};

struct UsageRecord {
  uint32_t uid = 0;
  double usage = 0;       // decayed GPU seconds at `updated_at`
  double updated_at = 0;  // unix seconds
};

// Makes the state dir (mode 0750) unless it is there, and checks that it is a directory this
// process may create files in; the error names the dir and what to do. Store::Open and the
// daemon's start (before it locks the dir) ask the same.
Status PrepareStateDir(const std::string& state_dir);

class Store {
 public:
  // Opens (creating if needed) <state_dir>/ckprofd.db. `full_sync` makes every commit fsync.
  // Errors are startup errors: they name the file and what is wrong (unwritable, corrupt).
  static Result<std::unique_ptr<Store>> Open(const std::string& state_dir, bool full_sync);
  // The database file in `state_dir` (what the read-only connections below open).
  static std::string FileIn(const std::string& state_dir) { return state_dir + "/ckprofd.db"; }
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const { return path_; }

  // Inserts a job and its tasks in one transaction (synchronous=FULL); fills ids.
  Status InsertJob(JobRecord* job, std::vector<TaskRecord>* tasks);
  // A job stored in steps (a large submit: other requests are served between them). BeginJob
  // stores the job marked dropped (table jobs_dropped: nothing loads it, and a crash before
  // CommitJob leaves a job that Recover removes, never half of one) and reserves ids for
  // `task_count` tasks: it fills job->id and returns the first task's id. InsertTasks stores a
  // chunk of the tasks with the ids from `first_id` on (filled in), one transaction each.
  // CommitJob makes the job whole (synchronous=FULL: the log holding every chunk is synced).
  Result<int64_t> BeginJob(JobRecord* job, int64_t task_count);
  Status InsertTasks(int64_t job_id, int64_t first_id, std::span<TaskRecord> tasks);
  Status CommitJob(int64_t job_id);

  // A task starts an attempt on a GPU: state running, attempts+1, attempt row. Commits.
  Status MarkRunning(int64_t task_id, int attempt, int gpu, double started_at);
  // The running attempt's handle (TaskRecord::handle), known right after its start. Written
  // with the next transaction rather than in one of its own (a commit per task less);
  // FlushHandles writes it now. Until then, recovery still finds a local run's group by the
  // marker in its environment.
  void SetHandleLater(int64_t task_id, int attempt, int64_t handle);
  Status FlushHandles();
  // A task attempt ended with `outcome`. `final_state` is the task's new state (queued to
  // requeue). `usage` (when uid_for_usage is set) is the owner's new decayed usage. One
  // transaction.
  // A succeeded run's `measurement` (may be null) is recorded with it.
  Status FinishAttempt(int64_t task_id, int attempt, Outcome::Kind outcome, TaskState final_state,
                       double ended_at, const std::string& result_json, const UsageRecord* usage,
                       const MeasurementRecord* measurement = nullptr);
  // The newest measurement of `problem` with `profiler` on `gpu_model` that ended at or after
  // `since` (of `uid`'s jobs only, unless uid < 0); nullopt when there is none.
  Result<std::optional<ReusableRecord>> FindReusable(const std::string& problem,
                                                     const std::string& profiler,
                                                     const std::string& gpu_model, double since,
                                                     int64_t uid);
  // The tuning table: per problem, profiler build and GPU model, its fastest measurement
  // (ReadBest of this Store's file).
  Result<std::vector<BestRecord>> Best(const BestFilter& filter);
  // The same, for any thread, through a read-only connection of its own to the database at
  // `path` (one pass over every measurement: half a second for a million, not on the io
  // thread).
  static Result<std::vector<BestRecord>> ReadBest(const std::string& path,
                                                  const BestFilter& filter);
  // Writes grouped into one transaction. Between BeginGroup and CommitGroup, MarkRunning,
  // FinishAttempt and TaskConfig join it instead of each committing on its own, and nothing
  // they wrote is durable (nor to be acted on) until CommitGroup returned ok. A failed write
  // inside a group returns its error and leaves the group open: the caller rolls it back. The
  // scheduler records a task's end and the next start on that GPU this way: one commit per
  // task instead of two, and the config is read in the same transaction.
  Status BeginGroup();
  Status CommitGroup();  // rolls the group back when the commit fails
  void RollbackGroup();
  bool grouped() const { return grouped_; }
  // Tests: every commit fails (and is rolled back) while set, as on a full or failing disk.
  void FailCommitsForTesting(bool fail) { fail_commits_ = fail; }
  // Tests: how many checkpoints have copied frames of the log into the database so far.
  int64_t CheckpointsForTesting() const;

  // Final states for queued tasks that will never run (a cancelled job), in one transaction.
  Status SetTasksState(const std::vector<int64_t>& task_ids, TaskState state,
                       const std::string& result_json, double ended_at);
  // A cancelled job's queued tasks all end at once, cancelled at `ended_at` with that result:
  // one row (job_cancels), not one a task. Its rows still 'queued' read so from then on
  // (JobTasks, ForEachTaskBrief...), until a retry revives the job (SetJobCancelled).
  Status MarkQueuedCancelled(int64_t job_id, double ended_at, const std::string& result_json);
  // A step of a retry of a cancelled job (one transaction): of the rows the cancel's mark
  // ended, `written_out` become rows of their own, cancelled as the mark has them (the retry
  // does not take them; the mark goes at its end), and `requeued` (final rows the retry takes)
  // go back to 'queued'.
  Status SetRetried(int64_t job_id, const std::vector<int64_t>& written_out,
                    const std::vector<int64_t>& requeued);
  // Whether the job's cancel ended its queued tasks with a mark (MarkQueuedCancelled).
  Result<bool> HasCancelMark(int64_t job_id);
  // Users' decayed usage, in one transaction.
  Status SetUsage(const std::vector<UsageRecord>& usage);
  // The drained GPUs, all of them (replacing those stored), in one transaction; and read back.
  Status SetDrains(const std::vector<DrainRecord>& drains);
  Result<std::vector<DrainRecord>> Drains();
  // Marks the job cancelled, and why ("cancelled by alice"), or (a retry revives it) not: then
  // the tasks that MarkQueuedCancelled ended are written out as cancelled rows, and its mark
  // goes (one transaction). With `marked_requeued` (the retry requeues every one of them) they
  // are left as they are stored, 'queued', and only the mark goes: no row is written.
  Status SetJobCancelled(int64_t job_id, bool cancelled, const std::string& reason,
                         bool marked_requeued = false);
  Status SetJobPriority(int64_t job_id, int priority);
  // Holds the job as `by` (uid `by_uid`), or releases it (`by` "").
  Status SetJobHold(int64_t job_id, const std::string& by, int64_t by_uid);
  // A retry's new settings: the per-task timeout (-1 = the daemon's default) and the profiler.
  Status SetJobRunSettings(int64_t job_id, double timeout_s, const std::string& profiler_path);
  Status SetJobFinished(int64_t job_id, double finished_at);
  // An edit's settings: name, priority, allowed GPUs, max GPUs, not-before time, timeout.
  Status SetJobSettings(const JobRecord& job);
  // How the job's --on-end command ended (replaces an earlier one: a retried job ends again).
  Status SetOnEndResult(int64_t job_id, const OnEndResult& r);
  // Removes the jobs with their tasks and attempts, in one transaction.
  Status DeleteJobs(const std::vector<int64_t>& job_ids);
  // Jobs removed in steps (clean, expiry, a submit not completed), so that no request waits
  // for a million rows: MarkDropped hides them in one transaction (nothing loads them, nor
  // their measurements, from then on); DeleteDropped removes up to `max_rows` of one job's tasks
  // (with their attempts and measurements) per call, in one transaction, and the job with the
  // last of them. `progress` starts default and is carried from call to call.
  struct DropProgress {
    int64_t after_id = -1;  // the tasks up to this id are gone (-1: not looked up yet)
    int64_t rows = 0;       // tasks removed so far
    bool done = false;      // the job is gone
  };
  Status MarkDropped(const std::vector<int64_t>& job_ids);
  Status DeleteDropped(int64_t job_id, int64_t max_rows, DropProgress* progress);
  // The jobs marked dropped that are not gone yet (Recover resumes their removal).
  Result<std::vector<int64_t>> DroppedJobs();
  // After large deletes: gives up to `max_pages` free pages back to the filesystem (an
  // incremental vacuum, where the database has auto_vacuum=INCREMENTAL), in one transaction.
  // Returns the free pages left (0: nothing left to give back, or the file cannot shrink).
  Result<int64_t> ShrinkStep(int64_t max_pages);
  // Asks the checkpoint thread to copy the whole log into the database and truncate it
  // (wal_checkpoint(TRUNCATE)): for when the daemon is idle after large writes.
  void TruncateLogSoon();
  // Large work in steps goes on (true) or is over: checkpoints meanwhile never hold a
  // step back (passive ones only), so the log may grow until TruncateLogSoon.
  void SetBulkWriting(bool bulk);
  // While bulk writing: the checkpoints are behind by so much that the large work should wait
  // (a few milliseconds at a time, the daemon's other work going on) until they have caught up.
  bool LogBehind() const;

  // Loading, at startup and for queries.
  Status ForEachJob(const std::function<void(JobRecord&&)>& fn);
  // Tasks without their config and result text (the scheduler's working set).
  Status ForEachTaskBrief(const std::function<void(TaskRecord&&)>& fn);
  Status ForEachUsage(const std::function<void(UsageRecord&&)>& fn);
  Result<std::string> TaskConfig(int64_t task_id);
  // Every task of a job, with config and result text, ordered by position.
  Result<std::vector<TaskRecord>> JobTasks(int64_t job_id);
  // The same without the config, result and problem texts (read as ""), with `marked`: what a
  // retry looks at, a million rows of it at a time.
  Result<std::vector<TaskRecord>> JobTasksBrief(int64_t job_id);
  // JobTasksBrief a part at a time: at most `limit` rows after the one at (`after_position`,
  // `after_id`) in (position, id) order (0, 0: from the first), for a retry in steps.
  struct RowsAfter {
    int64_t position = 0, id = 0;
  };
  Result<std::vector<TaskRecord>> JobTasksBriefAfter(int64_t job_id, RowsAfter after,
                                                     int64_t limit);
  // Those of the job's tasks at `positions` (every run of a repeated config), by position and
  // run, in one statement: an index seek a position (a request may name 4,096 of a job of a
  // million). `brief`: as JobTasksBrief has them (no config, result or problem text).
  Result<std::vector<TaskRecord>> JobTasksAt(int64_t job_id, const std::vector<int>& positions,
                                             bool brief);
  Result<std::vector<AttemptRecord>> Attempts(int64_t task_id_or_0);

  // Writes a copy of the database as this connection sees it to `to` (a new file, mode 0600),
  // with SQLite's online backup: what a daemon whose ckprofd.db was removed under it still
  // holds. Not inside a group. Removes a partial copy on failure.
  Status SaveCopy(const std::string& to);

  // PRAGMA quick_check: "ok" or what is wrong.
  Result<std::string> QuickCheck();

  // Accounting (ckprof usage): the attempts that started at or after `since`, of `uid`'s jobs
  // (uid < 0: everyone's), counted per job and outcome in one aggregate query, each group with
  // its GPU seconds (an attempt still running counted up to `now`). Jobs being removed are
  // left out. Rows: about jobs x outcomes, whatever the attempts. Any thread: it reads the
  // database at `path` through a read-only connection of its own (WAL: it never blocks the
  // daemon's writes), because the query visits every attempt's task (seconds for a million:
  // not on the io thread).
  struct AttemptTally {
    int64_t job_id = 0;
    uint32_t uid = 0;
    std::string owner, job_name;
    std::string outcome;  // OutcomeKindName, or "running"
    int64_t attempts = 0;
    double gpu_seconds = 0;
  };
  static Result<std::vector<AttemptTally>> TallyAttempts(const std::string& path, double since,
                                                         double now, int64_t uid);
  // JobTasks, for any thread: through a read-only connection of its own to the database at
  // `path`, as TallyAttempts (a million rows take seconds: not on the io thread).
  static Result<std::vector<TaskRecord>> ReadJobTasks(const std::string& path, int64_t job_id);

  class Stmt;  // a statement borrowed from this store's cache (store.cpp only)
  class Checkpointer;

 private:
  // JobTasks (brief: JobTasksBrief), `marked` read for both.
  Result<std::vector<TaskRecord>> JobTaskRows(int64_t job_id, bool brief,
                                              const RowsAfter* after = nullptr, int64_t limit = 0);
  // The job's first task id in position order; 0 when it has no task.
  Result<int64_t> FirstTaskId(int64_t job_id);
  Store(sqlite3* db, std::string path);
  Status Exec(const char* sql);
  Status InsertJobRow(const JobRecord& job, int64_t* job_id, int64_t* last_task);
  friend class Stmt;
  struct Cached {
    sqlite3_stmt* stmt = nullptr;
    bool in_use = false;
  };
  std::unordered_map<const char*, Cached> stmts_;  // by SQL text (string literals)
  void Rollback();
  // BEGIN IMMEDIATE, then the pending handles; COMMIT, then they are no longer pending
  // (a failed COMMIT is rolled back).
  Status Begin();
  Status Commit();
  // A write's own transaction, or none inside a group: EndWrite commits (or rolls back on
  // `s` failing) only outside a group.
  Status BeginWrite() { return grouped_ ? Status::Ok() : Begin(); }
  Status EndWrite(Status s);
  Status WriteUsage(const UsageRecord& u);  // inside a transaction
  bool grouped_ = false;
  bool fail_commits_ = false;
  struct PendingHandle {
    int64_t task_id;
    int attempt;
    int64_t handle;
  };
  std::vector<PendingHandle> pending_handles_;
  sqlite3* db_;
  std::string path_;
  bool full_sync_ = false;
  std::unique_ptr<Checkpointer> checkpointer_;  // stopped before db_ closes
  bool bulk_writing_ = false;                   // SetBulkWriting
};

}  // namespace ckprof

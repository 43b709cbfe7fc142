// The ckprofd wire protocol, defined once for client and daemon.
//
// Framing: newline-delimited JSON over a Unix stream socket; one JSON object per line, at most
// `max_frame_bytes` long (the daemon answers a longer frame with an error and closes). The
// client opens with {"type":"hello","protocol":1}; the daemon answers with its own hello.
// Every later request carries "type" and a client-chosen integer "id" that the response
// repeats. A response has "ok": true and the payload, or "ok": false and "error". `watch`
// answers with a stream of {"type":"event"} frames and ends with {"type":"end"}; with
// "end_only": true (ckprof wait) the stream holds only the job_finished event.
//
// The daemon never trusts who the client says it is: identity comes from SO_PEERCRED.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "common/result.h"
#include "common/states.h"

namespace ckprof {

inline constexpr int kProtocolVersion = 1;
inline constexpr const char* kDefaultSocketPath = "/run/ckprofd/ckprofd.sock";
inline constexpr size_t kDefaultMaxFrameBytes = 256u << 20;  // 256 MiB: a submit carries a file.

// The kinds of request, in the order of RequestBody's alternatives (each request struct below
// names its own: kType).
enum class RequestType {
  kHello,
  kPing,
  kSubmit,
  kStatus,   // one job (job_id) or all visible jobs
  kList,     // alias of status without job_id; `all` includes finished jobs
  kResults,  // per-task results of a job
  kCancel,
  kRetry,
  kWatch,
  kGpus,
  kDrain,
  kResume,
  kBoost,    // admins: set a job's priority
  kLog,      // a job's task output (follow: a stream of its live output until the task ends)
  kEdit,     // change a job's settings (its owner: waiting work; admins: anything)
  kClean,    // remove ended jobs (yours; admins: anyone's)
  kBest,     // the tuning table: every problem's best measured kernel
  kHold,     // a job's queued tasks do not start (its owner, or admins) until released
  kRelease,  // they may start again
  kUsage,    // accounting: GPU time, runs and fair share per user (and per job)
};

// "hello", "submit", ...: the kind's wire name (its struct's kName).
std::string_view RequestTypeName(RequestType t);
std::optional<RequestType> ParseRequestTypeName(std::string_view name);

// The limits of requests' fields.
inline constexpr int64_t kMaxId = std::numeric_limits<int64_t>::max();
inline constexpr double kMaxNotBefore = 4102444800;  // 2100-01-01T00:00:00Z
inline constexpr int kMinPriority = -1000, kMaxPriority = 1000;

// What a submit carries. The content is the input file's text (IR list, trace or configs).
// The most runs of one config a submit may ask for (--repeat).
constexpr int kMaxRepeat = 1000;

struct SubmitOptions {
  std::string content;
  // "" = content is the text itself; "gzip+base64" = base64 of a gzip file (a compressed
  // trace travels compressed). See EncodeSubmitContent.
  std::string content_encoding;
  std::string input_name;              // the file name, for display only
  std::string name;                    // job name; default: input_name
  int priority = 0;                    // higher runs first within the submitting user's jobs
  std::vector<int> gpus;               // allowed GPUs; empty = any
  int max_gpus = 0;                    // at most this many GPUs at once; 0 = no limit
  TaskOrder order = TaskOrder::kRank;  // of the job's own tasks (wire: "" means rank)
  double not_before = 0;               // unix seconds; 0 = now
  double timeout_s = -1;               // per-task timeout; -1 = the daemon's default, 0 = none
  // The whole job's time limit, from its first start: past it the job is cancelled. -1 = the
  // daemon's max_job_timeout (none when it has none), 0 = none.
  double job_timeout_s = -1;
  int64_t max_ops = 0;        // keep only the first N configs; 0 = all
  int repeat = 1;             // run each config this many times (--repeat)
  bool dry_run = false;       // return the commands, run nothing, store nothing
  std::string data_type;      // "", "auto", "fp16", "bf16", "fp32"
  std::string layout;         // "", "auto", "nchw", "nhwc"
  std::string profiler_path;  // absolute; empty = the daemon's default
  std::string cwd;            // the client's working directory (tasks run there as root daemon)
  std::string on_end;         // a shell command run as the submitter, in cwd, when the job ends
  // "K=V" lines (submit --env): variables the job's profilers and --on-end command get.
  std::string env;
  // "" or "auto": a config whose problem was measured with the same profiler build on the same
  // GPU model within the daemon's reuse_max_age is not run again, its result copied; "never":
  // every config runs. A repeated job (repeat > 1) always runs.
  std::string reuse;
  // Jobs it waits for (submit --after: their end, however they ended; --after-ok: their end
  // with every task succeeded, else this job ends cancelled). Each must exist when submitted.
  std::vector<int64_t> after, after_ok;
  // Mail its end to the submitter (through the host's sendmail, run as them).
  bool mail = false;
};

// What an edit changes: each field that is set (nullopt: as it was).
struct EditOptions {
  std::optional<int> priority;
  std::optional<double> not_before;      // unix seconds; 0 = now
  std::optional<std::vector<int>> gpus;  // allowed GPUs; empty = any
  std::optional<int> max_gpus;           // 0 = no limit
  std::optional<double> timeout_s;       // -1 = the daemon's default, 0 = none
  std::optional<std::string> name;
  bool empty() const {
    return !priority && !not_before && !gpus && !max_gpus && !timeout_s && !name;
  }
};

// Fills content/content_encoding from a file's bytes: gzip files go as base64 of the gzip,
// large text files are gzipped first, small text goes as it is.
Status EncodeSubmitContent(std::string file_bytes, SubmitOptions* s);
// The same from bytes the caller keeps (a mapped file): always a copy, compressed when large.
Status EncodeSubmitContentFrom(std::string_view file_bytes, SubmitOptions* s);
// The text a submit carries, decoded (the gzip is left for the converter, which reads it).
Result<std::string> DecodeSubmitContent(const SubmitOptions& s);

// Responses: {"type": <the request's type>, "id": <its id>, "ok": true, <the reply's fields>},
// or {"type": "error", "id", "ok": false, "error": <why>, <ErrorReply's other fields>}.
nlohmann::json ErrorResponse(int64_t id, std::string_view message);

// Formats a frame: compact JSON plus '\n'. Invalid UTF-8 is replaced, never thrown on.
std::string Frame(const nlohmann::json& j);

// How a job's --on-end command ended (status shows it to the job's owner: "on-end: exited 3:
// notify-send: Permission denied"). Not set until it has ended.
struct OnEndResult {
  // "exited N", "timed out after 60 s and was stopped", "crashed (SIGSEGV)", "could not start:
  // ...": how it ended, in words.
  std::string outcome;
  int exit_code = -1;  // its exit status; -1 when it did not exit by itself (JSON: null)
  // The first line of its stderr (at most 256 bytes, control characters written as \xNN);
  // "" when it wrote none.
  std::string stderr_head;
  double ended_at = 0;  // unix seconds
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, OnEndResult>
void VisitFields(S& r, V& v) {
  v("outcome", r.outcome);
  v.Nullable("exit_code", r.exit_code, r.exit_code >= 0);
  v("stderr", r.stderr_head);
  v("ended_at", r.ended_at);
}

// A job as `status` and `list` report it.
struct JobSummary {
  int64_t id = 0;
  uint32_t owner_uid = 0;
  std::string owner;  // user name, or the uid as text
  std::string name;
  JobState state = JobState::kQueued;
  int priority = 0;
  TaskOrder order = TaskOrder::kRank;  // of its tasks (submit --order)
  // By state, each task once (TaskCounts, common/states.h): total is their sum.
  int64_t total = 0;
  TaskCounts counts;
  // Of the succeeded, how many were not run but reused (submit --reuse auto).
  int64_t reused = 0;
  std::vector<int> gpus_in_use;
  // What the job was submitted with (submit's options): the GPUs it may use (empty = any), at
  // most how many at once (0 = no limit; JSON: null), the per-task timeout in force (the job's,
  // else the daemon's default; 0 = none; JSON: null) and the time before which it does not
  // start (0 = none; JSON: null). The priority is above.
  std::vector<int> allowed_gpus;
  int max_gpus = 0;
  double timeout_s = 0;
  double not_before = 0;
  // The whole job's time limit (submit --job-timeout; 0 = none, JSON: null) and, once it has
  // started, when it is cancelled if it has not ended (unix seconds; 0 = not started or no
  // limit, JSON: null).
  double job_timeout_s = 0, job_deadline = 0;
  // Unix seconds; 0 = not yet (JSON: null).
  double submitted_at = 0, started_at = 0, finished_at = 0;
  double eta_s = -1;     // -1 = unknown or ended (JSON: null)
  std::string profiler;  // the resolved profiler, described
  // Each config runs this many times (submit --repeat): total counts the runs.
  int repeat = 1;
  // Why its queued tasks do not run now, as squeue's REASON (status and list only; "" = they
  // start at the next pick, or none is queued).
  std::string waiting_reason;
  // When its first task would start (status J only, for a job none of whose tasks has started;
  // unix seconds; 0 = unknown: held, waiting for other jobs, or no task time measured yet; JSON
  // null), as squeue --start guesses it (Scheduler::EstimatedStart).
  double estimated_start = 0;
  // Who holds it (ckprof hold): its queued tasks do not start; "" = not held (JSON: null).
  std::string held_by;
  // How its --on-end command ended (JSON "on_end", absent until it has ended, or without one).
  std::optional<OnEndResult> on_end;
  // The jobs it was submitted to wait for (submit --after, --after-ok; absent when none).
  std::vector<int64_t> after, after_ok;
  // Why it was cancelled ("cancelled by alice", "job 7 failed (--after-ok 7)"); "" = it was not
  // (JSON: absent).
  std::string cancel_reason;
  int64_t done() const { return total - counts.queued() - counts.running(); }
  bool all_ok() const { return counts.succeeded() == total; }
};
// The field list of each wire struct (common/wire_fields.h): the one place its JSON names are.
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, JobSummary>
void VisitFields(S& s, V& v) {
  v("id", s.id);
  v("owner_uid", s.owner_uid);
  v("owner", s.owner);
  v("name", s.name);
  v("state", s.state);
  v("priority", s.priority);
  v("order", s.order);
  v("total", s.total);
  v("queued", s.counts.at(TaskState::kQueued));
  v("running", s.counts.at(TaskState::kRunning));
  v.Derived("done", s.done());
  // "succeeded", "failed", "unsupported", "timed_out", ...: each column by its state's name.
  for (TaskState c : FinalColumns()) v(EnumName(c).data(), s.counts.at(c));
  v("reused", s.reused);
  v("gpus_in_use", s.gpus_in_use);
  v.Nullable("allowed_gpus", s.allowed_gpus, !s.allowed_gpus.empty());  // null: any GPU
  // An absent value is null, never a 0 that could be read as one (time 0 is 1970).
  v.Nullable("max_gpus", s.max_gpus, s.max_gpus > 0);
  v.Nullable("timeout_s", s.timeout_s, s.timeout_s > 0);
  v.Nullable("not_before", s.not_before, s.not_before > 0);
  v.Nullable("job_timeout_s", s.job_timeout_s, s.job_timeout_s > 0);
  v.Nullable("job_deadline", s.job_deadline, s.job_deadline > 0);
  v("submitted_at", s.submitted_at);
  v.Nullable("started_at", s.started_at, s.started_at > 0);
  v.Nullable("finished_at", s.finished_at, s.finished_at > 0);
  v.Nullable("eta_s", s.eta_s, s.eta_s >= 0);
  v("profiler", s.profiler);
  v("repeat", s.repeat);
  v.Omittable("waiting_reason", s.waiting_reason, !s.waiting_reason.empty());
  v.Nullable("estimated_start", s.estimated_start, s.estimated_start > 0);
  v.Nullable("held_by", s.held_by, !s.held_by.empty());
  v.Omittable("on_end", s.on_end, s.on_end.has_value());
  v.Omittable("after", s.after, !s.after.empty());
  v.Omittable("after_ok", s.after_ok, !s.after_ok.empty());
  v.Omittable("cancel_reason", s.cancel_reason, !s.cancel_reason.empty());
}
nlohmann::json ToJson(const JobSummary& j);
Result<JobSummary> JobSummaryFromJson(const nlohmann::json& j);

// A process that used a GPU and is none of this daemon's tasks (foreign_gpu_use): a colleague's
// training job or notebook.
struct GpuUser {
  int64_t pid = 0;
  uint32_t uid = 0;
  std::string user;     // name, else the uid as text
  std::string command;  // its command line
  // "pid 4242 (alice, python3 train.py)"
  std::string Describe() const;
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, GpuUser>
void VisitFields(S& u, V& v) {
  v("pid", u.pid);
  v("uid", u.uid);
  v("user", u.user);
  v("command", u.command);
}

// A node of the cluster a remote executor (Slurm) runs on, as `sinfo` lists it.
struct ClusterNode {
  std::string name;
  std::string state;       // idle, mixed, allocated, down, drained, ...
  std::string partitions;  // "gpu" or "gpu,debug" (the default one marked '*')
  std::string gres;        // configured, e.g. "gpu:8" or "gpu:mi300x:8"
  std::string gres_used;   // in use, e.g. "gpu:2(IDX:0-1)"
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, ClusterNode>
void VisitFields(S& n, V& v) {
  v("name", n.name);
  v("state", n.state);
  v("partitions", n.partitions);
  v("gres", n.gres);
  v("gres_used", n.gres_used);
}

// An allocation of the Slurm executor's allocation mode: one user's Slurm job whose agent
// (ckprof-agent) runs that user's tasks, one at a time per GPU it was granted.
struct AllocationInfo {
  std::string name;    // ckprofd's name for it (the agent's --allocation)
  int64_t job_id = 0;  // its Slurm job id; 0 while sbatch has not answered
  std::string user;
  uint32_t uid = 0;
  // submitting, pending (in Slurm's queue), starting (its agent has not connected yet), ready,
  // away (its agent reconnecting), releasing
  std::string state;
  std::string node;                   // "" until it runs
  std::string gpus;                   // the GPU indexes granted on the node ("3", "0,1")
  int running = 0;                    // our tasks running in it now
  int64_t tasks_run = 0;              // tasks it has finished
  std::optional<double> time_left_s;  // until its time limit, as Slurm last said; null: unknown
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, AllocationInfo>
void VisitFields(S& a, V& v) {
  v("name", a.name);
  v.Nullable("job_id", a.job_id, a.job_id > 0);
  v("user", a.user);
  v("uid", a.uid);
  v("state", a.state);
  v.Nullable("node", a.node, !a.node.empty());
  v.Nullable("gpus", a.gpus, !a.gpus.empty());
  v("running", a.running);
  v("tasks_run", a.tasks_run);
  v("time_left_s", a.time_left_s);
}

// One reading of a GPU's clocks, temperature and power. A value the GPU does not give is
// nullopt: JSON null, never 0.
struct GpuReading {
  std::optional<double> sclk_mhz;  // graphics (AMD sclk, NVIDIA SM) clock
  std::optional<double> mclk_mhz;  // memory clock
  std::optional<double> temperature_c;
  std::optional<double> power_w;
  std::optional<double> busy_percent;  // utilisation (AMD gpu_busy_percent, NVIDIA utilization.gpu)
  double at = 0;                       // Unix seconds when it was read
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, GpuReading>
void VisitFields(S& r, V& v) {
  v("sclk_mhz", r.sclk_mhz);
  v("mclk_mhz", r.mclk_mhz);
  v("temperature_c", r.temperature_c);
  v("power_w", r.power_w);
  v("busy_percent", r.busy_percent);
  v("at", r.at);
}

// What a GPU is (empty: unknown, JSON null), and how it was before and after a task.
struct GpuState {
  std::string name;    // "AMD Instinct MI300X", "NVIDIA H200"
  std::string uuid;    // its UUID or serial number
  std::string arch;    // "gfx942", "sm_90"
  std::string driver;  // driver (and ROCm/CUDA) version
  std::optional<GpuReading> before, after;
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, GpuState>
void VisitFields(S& g, V& v) {
  v.Nullable("name", g.name, !g.name.empty());
  v.Nullable("uuid", g.uuid, !g.uuid.empty());
  v.Nullable("arch", g.arch, !g.arch.empty());
  v.Nullable("driver", g.driver, !g.driver.empty());
  v("before", g.before);
  v("after", g.after);
}

// A config run several times (submit --repeat N): its runs' spread. The result it belongs to
// is the median run's, with the median time (common/repeats.h).
struct RepeatStats {
  int runs = 0;       // the config's runs (the job's --repeat)
  int succeeded = 0;  // of which succeeded: the figures below are theirs
  int finished = 0;   // of which have ended (the others are queued or running)
  double median_ms = 0, min_ms = 0, max_ms = 0;
  // Coefficient of variation: the sample standard deviation of the succeeded runs' times over
  // their mean (0 with fewer than two).
  double cv = 0;
  double noise_threshold = 0;    // the job's (ckprofd's noise_threshold when it was submitted)
  bool noisy = false;            // cv > noise_threshold
  int same_best = 0;             // succeeded runs whose best kernel is this result's
  std::vector<double> times_ms;  // each succeeded run's time, in run order
  std::vector<int> gpus;         // and the GPU it ran on
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, RepeatStats>
void VisitFields(S& r, V& v) {
  v("runs", r.runs);
  v("succeeded", r.succeeded);
  v("finished", r.finished);
  v("median_ms", r.median_ms);
  v("min_ms", r.min_ms);
  v("max_ms", r.max_ms);
  v("cv", r.cv);
  v("noise_threshold", r.noise_threshold);
  v("noisy", r.noisy);
  v("same_best", r.same_best);
  v("times_ms", r.times_ms);
  v("gpus", r.gpus);
}

// One task's result (what `results` returns per task).
// Where a reused result was measured: the job and task that ran it, when, on which GPU.
struct ReusedFrom {
  int64_t job_id = 0, task_id = 0;
  int64_t position = 0;    // the task's #N in its job
  double measured_at = 0;  // unix seconds: when that run ended
  int gpu = -1;
  std::string gpu_model;  // "" = the daemon did not know it
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, ReusedFrom>
void VisitFields(S& r, V& v) {
  v("job_id", r.job_id);
  v("task_id", r.task_id);
  v("position", r.position);
  v("measured_at", r.measured_at);
  v("gpu", r.gpu);
  v.Nullable("gpu_model", r.gpu_model, !r.gpu_model.empty());
}

// Where a run runs or ran, in its executor's words: data, not an executor's own fields, so that
// nothing above the daemon's launcher names an executor. Only a remote executor's runs have one
// (JSON null else).
struct Placement {
  std::string executor;  // the launcher's name (Launcher::Name: "slurm")
  int64_t job_id = 0;    // the executor's id of the run (a Slurm job id); 0 until known
  std::string state;     // the executor's word for it (PENDING, RUNNING, COMPLETED, ...)
  std::string node;      // "" until known
  std::string granted;   // the GPU indexes granted on the node ("3", "0,1"); "" until known
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, Placement>
void VisitFields(S& p, V& v) {
  v("executor", p.executor);
  v.Nullable("job_id", p.job_id, p.job_id > 0);
  v.Nullable("state", p.state, !p.state.empty());
  v.Nullable("node", p.node, !p.node.empty());
  v.Nullable("granted", p.granted, !p.granted.empty());
}

struct TaskResult {
  int64_t task_id = 0;
  int64_t job_id = 0;
  int64_t position = 0;  // 1-based, in the job's config order
  int64_t priority_rank = 0;
  std::string operation;  // profile_grouped_conv_fwd, ...
  std::string description;
  std::string command;  // the command line, for display
  TaskState state = TaskState::kQueued;
  int gpu = -1;  // -1 = none (JSON: null)
  int attempts = 0;
  int returncode = 0;  // exit code; -signal when killed by a signal
  double elapsed_s = 0;
  double started_at = 0, ended_at = 0;  // 0 = not yet (JSON: null)
  std::string best_name;
  double avg_ms = 0, tflops = 0, gbps = 0;
  std::string split_k;
  int valids = -1;                       // -1 = unknown (JSON: null)
  std::string error;                     // why it did not succeed; empty when it did
  std::string stdout_text, stderr_text;  // bounded head+tail captures (only when asked)
  nlohmann::ordered_json config;         // the CK config (only when asked)
  // Foreign processes seen on its GPU while it ran (foreign_gpu_use): its timing is not to be
  // trusted. Empty when none was seen, or none was looked for.
  std::vector<GpuUser> contended;
  std::optional<GpuState> gpu_state;  // what the GPU was and how (none: nothing known)
  // What the profiler used: CPU seconds and peak memory of all its processes (its cgroup), or
  // of its leader alone (no cgroup); unknown: nullopt (JSON null).
  std::optional<double> cpu_s;
  std::optional<uint64_t> peak_memory_bytes;
  // A repeated job (submit --repeat N): which run of its config this is (1..N; 0 = the job is
  // not repeated, JSON null), and, on a merged result, the runs' spread (else nullopt).
  int run = 0;
  std::optional<RepeatStats> repeats;
  // From the trace the config was converted from (its metadata): the record's total GPU time
  // and how many calls it had; nullopt when the input did not say (JSON null). A backward
  // call's time covers both its bwd_data and bwd_weight configs.
  std::optional<double> trace_gpu_us;
  std::optional<int64_t> trace_count;
  // Not run: the stored success of the same problem, profiler build and GPU model that this
  // result copies (submit --reuse auto); nullopt when it was measured (JSON null).
  std::optional<ReusedFrom> reused_from;
  // Run through a remote executor: where (gpu is then the GPU it granted); nullopt else.
  std::optional<Placement> placement;
  // Trace GPU time per call in ms; nullopt when unknown.
  std::optional<double> trace_ms_per_call() const {
    if (!trace_gpu_us) return std::nullopt;
    return *trace_gpu_us / 1000.0 /
           static_cast<double>(std::max<int64_t>(trace_count.value_or(1), 1));
  }
  bool noisy() const { return repeats && repeats->noisy; }
  bool finished() const { return IsFinal(state); }
  bool ok() const { return state == TaskState::kSucceeded; }
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, TaskResult>
void VisitFields(S& t, V& v) {
  v("task_id", t.task_id);
  v("job_id", t.job_id);
  v("position", t.position);
  v("priority_rank", t.priority_rank);
  v("operation", t.operation);
  v("description", t.description);
  v("command", t.command);
  v("state", t.state);
  v.Nullable("gpu", t.gpu, t.gpu >= 0);
  v("attempts", t.attempts);
  v("returncode", t.returncode);
  v("elapsed_s", t.elapsed_s);
  v.Nullable("started_at", t.started_at, t.started_at > 0);
  v.Nullable("ended_at", t.ended_at, t.ended_at > 0);
  v("best_name", t.best_name);
  v("avg_ms", t.avg_ms);
  v("tflops", t.tflops);
  v("gbps", t.gbps);
  v("split_k", t.split_k);
  v.Nullable("valids", t.valids, t.valids >= 0);
  v("error", t.error);
  v.Omittable("stdout", t.stdout_text, !t.stdout_text.empty());
  v.Omittable("stderr", t.stderr_text, !t.stderr_text.empty());
  v.Omittable("config", t.config, !t.config.is_null());
  v("contended", t.contended);
  v("gpu_state", t.gpu_state);
  v("cpu_s", t.cpu_s);
  v("peak_memory_bytes", t.peak_memory_bytes);
  v.Nullable("run", t.run, t.run > 0);
  v("repeats", t.repeats);
  v("trace_gpu_time_us", t.trace_gpu_us);
  v("trace_count", t.trace_count);
  v("reused_from", t.reused_from);
  v.Omittable("placement", t.placement, t.placement.has_value());
}
nlohmann::json ToJson(const TaskResult& t);
// The same objects as ToJson, written straight into `out` without the DOM (the daemon's
// per-task events).
void AppendJson(std::string& out, const JobSummary& s);
void AppendJson(std::string& out, const TaskResult& t);
Result<TaskResult> TaskResultFromJson(const nlohmann::json& j);

struct GpuInfo {
  int index = 0;
  bool drained = false;
  // The running task (JSON: null when idle): its id, its job's #N, the job and its owner.
  int64_t task_id = 0;  // 0 = idle
  int64_t position = 0;
  int64_t job_id = 0;
  uint32_t owner_uid = 0;
  double busy_since = 0;
  int64_t tasks_run = 0;
  std::string held_by;  // waiting: who holds the GPU's host lock ("pid 4242 (alice)"); "" = none
  // Processes that are none of this daemon's using it now (foreign_gpu_use; empty when none,
  // or when nobody looks).
  std::vector<GpuUser> foreign;
  std::string model;                  // its name, when the daemon knows it
  std::string owner;                  // the running task's owner, by name ("" when idle)
  std::optional<GpuReading> reading;  // how it is now, where the daemon reads GPU state
  // Why it is drained ("drained by alice: fan noise", its device errors); "" when it is not.
  std::string drain_reason;
  // Who drained it (a user; "ckprofd" for its health) and when (unix seconds); kept across
  // restarts. "" and 0 when it is not drained (JSON: absent), or only suspect.
  std::string drained_by;
  double drained_at = 0;
  // Under a remote executor the index is a slot (one task handed to the cluster): where its
  // task runs (nullopt when idle or local).
  std::optional<Placement> placement;
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, GpuInfo>
void VisitFields(S& g, V& v) {
  const bool busy = g.task_id > 0;  // an idle GPU has no task, job, owner (0 is root) or start
  v("index", g.index);
  v("drained", g.drained);
  v.Nullable("task_id", g.task_id, busy);
  v.Nullable("position", g.position, busy);
  v.Nullable("job_id", g.job_id, busy);
  v.Nullable("owner_uid", g.owner_uid, busy);
  v.Nullable("busy_since", g.busy_since, busy);
  v("tasks_run", g.tasks_run);
  v("held_by", g.held_by);
  v("foreign", g.foreign);
  v.Nullable("model", g.model, !g.model.empty());
  v.Omittable("drain_reason", g.drain_reason, !g.drain_reason.empty());
  v.Omittable("drained_by", g.drained_by, !g.drained_by.empty());
  v.Omittable("drained_at", g.drained_at, g.drained_at > 0);
  v.Nullable("owner", g.owner, busy);
  v("reading", g.reading);
  v.Omittable("placement", g.placement, g.placement.has_value());
}
nlohmann::json ToJson(const GpuInfo& g);
Result<GpuInfo> GpuInfoFromJson(const nlohmann::json& j);

// The replies, one struct per request kind (the payload beside "type", "id" and "ok"). Each
// is written by the daemon with MakeReply and read by the client with ReadReply.

// hello and ping: who the daemon is and who it takes the caller for (from SO_PEERCRED).
struct HelloReply {
  std::string server;  // "ckprofd 0.5.0"
  int protocol = 0;
  uint32_t uid = 0;
  std::string user;
  bool admin = false;
  // What this daemon understands beyond protocol 1's first requests (kFeatures): a client
  // checks before it sends a request an older daemon would misread (it ignores fields it does
  // not know: "cancel 7#3" would cancel all of job 7).
  std::vector<std::string> features;
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, HelloReply>
void VisitFields(S& r, V& v) {
  v("server", r.server);
  v("protocol", r.protocol);
  v("uid", r.uid);
  v("user", r.user);
  v("admin", r.admin);
  v("features", r.features);
}
// The features of this build's daemon, and the one a request needs ("" when none): "repeat"
// (submit repeat > 1, results runs), "task_control" (cancel or retry of some tasks, retry's
// failed/timeout_s/profiler_path),
// "log", "edit", "clean": those requests; "clean_jobs": clean's job_ids and dry_run; "env":
// submit's env; "hold": hold and release; "after": submit's after and after_ok;
// "drain_reason": drain's reason; "job_timeout": submit's job_timeout_s; "mail": submit's mail;
// "usage": usage.
inline const std::vector<std::string> kFeatures = {
    "repeat",     "task_control", "log",  "edit",  "clean",        "on_end",      "reuse", "best",
    "clean_jobs", "env",          "hold", "after", "drain_reason", "job_timeout", "mail",  "usage"};

// What a submit's conversion found: its format, records read, configs made, configs kept as
// tasks (after max_ops), records skipped, and the first warnings.
struct ConversionSummary {
  std::string format;
  int64_t records = 0, configs = 0, kept = 0, skipped = 0;
  std::vector<std::string> warnings;
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, ConversionSummary>
void VisitFields(S& c, V& v) {
  v("format", c.format);
  v("records", c.records);
  v("configs", c.configs);
  v("kept", c.kept);
  v("skipped", c.skipped);
  v("warnings", c.warnings);
}

// One command a dry-run submit would run (error: why it cannot be built).
struct PlannedRun {
  int64_t position = 0, priority_rank = 0;
  std::string operation, description;
  std::vector<std::string> argv;
  std::string command, error;
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, PlannedRun>
void VisitFields(S& p, V& v) {
  v("position", p.position);
  v("priority_rank", p.priority_rank);
  v("operation", p.operation);
  v("description", p.description);
  v("argv", p.argv);
  v("command", p.command);
  v("error", p.error);
}

// submit: the job it made, or (dry_run) the commands it would run.
struct SubmitReply {
  bool dry_run = false;
  int64_t job_id = 0;             // not dry_run
  std::optional<JobSummary> job;  // not dry_run
  ConversionSummary conversion;
  std::string profiler;              // dry_run: the profiler the commands use, described
  std::vector<PlannedRun> commands;  // dry_run
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, SubmitReply>
void VisitFields(S& r, V& v) {
  v.Omittable("dry_run", r.dry_run, r.dry_run);
  v.Omittable("job_id", r.job_id, !r.dry_run);
  v.Omittable("job", r.job, !r.dry_run && r.job.has_value());
  v("conversion", r.conversion);
  v.Omittable("profiler", r.profiler, r.dry_run);
  v.Omittable("commands", r.commands, r.dry_run);
}

// status of one job (job), or status/list of many (jobs).
// The asking user's use of the daemon against its per-user limits (status and list without a
// job). A limit of 0 is none (JSON: null).
struct UserUse {
  std::string user;
  int64_t jobs = 0;              // jobs that have not ended
  int64_t queued_runs = 0;       // their runs that have not ended (queued or running)
  int64_t gpus_in_use = 0;       // their tasks running now
  int64_t max_jobs = 0;          // max_jobs_per_user
  int64_t max_queued_runs = 0;   // max_queued_runs_per_user
  int64_t max_gpus = 0;          // max_gpus_per_user (admins too)
  double max_timeout_s = 0;      // the longest --timeout the user may ask for
  double max_job_timeout_s = 0;  // the longest --job-timeout (max_job_timeout; 0 = any)
  bool admin = false;            // exempt from the job, run and timeout limits
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, UserUse>
void VisitFields(S& u, V& v) {
  v("user", u.user);
  v("jobs", u.jobs);
  v("queued_runs", u.queued_runs);
  v("gpus_in_use", u.gpus_in_use);
  v.Nullable("max_jobs", u.max_jobs, u.max_jobs > 0);
  v.Nullable("max_queued_runs", u.max_queued_runs, u.max_queued_runs > 0);
  v.Nullable("max_gpus", u.max_gpus, u.max_gpus > 0);
  v.Nullable("max_timeout_s", u.max_timeout_s, u.max_timeout_s > 0);
  v.Nullable("max_job_timeout_s", u.max_job_timeout_s, u.max_job_timeout_s > 0);
  v("admin", u.admin);
}

nlohmann::json ToJson(const UserUse& u);
nlohmann::json ToJson(const AllocationInfo& a);

struct StatusReply {
  std::optional<JobSummary> job;
  std::vector<JobSummary> jobs;
  std::optional<UserUse> you;  // without a job: the asking user's use and limits
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, StatusReply>
void VisitFields(S& r, V& v) {
  v.Omittable("job", r.job, r.job.has_value());
  v.Omittable("jobs", r.jobs, !r.job.has_value());
  v.Omittable("you", r.you, r.you.has_value());
}

// results: the job and each of its tasks.
struct ResultsReply {
  JobSummary job;
  // One per config: a repeated job's runs merged (MergeRepeats), each with its spread.
  std::vector<TaskResult> tasks;
  // Each run of a repeated job, when asked (request field "runs").
  std::vector<TaskResult> runs;
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, ResultsReply>
void VisitFields(S& r, V& v) {
  v("job", r.job);
  v("tasks", r.tasks);
  v.Omittable("runs", r.runs, !r.runs.empty());
}

// cancel, retry and boost: the job as it is now; retry also how many tasks it requeued, and
// whether they are still being queued again, a step at a time (a large job: `status` says how
// far; they start as they are queued).
struct JobReply {
  std::optional<JobSummary> job;
  std::optional<int64_t> requeued;  // retry
  bool in_steps = false;            // retry
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, JobReply>
void VisitFields(S& r, V& v) {
  v.Omittable("job", r.job, r.job.has_value());
  v.Omittable("requeued", r.requeued, r.requeued.has_value());
  v.Omittable("in_steps", r.in_steps, r.in_steps);
}

// gpus: what each GPU does, and the variables that pin a profiler to it.
struct GpusReply {
  std::vector<GpuInfo> gpus;  // under Slurm: the slots, one per task in flight at most
  std::vector<std::string> pin_env;
  std::string executor = "local";           // "local" or "slurm"
  std::vector<ClusterNode> cluster;         // under Slurm: its GPU nodes (sinfo)
  std::vector<AllocationInfo> allocations;  // the Slurm executor's allocation mode: its allocations
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, GpusReply>
void VisitFields(S& r, V& v) {
  v("gpus", r.gpus);
  v("pin_env", r.pin_env);
  v.Omittable("executor", r.executor, r.executor != "local");
  v.Omittable("cluster", r.cluster, r.executor != "local");
  v.Omittable("allocations", r.allocations, !r.allocations.empty());
}

// watch's first frame: the job and the GPUs running its tasks now. Events follow.
struct WatchReply {
  std::optional<JobSummary> job;
  std::vector<GpuInfo> running;
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, WatchReply>
void VisitFields(S& r, V& v) {
  v.Omittable("job", r.job, r.job.has_value());
  v("running", r.running);
}

// log: the output of the job's tasks (TaskResult with stdout and stderr; of a running task what
// it wrote so far), in position and run order; `omitted`: tasks left out to keep the answer
// small (name them). With follow and one task, that task, then a stream of TaskLogEvent frames
// until it ends, then {"type":"end"}; with follow and no task (the whole job), every task that
// runs now, then the TaskLogEvent frames of every task of the job until the job's end, whose
// job_finished event (JobEventFrame) is the last.
struct LogReply {
  JobSummary job;
  std::vector<TaskResult> tasks;
  int64_t omitted = 0;
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, LogReply>
void VisitFields(S& r, V& v) {
  v("job", r.job);
  v("tasks", r.tasks);
  v("omitted", r.omitted);
}

// A followed task's event: {"type":"log","event":"output","stream":"stdout"|"stderr","data"}
// as the profiler writes, "started" (gpu, attempt) when a run of it starts, "ended" (state,
// error) once it is final (a one-task follow's last event; a whole job's follow goes on with
// its other tasks).
struct TaskLogEvent {
  std::string event;  // output, started, ended
  int64_t job_id = 0, task_id = 0, position = 0;
  int run = 0;
  std::string stream, data;              // output
  int gpu = -1, attempt = 0;             // started
  TaskState state = TaskState::kQueued;  // ended
  std::string error;                     // ended
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, TaskLogEvent>
void VisitFields(S& e, V& v) {
  v.Derived("type", std::string_view("log"));
  v("event", e.event);
  v("job_id", e.job_id);
  v("task_id", e.task_id);
  v("position", e.position);
  v.Nullable("run", e.run, e.run > 0);
  v.Omittable("stream", e.stream, e.event == "output");
  v.Omittable("data", e.data, e.event == "output");
  v.Omittable("gpu", e.gpu, e.event == "started");
  v.Omittable("attempt", e.attempt, e.event == "started");
  v.Omittable("state", e.state, e.event == "ended");
  v.Omittable("error", e.error, e.event == "ended");
}

// clean: the jobs removed (with dry_run: those that would be), their tasks counted in
// `results`, and the jobs as they were (status's summary of each, for a listing).
struct CleanReply {
  std::vector<int64_t> removed;
  int64_t results = 0;
  bool dry_run = false;
  std::vector<JobSummary> jobs;
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, CleanReply>
void VisitFields(S& r, V& v) {
  v("removed", r.removed);
  v("results", r.results);
  v("dry_run", r.dry_run);
  v("jobs", r.jobs);
}

// best: one row per problem, profiler build and GPU model: its fastest measurement.
struct BestRow {
  std::string operation;       // profile_grouped_conv_fwd, ...
  std::string problem;         // ProblemKey (common/ck_config.h)
  std::string profiler;        // the executable's resolved path
  std::string profiler_build;  // path, size, mtime and content hash (ProfilerIdentities)
  std::string gpu_model;       // "" = unknown (JSON null)
  std::string best_name, split_k;
  double avg_ms = 0, tflops = 0, gbps = 0;
  int64_t measured = 0;                           // how many successes were recorded for it
  double first_at = 0, last_at = 0, best_at = 0;  // unix seconds
  int64_t job_id = 0, task_id = 0;                // where the best was measured
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, BestRow>
void VisitFields(S& r, V& v) {
  v("operation", r.operation);
  v("problem", r.problem);
  v("profiler", r.profiler);
  v("profiler_build", r.profiler_build);
  v.Nullable("gpu_model", r.gpu_model, !r.gpu_model.empty());
  v("best_name", r.best_name);
  v("avg_ms", r.avg_ms);
  v("tflops", r.tflops);
  v("gbps", r.gbps);
  v("split_k", r.split_k);
  v("measured", r.measured);
  v("first_at", r.first_at);
  v("last_at", r.last_at);
  v("best_at", r.best_at);
  v("job_id", r.job_id);
  v("task_id", r.task_id);
}
struct BestReply {
  std::vector<BestRow> rows;
  bool shared = true;  // everyone's measurements (false: the asker's own only)
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, BestReply>
void VisitFields(S& r, V& v) {
  v("rows", r.rows);
  v("shared", r.shared);
}

// drain and resume: nothing but "ok".
struct EmptyReply {};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, EmptyReply>
void VisitFields(S&, V&) {}

// A refusal: why, and for a submit whose input held nothing to run, what its conversion found.
struct ErrorReply {
  std::string error;
  std::optional<ConversionSummary> conversion;
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, ErrorReply>
void VisitFields(S& r, V& v) {
  v("error", r.error);
  v.Omittable("conversion", r.conversion, r.conversion.has_value());
}

// A watch stream's event: {"type":"event","event":<kind>,"job_id":..., the kind's fields,
// "job":<summary>}. task_started carries the task's place, op, description, GPU and attempt;
// task_finished its TaskResult; job_finished nothing more.
enum class EventKind : uint8_t { kTaskStarted, kTaskFinished, kJobFinished };
std::string_view EnumName(EventKind k);
bool ParseEnum(std::string_view name, EventKind* out);
struct JobEventFrame {
  EventKind event = EventKind::kTaskStarted;
  int64_t job_id = 0;
  // task_started:
  int64_t task_id = 0, position = 0, priority_rank = 0;
  std::string operation, description;
  int gpu = -1;
  int attempt = 0;
  // task_finished:
  std::optional<TaskResult> task;
  std::optional<JobSummary> job;
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, JobEventFrame>
void VisitFields(S& e, V& v) {
  const bool started = e.event == EventKind::kTaskStarted;
  v.Derived("type", std::string_view("event"));
  v("event", e.event);
  v("job_id", e.job_id);
  v.Omittable("task_id", e.task_id, started);
  v.Omittable("position", e.position, started);
  v.Omittable("priority_rank", e.priority_rank, started);
  v.Omittable("operation", e.operation, started);
  v.Omittable("description", e.description, started);
  v.Omittable("gpu", e.gpu, started);
  v.Omittable("attempt", e.attempt, started);
  v.Omittable("task", e.task, e.task.has_value());
  v.Omittable("job", e.job, e.job.has_value());
}

// ---------------------------------------------------------------------------------------------
// Requests: one struct per kind, declared once with everything about it: its kind and wire
// name (kType, kName), its reply (Reply), its fields and their limits (Fields: one list that
// ParseRequest reads, validating, and RequestToJson writes), and where it has them, the feature
// a daemon must list for it (Feature(): "" when none) and the stream that answers it (Stream():
// nullopt when the answer is one reply), and a payload to free once answered (Release()).
// A new request: its RequestType, its struct here, its
// place in RequestBody, its case in Service::Handle and a client command.
//
// A Fields visitor V offers Int, RequiredInt, Double, Bool, String, IntList, Content, Order and
// the Opt... forms of edit (protocol.cpp's RequestReader and RequestWriter).

// A request answered by a stream of frames (watch, log --follow) ending with {"type":"end"}.
struct StreamSpec {
  bool end_only = false;  // only the job_finished event (ckprof wait)
};

struct HelloRequest {
  static constexpr RequestType kType = RequestType::kHello;
  static constexpr const char* kName = "hello";
  using Reply = HelloReply;
  int protocol = 0;
  std::string client;  // "ckprof " + kVersion
  template <typename R, typename V>
  static void Fields(R& r, V& v) {
    v.Int("protocol", r.protocol, 0, 1 << 20);
    v.String("client", r.client, 256);
  }
};

struct PingRequest {
  static constexpr RequestType kType = RequestType::kPing;
  static constexpr const char* kName = "ping";
  using Reply = HelloReply;
  template <typename R, typename V>
  static void Fields(R&, V&) {}
};

struct SubmitRequest {
  static constexpr RequestType kType = RequestType::kSubmit;
  static constexpr const char* kName = "submit";
  using Reply = SubmitReply;
  SubmitOptions submit;
  template <typename R, typename V>
  static void Fields(R& r, V& v) {
    auto& s = r.submit;
    v.Content("content", s.content);
    v.String("content_encoding", s.content_encoding, 32);
    v.String("input_name", s.input_name, 4096);
    v.String("name", s.name, 256);
    v.Int("priority", s.priority, kMinPriority, kMaxPriority);
    v.IntList("gpus", s.gpus, 0, 1023);
    v.Int("max_gpus", s.max_gpus, 0, 1024);
    v.Order("order", s.order);
    // Up to 2100-01-01: a later time would overflow the daemon's nanosecond timers.
    v.Double("not_before", s.not_before, 0, kMaxNotBefore);
    v.Double("timeout_s", s.timeout_s, -1, 1e7);
    v.Double("job_timeout_s", s.job_timeout_s, -1, 1e8);
    v.Int("max_ops", s.max_ops, 0, kMaxId);
    v.Int("repeat", s.repeat, 1, kMaxRepeat);
    v.Bool("dry_run", s.dry_run);
    v.String("data_type", s.data_type, 16);
    v.String("layout", s.layout, 16);
    v.String("profiler_path", s.profiler_path, 4096);
    v.String("cwd", s.cwd, 4096);
    v.String("on_end", s.on_end, 8192);
    v.String("reuse", s.reuse, 16);
    v.String("env", s.env, 65536);
    v.IntList("after", s.after, 1, kMaxId);
    v.IntList("after_ok", s.after_ok, 1, kMaxId);
    v.Bool("mail", s.mail);
  }
  std::string Feature() const {
    return submit.mail                                         ? "mail"
           : submit.job_timeout_s >= 0                         ? "job_timeout"
           : !submit.after.empty() || !submit.after_ok.empty() ? "after"
           : !submit.env.empty()                               ? "env"
           : !submit.on_end.empty()                            ? "on_end"
           : submit.repeat > 1                                 ? "repeat"
                                                               : "";
  }
  // Frees the text once the submit is answered (it may be hundreds of MiB); true when it was
  // large (1 MiB or more), so that the heap is worth trimming after it.
  bool Release() {
    const bool large = submit.content.size() >= (size_t{1} << 20);
    std::string().swap(submit.content);
    return large;
  }
  // What the field list cannot say: "" when the request holds together.
  std::string Check() const {
    if (submit.content_encoding.empty() || submit.content_encoding == "gzip+base64") return "";
    return "submit: content_encoding must be \"\" or \"gzip+base64\", got '" +
           submit.content_encoding + "'";
  }
};

// status: one job (job_id), or every visible job with the caller's use and limits.
struct StatusRequest {
  static constexpr RequestType kType = RequestType::kStatus;
  static constexpr const char* kName = "status";
  using Reply = StatusReply;
  int64_t job_id = 0;
  bool all = false;  // include finished jobs (status without job_id lists them all anyway)
  template <typename R, typename V>
  static void Fields(R& r, V& v) {
    v.Int("job_id", r.job_id, 0, kMaxId);
    v.Bool("all", r.all);
  }
};
// list: status without job_id; `all` includes finished jobs.
struct ListRequest : StatusRequest {
  static constexpr RequestType kType = RequestType::kList;
  static constexpr const char* kName = "list";
};

struct ResultsRequest {
  static constexpr RequestType kType = RequestType::kResults;
  static constexpr const char* kName = "results";
  using Reply = ResultsReply;
  int64_t job_id = 0;
  bool all = false;   // include each task's output and config
  bool runs = false;  // each run of a repeated job, besides the merged results
  template <typename R, typename V>
  static void Fields(R& r, V& v) {
    v.Int("job_id", r.job_id, 0, kMaxId);
    v.Bool("all", r.all);
    v.Bool("runs", r.runs);
  }
  std::string Feature() const { return runs ? "repeat" : ""; }
};

struct CancelRequest {
  static constexpr RequestType kType = RequestType::kCancel;
  static constexpr const char* kName = "cancel";
  using Reply = JobReply;
  int64_t job_id = 0;
  // Only these tasks of the job, by their #N (every run of a repeated config); empty = all.
  std::vector<int> tasks;
  template <typename R, typename V>
  static void Fields(R& r, V& v) {
    v.RequiredInt("job_id", r.job_id, 1, kMaxId);
    v.IntList("tasks", r.tasks, 1, std::numeric_limits<int>::max());
  }
  std::string Feature() const { return tasks.empty() ? "" : "task_control"; }
};

struct RetryRequest {
  static constexpr RequestType kType = RequestType::kRetry;
  static constexpr const char* kName = "retry";
  using Reply = JobReply;
  int64_t job_id = 0;
  std::vector<int> tasks;     // as cancel's
  bool failed_only = false;   // retry --failed: failed, crashed and timed-out tasks only
  double timeout_s = -1;      // the job's new per-task timeout (-1 = as it was)
  std::string profiler_path;  // the job's new profiler, absolute ("" = as it was)
  template <typename R, typename V>
  static void Fields(R& r, V& v) {
    v.RequiredInt("job_id", r.job_id, 1, kMaxId);
    v.IntList("tasks", r.tasks, 1, std::numeric_limits<int>::max());
    v.Bool("failed", r.failed_only);
    v.Double("timeout_s", r.timeout_s, -1, 1e7);
    v.String("profiler_path", r.profiler_path, 4096);
  }
  std::string Feature() const {
    return tasks.empty() && !failed_only && timeout_s < 0 && profiler_path.empty() ? ""
                                                                                   : "task_control";
  }
};

struct WatchRequest {
  static constexpr RequestType kType = RequestType::kWatch;
  static constexpr const char* kName = "watch";
  using Reply = WatchReply;  // the stream's first frame; JobEventFrame the others
  int64_t job_id = 0;
  bool end_only = false;  // no task events, only job_finished
  template <typename R, typename V>
  static void Fields(R& r, V& v) {
    v.RequiredInt("job_id", r.job_id, 1, kMaxId);
    v.Bool("end_only", r.end_only);
  }
  std::optional<StreamSpec> Stream() const { return StreamSpec{end_only}; }
};

struct GpusRequest {
  static constexpr RequestType kType = RequestType::kGpus;
  static constexpr const char* kName = "gpus";
  using Reply = GpusReply;
  template <typename R, typename V>
  static void Fields(R&, V&) {}
};

// drain (admins): no new task starts on the GPU; kept across restarts, with who, when and why
// (`reason`, optional).
struct DrainRequest {
  static constexpr RequestType kType = RequestType::kDrain;
  static constexpr const char* kName = "drain";
  using Reply = EmptyReply;
  int gpu = -1;
  std::string reason;
  template <typename R, typename V>
  static void Fields(R& r, V& v) {
    v.RequiredInt("gpu", r.gpu, 0, 1023);
    v.String("reason", r.reason, 1024);
  }
  // An older daemon would drain without keeping the reason.
  std::string Feature() const { return reason.empty() ? "" : "drain_reason"; }
};
// resume (admins): the GPU takes tasks again (its `reason` is not used).
struct ResumeRequest : DrainRequest {
  static constexpr RequestType kType = RequestType::kResume;
  static constexpr const char* kName = "resume";
};

// boost (admins): set a job's priority.
struct BoostRequest {
  static constexpr RequestType kType = RequestType::kBoost;
  static constexpr const char* kName = "boost";
  using Reply = JobReply;
  int64_t job_id = 0;
  int priority = 0;
  template <typename R, typename V>
  static void Fields(R& r, V& v) {
    v.RequiredInt("job_id", r.job_id, 1, kMaxId);
    v.Int("priority", r.priority, kMinPriority, kMaxPriority);
  }
};

// A job's task output; with follow, a stream of one task's live output until it ends.
struct LogRequest {
  static constexpr RequestType kType = RequestType::kLog;
  static constexpr const char* kName = "log";
  using Reply = LogReply;  // with follow: the stream's first frame; TaskLogEvent the others
  int64_t job_id = 0;
  std::vector<int> tasks;  // as cancel's
  bool follow = false;
  int lines = 0;  // the last N lines of each stream (0 = all that is kept)
  template <typename R, typename V>
  static void Fields(R& r, V& v) {
    v.RequiredInt("job_id", r.job_id, 1, kMaxId);
    v.IntList("tasks", r.tasks, 1, std::numeric_limits<int>::max());
    v.Bool("follow", r.follow);
    v.Int("lines", r.lines, 0, 1 << 30);
  }
  // (An older daemon refuses a follow of the whole job with a clear message: no feature of
  // its own.)
  std::string Feature() const { return "log"; }
  std::optional<StreamSpec> Stream() const {
    return follow ? std::optional<StreamSpec>(StreamSpec{}) : std::nullopt;
  }
};

// usage: accounting, as sacct and sshare tell it. One row per user (and with `jobs` per job)
// of the attempts stored since `since`: GPU time, runs, successes and failures; each user's
// fair-share usage now and place in fair share's order; the caller's use and caps.
struct UsageRow {
  std::string user;
  uint32_t uid = 0;
  int64_t job_id = 0;    // a job's row (UsageRequest::jobs); 0 in a user's
  std::string job_name;  // a job's row
  // Attempts that started at or after `since`: their GPU seconds (a running one's up to now),
  // how many, how many succeeded, how many failed (IsFailure: failed, crashed, timed out,
  // spawn failed, interrupted).
  double gpu_seconds = 0;
  int64_t runs = 0, succeeded = 0, failed = 0;
  // A user's row: decayed GPU seconds now, running tasks included (what fair share compares),
  // and their place among the users with queued work (1 = served first; 0 = no queued work).
  double fair_share_usage = 0;
  int64_t place = 0;
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, UsageRow>
void VisitFields(S& r, V& v) {
  v("user", r.user);
  v("uid", r.uid);
  v.Omittable("job_id", r.job_id, r.job_id > 0);
  v.Omittable("job_name", r.job_name, r.job_id > 0);
  v("gpu_seconds", r.gpu_seconds);
  v("runs", r.runs);
  v("succeeded", r.succeeded);
  v("failed", r.failed);
  v.Omittable("fair_share_usage", r.fair_share_usage, r.job_id == 0);
  v.Nullable("place", r.place, r.place > 0);
}
struct UsageReply {
  double since = 0, now = 0;  // unix seconds: the window (since 0: everything stored)
  double half_life_s = 0;     // fair share's decay
  std::vector<UsageRow> users;
  std::vector<UsageRow> jobs;  // with `jobs`
  UserUse you;                 // the caller's use and per-user caps (as status's)
};
template <typename S, typename V>
requires std::is_same_v<std::remove_const_t<S>, UsageReply>
void VisitFields(S& r, V& v) {
  v("since", r.since);
  v("now", r.now);
  v("half_life_s", r.half_life_s);
  v("users", r.users);
  v("jobs", r.jobs);
  v("you", r.you);
}
struct UsageRequest {
  static constexpr RequestType kType = RequestType::kUsage;
  static constexpr const char* kName = "usage";
  using Reply = UsageReply;
  double since = 0;   // unix seconds; 0 = every stored attempt
  std::string user;   // a name or uid; "" = everyone (every user sees everyone's, as status)
  bool jobs = false;  // one row per job too
  template <typename R, typename V>
  static void Fields(R& r, V& v) {
    v.Double("since", r.since, 0, kMaxNotBefore);
    v.String("user", r.user, 256);
    v.Bool("jobs", r.jobs);
  }
  std::string Feature() const { return "usage"; }
};

// Change a job's settings (its owner: waiting work; admins: anything).
struct EditRequest {
  static constexpr RequestType kType = RequestType::kEdit;
  static constexpr const char* kName = "edit";
  using Reply = JobReply;
  int64_t job_id = 0;
  EditOptions edit;
  template <typename R, typename V>
  static void Fields(R& r, V& v) {
    auto& e = r.edit;
    v.RequiredInt("job_id", r.job_id, 1, kMaxId);
    v.OptInt("priority", e.priority, kMinPriority, kMaxPriority);
    v.OptDouble("not_before", e.not_before, 0, kMaxNotBefore);
    v.OptIntList("gpus", e.gpus, 0, 1023);
    v.OptInt("max_gpus", e.max_gpus, 0, 1024);
    v.OptDouble("timeout_s", e.timeout_s, -1, 1e7);
    v.OptString("name", e.name, 256);
  }
  std::string Feature() const { return "edit"; }
};

// Remove ended jobs (yours; admins: anyone's).
struct CleanRequest {
  static constexpr RequestType kType = RequestType::kClean;
  static constexpr const char* kName = "clean";
  using Reply = CleanReply;
  double older_than_s = 0;  // jobs that ended at least this long ago (0 = any)
  bool all = false;         // everyone's (admins)
  // Only these jobs (each must exist, have ended and be the caller's, or the caller an admin;
  // else nothing is removed); empty = every ended job of the caller (all: everyone's).
  std::vector<int64_t> job_ids;
  bool dry_run = false;  // say what would be removed, remove nothing
  template <typename R, typename V>
  static void Fields(R& r, V& v) {
    v.Double("older_than_s", r.older_than_s, 0, 1e10);
    v.Bool("all", r.all);
    v.IntList("job_ids", r.job_ids, 1, kMaxId);
    v.Bool("dry_run", r.dry_run);
  }
  // An older daemon ignores job_ids and dry_run: it would remove every ended job.
  std::string Feature() const { return job_ids.empty() && !dry_run ? "clean" : "clean_jobs"; }
};

// The tuning table: every problem's best measured kernel.
struct BestRequest {
  static constexpr RequestType kType = RequestType::kBest;
  static constexpr const char* kName = "best";
  using Reply = BestReply;
  // Only this operation ("fwd", "bwd_data", "bwd_weight"; "" = all), profiler (its absolute
  // path) and GPU model (a part of its name, any case).
  std::string op, profiler_path, gpu_model;
  template <typename R, typename V>
  static void Fields(R& r, V& v) {
    v.String("op", r.op, 64);
    v.String("profiler_path", r.profiler_path, 4096);
    v.String("gpu_model", r.gpu_model, 256);
  }
  std::string Feature() const { return "best"; }
};

// hold: the job's queued tasks do not start (running ones finish) until a release. Its owner may
// hold it; admins any job. A hold by an admin is released by an admin.
struct HoldRequest {
  static constexpr RequestType kType = RequestType::kHold;
  static constexpr const char* kName = "hold";
  using Reply = JobReply;
  int64_t job_id = 0;
  template <typename R, typename V>
  static void Fields(R& r, V& v) {
    v.RequiredInt("job_id", r.job_id, 1, kMaxId);
  }
  std::string Feature() const { return "hold"; }
};
// release: a held job's queued tasks may start again.
struct ReleaseRequest : HoldRequest {
  static constexpr RequestType kType = RequestType::kRelease;
  static constexpr const char* kName = "release";
};

// Every request, in RequestType's order (protocol.cpp checks it).
using RequestBody =
    std::variant<HelloRequest, PingRequest, SubmitRequest, StatusRequest, ListRequest,
                 ResultsRequest, CancelRequest, RetryRequest, WatchRequest, GpusRequest,
                 DrainRequest, ResumeRequest, BoostRequest, LogRequest, EditRequest, CleanRequest,
                 BestRequest, HoldRequest, ReleaseRequest, UsageRequest>;
template <typename T>
concept IsRequest = requires {
  T::kType;
  typename T::Reply;
};

// One request as it travels: the client's id for it, and the request itself.
struct Request {
  int64_t id = 0;
  RequestBody body;
  Request() = default;
  template <typename T>
  requires IsRequest<T> Request(T r) : body(std::move(r)) {}
  RequestType type() const { return static_cast<RequestType>(body.index()); }
  template <typename T>
  const T& as() const {
    return std::get<T>(body);
  }
  template <typename T>
  T& as() {
    return std::get<T>(body);
  }
  template <typename T>
  const T* get_if() const {
    return std::get_if<T>(&body);
  }
};

// Parses and validates one frame. Errors name the field: "request field 'job_id' must be a
// positive integer". Both read and write each request's Fields.
Result<Request> ParseRequest(std::string_view frame);
nlohmann::json RequestToJson(const Request& r);
// The feature the request needs ("" when none; see kFeatures).
std::string RequiredFeature(const Request& r);
// The stream that answers it, when one does (watch, log with follow).
std::optional<StreamSpec> StreamOf(const Request& r);
// Frees the request's payload once it is answered (a submit's text): true when it had a large
// one (the heap is then trimmed before the answer).
bool ReleasePayload(Request& r);

nlohmann::json OkResponse(const Request& r);

// The response frame's JSON for a reply: OkResponse(request) with the reply's fields.
template <typename T>
nlohmann::json MakeReply(const Request& request, const T& reply);
// A refusal with ErrorReply's fields.
nlohmann::json MakeErrorReply(int64_t id, const ErrorReply& reply);
// The response frame (its text and newline) of MakeReply, written straight into text without
// the DOM, its fields in declaration order: for the large answers (best's tens of thousands
// of rows), where the DOM cost more than the query.
template <typename T>
std::string MakeReplyFrame(const Request& request, const T& reply);
// The reply's fields alone, as an object (what `--json` prints).
template <typename T>
nlohmann::json ReplyJson(const T& reply);
// Reads a reply the daemon sent (tolerant, see wire_fields.h); an error when it is no object.
template <typename T>
Result<T> ReadReply(const nlohmann::json& response);

}  // namespace ckprof

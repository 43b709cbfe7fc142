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

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace ckprof {

inline constexpr int kProtocolVersion = 1;
inline constexpr const char* kDefaultSocketPath = "/run/ckprofd/ckprofd.sock";
inline constexpr size_t kDefaultMaxFrameBytes = 256u << 20;  // 256 MiB: a submit carries a file.

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
  kBoost,  // admins: set a job's priority
};

std::string_view RequestTypeName(RequestType t);
std::optional<RequestType> ParseRequestTypeName(std::string_view name);

// True for the task orders a job may ask for: "rank" and "longest-first" ("" means rank).
bool IsJobOrder(std::string_view order);

// What a submit carries. The content is the input file's text (IR list, trace or configs).
struct SubmitOptions {
  std::string content;
  // "" = content is the text itself; "gzip+base64" = base64 of a gzip file (a compressed
  // trace travels compressed). See EncodeSubmitContent.
  std::string content_encoding;
  std::string input_name;  // the file name, for display only
  std::string name;        // job name; default: input_name
  int priority = 0;        // higher runs first within the submitting user's jobs
  std::vector<int> gpus;   // allowed GPUs; empty = any
  int max_gpus = 0;        // at most this many GPUs at once; 0 = no limit
  // The order of the job's own tasks: "" or "rank" (the configs' priority rank, then their
  // order in the file; near the end, a task too long to start last starts at once), or
  // "longest-first" (the most estimated work, in FLOPs, first). See IsJobOrder.
  std::string order;
  double not_before = 0;      // unix seconds; 0 = now
  double timeout_s = -1;      // per-task timeout; -1 = the daemon's default, 0 = none
  int64_t max_ops = 0;        // keep only the first N configs; 0 = all
  bool dry_run = false;       // return the commands, run nothing, store nothing
  std::string data_type;      // "", "auto", "fp16", "bf16", "fp32"
  std::string layout;         // "", "auto", "nchw", "nhwc"
  std::string profiler_path;  // absolute; empty = the daemon's default
  std::string cwd;            // the client's working directory (tasks run there as root daemon)
};

struct Request {
  RequestType type = RequestType::kPing;
  int64_t id = 0;
  int protocol = 0;       // hello
  std::string client;     // hello: "ckprof " + kVersion
  SubmitOptions submit;   // submit
  int64_t job_id = 0;     // status, results, cancel, retry, watch, boost
  bool all = false;       // list/status: include finished jobs; results: include output
  bool end_only = false;  // watch: no task events, only job_finished
  int gpu = -1;           // drain, resume
  int priority = 0;       // boost
};

// Fills content/content_encoding from a file's bytes: gzip files go as base64 of the gzip,
// large text files are gzipped first, small text goes as it is.
Status EncodeSubmitContent(std::string file_bytes, SubmitOptions* s);
// The text a submit carries, decoded (the gzip is left for the converter, which reads it).
Result<std::string> DecodeSubmitContent(const SubmitOptions& s);

// Parses and validates one frame. Errors name the field: "request field 'job_id' must be a
// positive integer".
Result<Request> ParseRequest(std::string_view frame);
nlohmann::json RequestToJson(const Request& r);

// Response helpers.
nlohmann::json OkResponse(const Request& r);
nlohmann::json ErrorResponse(int64_t id, std::string_view message);

// Formats a frame: compact JSON plus '\n'. Invalid UTF-8 is replaced, never thrown on.
std::string Frame(const nlohmann::json& j);

// A job's tasks counted by state, in the one vocabulary every view uses (list, status, watch,
// wait, results, run): succeeded, failed, unsupported, timed out, crashed, cancelled, queued,
// running. Each task is counted once; "failed" holds the other ends (a non-zero exit, a spawn
// failure, an interruption with its attempts used up).
struct TaskCounts {
  int64_t succeeded = 0, failed = 0, unsupported = 0, timed_out = 0, crashed = 0, cancelled = 0,
          queued = 0, running = 0;
  // Counts one task by its TaskResult::state (an outcome kind name, "queued" or "running").
  void Add(std::string_view state);
  int64_t total() const;
  // The tasks that ran to an end (neither cancelled, nor queued, nor running).
  int64_t ran() const;
  // The tasks that ended without success (cancelled ones included).
  int64_t unsuccessful() const { return failed + unsupported + timed_out + crashed + cancelled; }
  // "3 succeeded, 1 failed, 2 timed out, 4 queued": succeeded and failed always, the others
  // when there are any, in the order above.
  std::string Describe() const;
};

// A job as `status` and `list` report it.
struct JobSummary {
  int64_t id = 0;
  uint32_t owner_uid = 0;
  std::string owner;  // user name, or the uid as text
  std::string name;
  std::string state;  // queued, running, finished, cancelled
  int priority = 0;
  std::string order = "rank";  // of its tasks: "rank" or "longest-first" (submit --order)
  // By state, each task once (see TaskCounts): total is their sum.
  int64_t total = 0, queued = 0, running = 0, succeeded = 0, failed = 0, unsupported = 0,
          timed_out = 0, crashed = 0, cancelled = 0;
  std::vector<int> gpus_in_use;
  // What the job was submitted with (submit's options): the GPUs it may use (empty = any), at
  // most how many at once (0 = no limit; JSON: null), the per-task timeout in force (the job's,
  // else the daemon's default; 0 = none; JSON: null) and the time before which it does not
  // start (0 = none; JSON: null). The priority is above.
  std::vector<int> allowed_gpus;
  int max_gpus = 0;
  double timeout_s = 0;
  double not_before = 0;
  // Unix seconds; 0 = not yet (JSON: null).
  double submitted_at = 0, started_at = 0, finished_at = 0;
  double eta_s = -1;     // -1 = unknown or ended (JSON: null)
  std::string profiler;  // the resolved profiler, described
  int64_t done() const { return total - queued - running; }
  TaskCounts counts() const {
    return {succeeded, failed, unsupported, timed_out, crashed, cancelled, queued, running};
  }
  bool all_ok() const { return succeeded == total; }
};
nlohmann::json ToJson(const JobSummary& j);
Result<JobSummary> JobSummaryFromJson(const nlohmann::json& j);

// One task's result (what `results` returns per task).
struct TaskResult {
  int64_t task_id = 0;
  int64_t job_id = 0;
  int64_t position = 0;  // 1-based, in the job's config order
  int64_t priority_rank = 0;
  std::string operation;  // profile_grouped_conv_fwd, ...
  std::string description;
  std::string command;  // the command line, for display
  std::string state;    // queued, running, succeeded, unsupported, failed, crashed, timed_out,
                        // cancelled, interrupted, spawn_failed
  int gpu = -1;         // -1 = none (JSON: null)
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
  bool finished() const { return state != "queued" && state != "running"; }
  bool ok() const { return state == "succeeded"; }
};
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
};
nlohmann::json ToJson(const GpuInfo& g);
Result<GpuInfo> GpuInfoFromJson(const nlohmann::json& j);

}  // namespace ckprof

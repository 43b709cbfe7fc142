// The Slurm executor: each task runs as a Slurm batch job (config key `executor`, kind
// "slurm"); Slurm distributes, allocates and pins the GPUs, ckprofd submits, follows and
// collects. SlurmLauncher is a Launcher (daemon/launcher.h), so the Scheduler's policy (fair
// share, priorities, job order) decides what is submitted next, into `max_in_flight` slots.
//
// A run: its batch script and output files under work_dir (a filesystem the nodes share):
// <work_dir>/<user>/job-<J>/t<T>.a<A>.sh (written here), .start (node, granted GPUs, time:
// written on the node as the job starts), .out/.err (the profiler's stdout and stderr), .end
// (its exit status and time), .slurm (what Slurm itself writes, e.g. "CANCELLED DUE TO TIME
// LIMIT"). `sbatch --parsable` gives the job id, which the Scheduler stores (as the attempt's
// handle) before anything else is done with the run; `squeue -t all` (then `sacct`) every
// poll_ms gives the states; the ended run's .out is parsed by today's CkOutputParser. The
// job's comment names the daemon, the task and the attempt, so a job whose id was not stored
// (a crash right after sbatch) is found again. Runs outlive the daemon: a stopping ckprofd
// leaves them to Slurm and Adopt follows them after the restart.
//
// The Slurm commands run through a ProcessRunner of its own (asynchronously: the io thread
// never waits on slurmctld). Single-threaded like the runner: the io thread only.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/steady_timer.hpp>
#include <asio/thread_pool.hpp>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/outcome.h"
#include "common/protocol.h"
#include "common/result.h"
#include "daemon/launcher.h"

namespace ckprof {

struct SlurmSettings {
  std::string partition;  // "" = the cluster's default partition
  std::string gres = "gpu:1";
  int max_in_flight = 64;                // tasks handed to Slurm at once (1..10000)
  std::vector<std::string> sbatch_args;  // appended to ours (a later option wins)
  std::string work_dir;                  // shared with the nodes; required
  double poll_ms = 1000;                 // how often squeue is asked while runs are in flight
  std::string bin_dir;                   // where sbatch, squeue, ... are ("" = PATH)

  // "tasks": each task a Slurm job of its own (SlurmLauncher); "allocations": each user's tasks
  // run in allocations ckprofd asks for, many tasks each (AllocationLauncher,
  // daemon/slurm_allocations.h). The settings below are the allocation mode's.
  std::string mode = "tasks";
  int max_allocations = 16;                 // allocations at once, all users (1..10000)
  std::string allocation_time = "2:00:00";  // each one's sbatch --time
  double allocation_time_s = 7200;          // the same in seconds
  double idle_release_s = 60;               // an allocation with nothing to run is let go after
  std::string agent_host;                   // what the agents connect to ("" = this host's name)
  std::string agent_listen = "0.0.0.0";     // the address ckprofd listens on for its agents
  int agent_port = 0;                       // 0 = any free port (told through the work dir)
  std::string agent_bin;                    // ckprof-agent on the nodes ("" = beside ckprofd)
  bool Allocations() const { return mode == "allocations"; }
  // GPUs in one allocation: the count `gres` ends with ("gpu:2", "gpu:mi300x:2"), else 1.
  int GpusPerAllocation() const;
};

// Slurm's time formats (sbatch --time, squeue %L): "M", "M:S", "H:M:S", "D-H", "D-H:M",
// "D-H:M:S" in seconds; nullopt for anything else (UNLIMITED, INVALID, NOT_SET, "").
std::optional<double> ParseSlurmTime(std::string_view text);

// One job as squeue / sacct list it.
struct SlurmJobRow {
  int64_t id = 0;
  std::string state;      // RUNNING, COMPLETED, NODE_FAIL, ... ("CANCELLED by 0" -> CANCELLED)
  std::string node;       // "" while pending
  std::string reason;     // squeue's %r (None, Resources, TimeLimit, ...)
  std::string exit_code;  // sacct's "exit:signal" ("" from squeue)
};
// `squeue -h -o '%i|%T|%N|%r'` lines; `sacct -X -n -P -o JobID,State,ExitCode,NodeList` lines.
std::vector<SlurmJobRow> ParseSqueueRows(std::string_view text);
std::vector<SlurmJobRow> ParseSacctRows(std::string_view text);
// Whether a Slurm job state is final (COMPLETED, FAILED, TIMEOUT, ...).
bool SlurmStateFinal(std::string_view state);
// How a final state ends our run: COMPLETED -> nullopt (by the profiler's output); TIMEOUT ->
// timed_out; CANCELLED -> cancelled; FAILED, OUT_OF_MEMORY, DEADLINE -> failed; NODE_FAIL,
// PREEMPTED, BOOT_FAIL (and anything else) -> interrupted, which the Scheduler requeues while
// attempts remain.
std::optional<Outcome> SlurmEndOutcome(const SlurmJobRow& row);

// What the batch script wrote on the node: `node=N gpus=G start=T` and `rc=R end=T`.
struct SlurmRunFiles {
  std::string node, gpus;  // gpus: SLURM_JOB_GPUS (else CUDA/ROCR_VISIBLE_DEVICES), "0" or "0,1"
  double start = 0, end = 0;
  std::optional<int> rc;  // the profiler's exit status as sh gives it (128+N: signal N)
};
void ParseSlurmStartLine(std::string_view text, SlurmRunFiles* f);
void ParseSlurmEndLine(std::string_view text, SlurmRunFiles* f);
// The profiler's end from the script's exit status: 124 with a timeout -> timed_out (coreutils
// timeout), 126/127 -> spawn_failed, > 128 -> crashed by signal rc-128, else ClassifyExit.
Outcome OutcomeFromScriptStatus(int rc, bool had_timeout, double timeout_s, const CkPerf& perf,
                                std::string_view stderr_text);

// `sinfo -h -N -O 'NodeList:|,StateLong:|,Gres:|,GresUsed:|,Partition:|'` lines, merged per node.
std::vector<ClusterNode> ParseSinfoNodes(std::string_view text);

// The batch script of a run (POSIX sh). `stem`: the files' path without suffix; `pin_env`: the
// daemon's pin variables (HIP_VISIBLE_DEVICES among them is set to what Slurm pinned).
std::string SlurmBatchScript(const RunSpec& spec, const std::string& stem,
                             const std::vector<std::string>& pin_env);
// --time for a run: whole minutes covering timeout plus grace (Slurm counts minutes), with one
// to spare, so that our own timeout ends the run first; 0 = no limit of ours.
int64_t SlurmTimeLimitMinutes(double timeout_s, double grace_s);
// sh single quoting.
std::string ShellQuote(std::string_view s);

// Creates `rel` below `root` (which must exist), each part a directory (never a link), the last
// one given mode `mode` and owned by `uid`/`gid` when they are set (a root daemon).
Status MakeRunDir(const std::string& root, const std::string& rel, mode_t mode,
                  std::optional<uid_t> uid, std::optional<gid_t> gid);
// Writes `path` afresh (an old file or a link a user left there is removed first, never
// followed) with `mode`, owned by `uid`/`gid` when they are set (a root daemon).
Status WriteFreshFile(const std::string& path, const std::string& text, mode_t mode,
                      std::optional<uid_t> uid, std::optional<gid_t> gid);
// Opens a file a run wrote (under a directory its user owns) for reading without following a
// link, and only when it is a plain file of `owner` or of ckprofd (a root daemon must not read,
// for a user, a file she may not read); -1 (errno set) else.
int OpenRunFile(const std::string& path, std::optional<uid_t> owner);
// The last line of a command's output, trimmed (what Slurm's tools say went wrong).
std::string LastLine(std::string_view s);
// A job id as sbatch --parsable or squeue's %i print it ("123", "123;cluster"); nullopt else.
std::optional<int64_t> ParseSlurmJobId(std::string_view s);

// Slurm's commands for both modes: found (bin_dir, else PATH) and run asynchronously through a
// ProcessRunner of their own (the io thread never waits on slurmctld), and the cluster's GPU
// nodes as sinfo last listed them. The io thread only.
class SlurmTools {
 public:
  SlurmTools(asio::any_io_executor ex, const SlurmSettings& settings);
  // Checks that the commands exist and that work_dir is a directory ckprofd may write (made
  // when missing); asks sinfo for the nodes.
  Status Check();
  // Runs a Slurm command; `done` gets its result on the io thread (never after the SlurmTools
  // is gone).
  void Run(const std::string& name, std::vector<std::string> args,
           std::function<void(RunResult)> done);
  std::string Bin(const std::string& name) const;
  // Runs `argv` (argv[0] a path) as `uid`/`gid` where ckprofd is root (else as itself); `done`
  // as Run's.
  void RunAs(std::vector<std::string> argv, std::optional<uid_t> uid, std::optional<gid_t> gid,
             std::function<void(RunResult)> done);
  // The cluster's GPU nodes, as last seen (asked again when older than a few seconds).
  std::vector<ClusterNode> Cluster();

 private:
  void RefreshCluster();
  const SlurmSettings& settings_;
  ProcessRunner runner_;
  std::vector<ClusterNode> cluster_;
  double cluster_at_ = 0;
  bool cluster_asked_ = false;
};

class SlurmLauncher final : public Launcher {
 public:
  // `tag` names this daemon in job comments (host and state dir); `pin_env`: see
  // SlurmBatchScript.
  SlurmLauncher(asio::any_io_executor ex, SlurmSettings settings, std::string tag,
                std::vector<std::string> pin_env);
  ~SlurmLauncher() override;
  // Checks that the Slurm commands exist and work_dir can be written (at start).
  Status Check();

  RunId Start(RunSpec spec, std::function<void(RunResult)> on_done) override;
  RunId Adopt(RunSpec spec, int64_t handle, std::function<void(RunResult)> on_done) override;
  bool Cancel(RunId id) override;
  bool Interrupt(RunId id) override;  // a remote run outlives the daemon: nothing to do
  size_t running() const override { return runs_.size(); }
  std::optional<RunOutput> Output(RunId id) const override;
  std::string_view Name() const override { return "slurm"; }
  bool Remote() const override { return true; }
  std::string DrainAdvice() const override;
  std::optional<Placement> Where(RunId id) const override;
  std::vector<ClusterNode> Cluster() override;
  // Removes the job's files under work_dir (its scripts and outputs), as their owner.
  void ForgetJob(int64_t job_id, const std::string& owner, uint32_t uid, uint32_t gid) override;

  const SlurmSettings& settings() const { return settings_; }

 private:
  struct Run;
  using RunPtr = std::shared_ptr<Run>;
  void Submit(const RunPtr& run);
  void PumpSubmits();
  void OnSubmitted(const RunPtr& run, RunResult tool);
  void Find(const RunPtr& run);  // an adopted run whose job id was not stored
  void SendCancel(const RunPtr& run);
  void ArmPoll();
  void Poll();
  void OnRows(std::vector<SlurmJobRow> rows, bool from_sacct);
  // Reads the ended run's files on the collector thread, then finishes it on the io thread.
  void Collect(const RunPtr& run, std::optional<Outcome> slurm_outcome, const std::string& why);
  // Passes what a running run wrote since the last poll to its on_output.
  void StreamOutput(const RunPtr& run);
  void Finish(const RunPtr& run, RunResult r);

  asio::any_io_executor ex_;
  SlurmSettings settings_;
  std::string tag_;
  std::vector<std::string> pin_env_;
  std::unique_ptr<SlurmTools> tools_;
  RunId next_id_ = 1;
  std::map<RunId, RunPtr> runs_;
  std::deque<RunPtr> to_submit_;
  int submitting_ = 0;
  asio::steady_timer poll_timer_;
  bool poll_armed_ = false, polling_ = false;
  asio::thread_pool collector_{1};
  std::shared_ptr<bool> alive_;
};

}  // namespace ckprof

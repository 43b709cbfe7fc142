// The process runner: starts profiler processes and reports, asynchronously, how each ended.
//
// ProcessRunner spawns an argv (never a shell) in a new process group with stdin from /dev/null,
// a deliberately built environment (inherited HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES,
// CUDA_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL removed, then RunSpec::set_env applied), optional
// uid/gid/groups and working directory. It streams stdout into a CkOutputParser, keeps a bounded
// head+tail capture of stdout and stderr, enforces a timeout (SIGTERM to the whole group, a
// grace period, SIGKILL), supports cancellation the same way, always reaps the child and leaves
// no process of its group behind. Many runs at once on one thread. No daemon logic here.
//
// Threading: construct, call and destroy a ProcessRunner on the thread that runs its executor's
// io_context (one thread). Callbacks run there too. Exits are observed with pidfds and
// waitpid(pid): the process must not set SIGCHLD to SIG_IGN nor reap with waitpid(-1).
#pragma once

#include <sys/types.h>

#include <asio/any_io_executor.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/ck_output.h"
#include "common/outcome.h"
#include "common/result.h"
#include "daemon/cgroup.h"
#include "daemon/process_util.h"
#include "daemon/run_result.h"
#include "daemon/spawn.h"  // BuildChildEnvironment

namespace ckprof {

struct RunSpec {
  std::vector<std::string> argv;  // argv[0]: the executable's path (absolute); never a shell
  std::vector<std::pair<std::string, std::string>> set_env;  // e.g. {"HIP_VISIBLE_DEVICES","3"}
  // The environment set_env is applied to (KEY=VALUE); unset: the daemon's own. Another user's
  // runs get UserEnvironment (spawn.h).
  std::optional<std::vector<std::string>> base_env;
  std::optional<uid_t> uid;                  // switch to this uid in the child; unset: keep ours
  std::optional<gid_t> gid;                  // switch to this gid; unset: keep ours
  std::optional<std::vector<gid_t>> groups;  // supplementary groups; unset: keep ours
  std::string cwd;                           // working directory; empty: inherit
  std::chrono::milliseconds timeout{0};      // 0 = no limit
  std::chrono::milliseconds grace{2000};     // SIGTERM -> SIGKILL
  // After the leader exits, how long to wait for EOF on stdout/stderr (a process that left the
  // group may hold the pipes) before closing them and finishing the run anyway.
  std::chrono::milliseconds drain{500};
  size_t capture_head = 16384, capture_tail = 16384;  // bytes kept per stream
  size_t top_k = 5;                                   // CkPerf::top size
  // The profiler's executable, open (read-only): executed instead of argv[0]'s path, so that
  // what runs is the file the daemon identified, whatever the path names meanwhile; -1 = the
  // path. It must stay open until on_done; the profiler inherits it (scripts need it).
  int exec_fd = -1;
  // How long the child may take from its clone to the profiler's exec (switching to the user,
  // changing directory); one that has not exec'd by then (stopped by its user, or a directory
  // that does not answer) is killed and the run ends kSpawnFailed saying so.
  std::chrono::milliseconds start_timeout{10000};
  // Called once the process exists (before on_done, on the io thread) with its pid, which is
  // also its process group id; not called when the spawn fails.
  std::function<void(pid_t)> on_started;
  // Called on the io thread with what the profiler writes, as it is read (`is_stderr`: from its
  // stderr), before on_done; may be empty.
  std::function<void(bool is_stderr, std::string_view data)> on_output;
  // For a launcher that submits to a cluster (SlurmLauncher): the job's name, its comment
  // (what it is; also how it is found again) and its files' path under the work dir, without
  // suffix ("alice/job-12/t45.a1"). Ignored by ProcessRunner.
  std::string name, comment, stem;
  // For a launcher that runs tasks in allocations (AllocationLauncher): what names this run of
  // the task across restarts (its task and attempt), so that a run is never started twice.
  int64_t run_key = 0;
};

// What a run has written so far: the bounded head+tail captures, as RunResult will hold them.
struct RunOutput {
  std::string stdout_text, stderr_text;
};

// Keeps the first `head` and the last `tail` bytes of a stream and counts the rest (a run's
// bounded captures).
class Capture {
 public:
  Capture(size_t head, size_t tail) : head_max_(head), tail_max_(tail) {}
  void Add(std::string_view d);
  uint64_t total() const { return total_; }
  // head + "\n[... N bytes omitted ...]\n" + tail
  std::string Text() const;

 private:
  size_t head_max_, tail_max_;
  std::string head_, tail_;
  uint64_t total_ = 0;
};

// Runs profiler processes; all methods and callbacks on the io_context's thread (one thread).
class ProcessRunner {
 public:
  using RunId = uint64_t;

  // `cgroups` (may be null: process groups alone) gives each run a cgroup of its own; it must
  // outlive the runner. `exec_helper`: ckprofd-exec (spawn.h), through which a run that
  // switches to another uid starts; "" = FindExecHelper(). A run that must switch uid fails
  // (kSpawnFailed) when there is none.
  explicit ProcessRunner(asio::any_io_executor ex, TaskCgroups* cgroups = nullptr,
                         std::string exec_helper = "");
  // Kills (SIGKILL) and reaps every run still going; their on_done is not called.
  ~ProcessRunner();
  ProcessRunner(const ProcessRunner&) = delete;
  ProcessRunner& operator=(const ProcessRunner&) = delete;

  // Prepares the run (pipes, environment) and hands the spawn to the runner's spawn thread:
  // clone(CLONE_VM | CLONE_VFORK), whatever the daemon's size, returns only once the child has
  // exec'd, which takes up to a millisecond on a busy machine, and the io thread goes on
  // meanwhile. RunSpec::on_started then gives the pid; on_done is called exactly once, on the
  // executor, never from inside Start (a spawn failure comes with kSpawnFailed). Cancel and
  // Interrupt work before the spawn is done too (the process is stopped as soon as it exists).
  RunId Start(RunSpec spec, std::function<void(RunResult)> on_done);
  // The run's pid (= process group id); -1 if not spawned yet, finished, or the spawn failed.
  pid_t RunningPid(RunId id) const;
  // What the run has written so far; nullopt when it is unknown or has been reported.
  std::optional<RunOutput> Output(RunId id) const;
  // Group SIGTERM, grace, SIGKILL; the outcome is kCancelled. False when the run is unknown,
  // already being stopped, or its process has already exited (on_done says how it ended).
  bool Cancel(RunId id);
  // Same as Cancel, outcome kInterrupted (daemon shutdown).
  bool Interrupt(RunId id);
  // Runs started and not yet reported through on_done.
  size_t running() const;

 private:
  struct Run;
  struct SpawnRequest;
  struct OutputPoll;
  friend class RunSteps;
  bool Stop(RunId id, Outcome::Kind kind);
  void Forget(RunId id) { runs_.erase(id); }
  void ArmOutputPoll();
  void PollOutput();  // reads the quiet pipes of every run (see OutPipe in runner.cpp)

  asio::any_io_executor ex_;
  TaskCgroups* cgroups_;
  std::string exec_helper_;
  RunId next_id_ = 1;
  std::unordered_map<RunId, std::shared_ptr<Run>> runs_;
  std::vector<char> read_buf_;            // what a run's handler reads its pipe into (one thread)
  std::shared_ptr<OutputPoll> poll_;      // its timer
  std::unique_ptr<SpawnThread> spawner_;  // clones; stopped first in the destructor
};

}  // namespace ckprof

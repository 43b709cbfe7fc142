// DaemonConfig: every setting of ckprofd, read from the JSON config file and then overridden
// by command-line flags. Each flag is also a key of the file (config/ckprofd.json documents
// them). Plain value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/gpu_list.h"
#include "common/result.h"
#include "daemon/executor.h"

namespace ckprof {

struct DaemonConfig {
  std::string config_file;  // where it was read from ("" = none)
  std::string socket = "/run/ckprofd/ckprofd.sock";
  std::string socket_group;  // group owning the socket ("" = daemon's)
  uint32_t socket_mode = 0660;
  std::string state_dir = "/var/lib/ckprofd";
  // Host-wide per-GPU lock files, shared by every ckprofd of the host ("" = no host locks).
  std::string lock_dir = "/run/lock/ckprofd";
  std::string gpus = "auto";  // "auto", "0,1,2,3", "0-7"
  std::string profiler_path;  // default when a job names none
  std::vector<std::string> pin_env = {"HIP_VISIBLE_DEVICES"};
  double timeout_s = 1800;  // default per-task timeout; 0 = none
  double kill_grace_s = 5;  // SIGTERM -> SIGKILL
  // A profiler that has not started (exec'd) this many seconds after its spawn is killed.
  double start_timeout_s = 10;
  // Variables of ckprofd's own environment that other users' profilers and job-end commands
  // get (a trailing * matches a prefix: "ROCM_*"); they get a clean environment otherwise.
  std::vector<std::string> pass_env;
  std::string log_level = "info";
  std::string admin_group;                          // members may act on any job ("" = root only)
  std::vector<std::string> allowed_profiler_roots;  // non-root daemon: other users' profilers
  double fair_share_half_life_s = 3600;             // decay of recorded GPU time
  int max_attempts = 3;                             // automatic requeues after interruption
  int health_failures = 3;         // device errors in a row that drain a GPU (0 = never)
  double noise_threshold = 0.05;   // a repeated config whose runs' CV is above it is noisy
  double keep_finished_days = 0;   // ended jobs older than this are removed; 0 = kept
  double reuse_max_age_days = 30;  // reuse successes at most this old; 0 = never reuse
  bool share_results = true;       // reuse and `best` across users (false: own only)
  std::string on_job_end;          // a shell command run (as ckprofd) when a job ends
  // The host's mail submission program (submit --mail); "" = no mail.
  std::string sendmail = "/usr/sbin/sendmail";
  double on_end_timeout_s = 60;  // a job-end command running longer is stopped
  // One protocol frame. A submit carries its input as base64 of the gzip (4/3 of the .gz
  // file): 64 MiB fits a 48 MB gzipped trace.
  uint64_t max_frame_bytes = 64u << 20;
  double client_timeout_s = 30;  // hello and each frame must arrive within this
  int max_clients = 512;         // connections at once, everyone's
  // Of max_clients, the last this many (at most half) only admins may take: users who fill the
  // rest cannot lock the admin out.
  int admin_reserved_clients = 16;
  int max_connections_per_user = 64;  // one user's connections at once (admins: max_clients)
  int max_streams_per_user = 32;      // one user's watch, wait and log -f streams at once
  // Request bytes in flight: bytes read of frames not yet answered (a submit's while it
  // converts), everyone's and one user's. A frame that would go over is refused as it arrives.
  uint64_t max_request_bytes = 512u << 20;
  uint64_t max_request_bytes_per_user = 128u << 20;
  bool full_sync = false;        // fsync every task transition, not only submits
  size_t capture_bytes = 16384;  // head and tail kept of each output stream
  // Processes that are none of ours on a GPU: "wait" (it takes no task while one is there),
  // "flag" (run, and mark the results contended) or "ignore" (do not look).
  std::string foreign_gpu_use = "wait";
  double foreign_poll_ms = 500;           // how often the GPUs are looked at while tasks run
  std::string sysfs_root = "/";           // prefixes every sysfs path (KFD topology and proc, drm)
  std::string nvidia_smi = "nvidia-smi";  // the NVIDIA probe, with CUDA_VISIBLE_DEVICES pins
  // Each profiler in a cgroup of its own (killed whole; its CPU time and peak memory read);
  // false = process groups alone. Falls back to them where cgroups cannot be written.
  bool task_cgroups = true;
  uint64_t task_memory_max = 0;  // bytes a profiler may use (memory controller); 0 = no limit
  // Where tasks run: "local" (this host's GPUs, `gpus`) or a remote executor (daemon/executor.h).
  ExecutorConfig executor;

  // Per-user limits: what a plain user may ask for and hold (admins are exempt from all but
  // max_gpus_per_user, which is the GPU sharing itself). See UserLimitsError below.
  // The longest per-task timeout a plain user may ask for (submit, run, edit, retry
  // --timeout); -1 = the `timeout`; 0 = no ceiling (users may then ask for no limit, 0, too).
  double max_timeout_s = -1;
  // The longest whole-job time limit (submit --job-timeout) a plain user may ask for, and the
  // one a job that names none gets (admins' too); 0 = none.
  double max_job_timeout_s = 0;
  int64_t max_queued_runs_per_user = 1'000'000;  // runs not ended over a user's jobs; 0 = any
  int64_t max_jobs_per_user = 1000;              // jobs not ended; 0 = any
  int max_gpus_per_user = 0;                     // a user's tasks running at once; 0 = any
};

// The ceiling of a plain user's --timeout: max_timeout, else the timeout (0 = none).
double MaxUserTimeout(const DaemonConfig& c);
// "" when the limits agree with each other, else what is wrong: a `timeout` of none or above
// a max_timeout would give jobs that name no --timeout more than a user may ask for.
std::string UserLimitsError(const DaemonConfig& c);

// Reads a config file (JSON, '//' comment lines allowed) on top of `base`.
// Errors name the file, the key and what is wrong.
Result<DaemonConfig> LoadDaemonConfigFile(const std::string& path, DaemonConfig base);

}  // namespace ckprof

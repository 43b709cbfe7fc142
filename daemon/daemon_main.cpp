#include "daemon/daemon_main.h"

#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asio.hpp>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/profiler_path.h"
#include "common/version.h"
#include "daemon/cgroup.h"
#include "daemon/daemon_config.h"
#include "daemon/executor.h"
#include "daemon/file_lock.h"
#include "daemon/gpu_probe.h"
#include "daemon/gpu_watch.h"
#include "daemon/heap_trim.h"
#include "daemon/launcher.h"
#include "daemon/scheduler.h"
#include "daemon/server.h"
#include "daemon/service.h"
#include "daemon/spawn.h"
#include "daemon/state_guard.h"
#include "daemon/store.h"
#include "daemon/systemd_notify.h"
#include "daemon/user_names.h"

namespace ckprof {
namespace {

// The exit status when the state dir's files were removed or replaced under the daemon
// (systemd/ckprofd.service does not restart it then: someone should look first).
constexpr int kExitStateLost = 3;
// How often the state dir's files are looked at besides each submit; tests may set another
// interval with CKPROFD_STATE_CHECK_S (seconds).
constexpr double kStateCheckIntervalS = 2;

std::chrono::milliseconds StateCheckInterval() {
  double s = kStateCheckIntervalS;
  if (const char* env = std::getenv("CKPROFD_STATE_CHECK_S"); env && *env) {
    char* end = nullptr;
    double v = std::strtod(env, &end);
    if (*end == '\0' && v > 0 && v < 1e6) s = v;
  }
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

constexpr const char* kHelp = R"(usage: ckprofd [options]

ckprofd is the ckprof queue daemon of a shared GPU server. Users submit conversion-plus-run jobs
with `ckprof submit`; ckprofd converts them, queues their CK profiler runs per GPU, runs one
profiler per GPU at a time (pinned with HIP_VISIBLE_DEVICES), shares the GPUs fairly between
users, and keeps every job and result in SQLite so that a crash or restart loses nothing.
It stays in the foreground and logs to stderr. With the config key "executor" set to
{"kind": "slurm", ...} it runs each task as a Slurm job instead, on the GPUs Slurm grants (see
config/ckprofd.json and the README's "Running on a Slurm cluster").

options (each is also a key of the JSON config file; flags override the file):
  --config FILE            JSON config file (see config/ckprofd.json for every key)
  --socket PATH            Unix socket to listen on (default /run/ckprofd/ckprofd.sock); its
                           directory must exist
  --socket-group GROUP     group that owns the socket, so that its members may submit (default:
                           ckprofd's own group); see the README's "A shared server"
  --socket-mode MODE       the socket's mode, octal (default 0660: its owner and group; 0666
                           lets every local user in)
  --state-dir DIR          where the SQLite database lives (default /var/lib/ckprofd); one
                           ckprofd per state dir (a second one exits: "state dir in use")
  --lock-dir DIR           per-GPU lock files shared by every ckprofd of the host, so that
                           two daemons never drive one GPU at once (default /run/lock/ckprofd;
                           "" = no host locks)
  --gpus LIST|auto         GPUs to drive: "0,1,2,3", "0-7" or "auto" (default auto: AMD GPUs
                           from the KFD topology, else NVIDIA GPUs)
  --profiler-path PATH     default CK profiler for jobs that name none: ckProfiler, or a
                           directory holding it or the profile_grouped_conv_* executables
  --pin-env VAR[,VAR...]   variables set to the task's GPU index (default HIP_VISIBLE_DEVICES;
                           CUDA_VISIBLE_DEVICES on NVIDIA)
  --timeout SECONDS        default per-task time limit; 0 = none (default 1800). A plain
                           user's submit/edit/retry --timeout may not exceed max_timeout
                           (config key; default: this timeout) nor ask for none (0); admins may
                           ask for any
  --pass-env VAR[,VAR...]  variables of ckprofd's environment that other users' profilers and
                           --on-end commands get ("ROCM_*": a prefix); they get a clean one:
                           their HOME, USER, LOGNAME, SHELL, a standard PATH, LANG, the pin
                           variables (default: none passed)
  --log-level LEVEL        trace, debug, info, warn, error (default info; also SPDLOG_LEVEL)
  -h, --help               show this help
  --version                print the version

signals: SIGTERM/SIGINT stop gracefully (running tasks are interrupted and requeued on the next
start); SIGHUP re-reads the config file (log level, timeouts, policy; not GPUs or socket), and
the flags given still override it.

exit status: 0 after SIGTERM/SIGINT, 1 when it cannot start, 3 when its database or lock file
was removed or replaced under it: it stops at once rather than acknowledge submits that would
be lost, and saves what it held of a removed database as ckprofd.db.rescued-TIME in the state
dir (move it back to carry on); systemd's unit does not restart it then: find what removed
the file first.

example:
  ckprofd --socket /tmp/ckprofd.sock --state-dir /tmp/ckprofd-state --gpus 0-7 \
          --profiler-path /opt/rocm/bin/ckProfiler
)";

// The command line's settings; each overrides its key of the config file, at start and at
// every SIGHUP's re-read. Empty = not given.
struct Flags {
  std::string config, socket, state_dir, gpus, profiler_path, pin_env, timeout, log_level;
  std::string socket_group, socket_mode, pass_env;
  std::optional<std::string> lock_dir;  // "" is a value: no host locks
};

// Applies the flags over `c` (a config file's values, or the defaults) and checks the result.
Result<DaemonConfig> ApplyFlags(const Flags& f, DaemonConfig c) {
  if (!f.socket.empty()) c.socket = f.socket;
  if (!f.socket_group.empty()) c.socket_group = f.socket_group;
  if (!f.socket_mode.empty()) {
    unsigned mode = 0;
    auto [end, ec] =
        std::from_chars(f.socket_mode.data(), f.socket_mode.data() + f.socket_mode.size(), mode, 8);
    if (ec != std::errc() || end != f.socket_mode.data() + f.socket_mode.size() || mode > 07777) {
      return MakeError("--socket-mode must be an octal mode such as 0660, got '" + f.socket_mode +
                       "'");
    }
    c.socket_mode = mode;
  }
  if (!f.state_dir.empty()) c.state_dir = f.state_dir;
  if (f.lock_dir) c.lock_dir = *f.lock_dir;
  if (!f.gpus.empty()) c.gpus = f.gpus;
  // (Made absolute once, where ckprofd starts: see DaemonMain.)
  if (!f.profiler_path.empty()) c.profiler_path = f.profiler_path;
  if (!f.pin_env.empty()) {
    c.pin_env.clear();
    std::stringstream ss(f.pin_env);
    std::string var;
    while (std::getline(ss, var, ',')) {
      if (!var.empty()) c.pin_env.push_back(var);
    }
  }
  if (!f.timeout.empty()) {
    char* end = nullptr;
    double t = std::strtod(f.timeout.c_str(), &end);
    if (*end != '\0' || t < 0) return MakeError("--timeout must be a number of seconds >= 0");
    c.timeout_s = t;
  }
  if (!f.log_level.empty()) c.log_level = f.log_level;
  if (!f.pass_env.empty()) {
    c.pass_env.clear();
    std::stringstream ss(f.pass_env);
    std::string var;
    while (std::getline(ss, var, ',')) {
      if (!var.empty()) c.pass_env.push_back(var);
    }
  }
  if (std::string e = UserLimitsError(c); !e.empty()) return MakeError(e);
  for (const auto& var : c.pin_env) {
    if (var.empty() || var.find('=') != std::string::npos) {
      return MakeError("pin variable '" + var + "' is not a valid environment variable name");
    }
  }
  if (c.state_dir.empty()) return MakeError("state_dir must not be empty");
  auto absolute = [](const std::string& p) {
    if (p[0] == '/') return p;
    std::error_code ec;
    auto abs = std::filesystem::absolute(p, ec);
    return ec ? p : abs.lexically_normal().string();
  };
  c.state_dir = absolute(c.state_dir);
  if (!c.lock_dir.empty()) c.lock_dir = absolute(c.lock_dir);
  return c;
}

// The config file's values (when there is one), the flags over them.
Result<DaemonConfig> BuildConfig(const Flags& f) {
  DaemonConfig c;
  if (!f.config.empty()) {
    auto loaded = LoadDaemonConfigFile(f.config, c);
    if (!loaded) return Error{loaded.error()};
    c = *loaded;
  }
  return ApplyFlags(f, std::move(c));
}

SchedulerOptions SchedulerOptionsFrom(const DaemonConfig& c, std::vector<int> gpus) {
  SchedulerOptions o;
  o.gpus = std::move(gpus);
  o.pin_env = c.pin_env;
  o.default_timeout_s = c.timeout_s;
  o.grace_s = c.kill_grace_s;
  o.start_timeout_s = c.start_timeout_s;
  o.pass_env = c.pass_env;
  o.half_life_s = c.fair_share_half_life_s;
  o.max_attempts = c.max_attempts;
  o.health_failures = c.health_failures;
  o.reuse_max_age_s = c.reuse_max_age_days * 86400;
  o.share_results = c.share_results;
  o.run_as_owner = getuid() == 0;
  o.on_job_end = c.on_job_end;
  o.sendmail = c.sendmail;
  o.on_end_timeout_s = c.on_end_timeout_s;
  o.capture_bytes = c.capture_bytes;
  o.state_dir = c.state_dir;
  o.lock_dir = c.lock_dir;
  o.admin_profiler_path = c.profiler_path;
  o.foreign_gpu_use = c.foreign_gpu_use == "flag"     ? ForeignGpuUse::kFlag
                      : c.foreign_gpu_use == "ignore" ? ForeignGpuUse::kIgnore
                                                      : ForeignGpuUse::kWait;
  o.foreign_poll_s = c.foreign_poll_ms / 1000;
  o.max_gpus_per_user = c.max_gpus_per_user;
  if (c.executor.RemoteSlots() > 0) {
    // A remote executor allocates, pins and shares the GPUs: no host locks, no per-slot health
    // (the Scheduler's slot board has neither).
    o.lock_dir.clear();
    o.health_failures = 0;
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    o.remote_tag = std::string(host) + ":" + c.state_dir;
  }
  return o;
}

Status ApplyLogLevel(const std::string& level) {
  auto l = spdlog::level::from_str(level);
  if (l == spdlog::level::off && level != "off") {
    return MakeError("log level '" + level + "' is not one of trace, debug, info, warn, error");
  }
  spdlog::set_level(l);
  return Status::Ok();
}

// The state dir's locks, held for the daemon's life: a second ckprofd on the same state dir
// would take the first one's running tasks for a crash's leftovers and kill them. The lock file
// says who holds it; the lock on the directory itself holds when the file was removed.
struct StateDirLock {
  FileLock file;
  std::optional<FileLock> dir;  // none where the filesystem cannot lock directories
};

Result<StateDirLock> LockStateDir(const std::string& state_dir) {
  if (Status s = PrepareStateDir(state_dir); !s) return Error{s.error()};
  const std::string lock_path = state_dir + "/ckprofd.lock";
  LockAttempt a = FileLock::TryAcquire(lock_path, 0644);
  // A daemon killed a moment ago may have left a child between its clone and its exec, which
  // holds the lock until the exec closes it (the kernel's lock table then names the dead
  // daemon, or nobody): wait a little for such a one.
  auto holder_gone = [](const LockAttempt& l) {
    return l.busy && (l.holder.pid <= 0 || (kill(l.holder.pid, 0) != 0 && errno == ESRCH));
  };
  for (int i = 0; i < 100 && holder_gone(a); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    a = FileLock::TryAcquire(lock_path, 0644);
  }
  if (a.busy) {
    return MakeError("state dir " + state_dir + " in use by " + a.holder.Describe() +
                     ": one ckprofd per state dir (stop it first, or choose another --state-dir)");
  }
  if (!a.lock) return MakeError("state dir " + state_dir + ": " + a.error);
  StateDirLock held{std::move(*a.lock), std::nullopt};
  LockAttempt d = FileLock::TryAcquireDirectory(state_dir);
  for (int i = 0; i < 100 && holder_gone(d); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    d = FileLock::TryAcquireDirectory(state_dir);
  }
  if (d.busy) {
    return MakeError("state dir " + state_dir + " in use by another ckprofd, whose lock file " +
                     lock_path +
                     " was removed or replaced while it runs (it stops once it notices, within "
                     "seconds): one ckprofd per state dir");
  }
  if (d.lock) {
    held.dir = std::move(*d.lock);
  } else {
    spdlog::warn("state dir {}: {}; only its lock file keeps a second ckprofd out", state_dir,
                 d.error);
  }
  return held;
}

// Who may connect to the socket at `path`, as its owner, group and mode (and its directory's)
// say: "socket /run/ckprofd/ckprofd.sock: owner root, group lab, mode 0660: members of group
// lab may connect (directory /run/ckprofd: owner root, group root, mode 0755)".
std::string DescribeSocketAccess(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return "socket " + path + ": cannot be examined: " + std::strerror(errno);
  }
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  const std::string group = GroupNameOf(st.st_gid);
  std::string who = (st.st_mode & S_IWOTH) ? "every local user may connect"
                    : (st.st_mode & S_IWGRP)
                        ? "members of group " + group + " may connect"
                        : "only " + UserNameOf(st.st_uid) + " (and root) may connect";
  std::string text = "socket " + path + ": owner " + UserNameOf(st.st_uid) + ", group " + group +
                     ", mode " + mode + ": " + who;
  const std::string dir = std::filesystem::path(path).parent_path().string();
  if (struct stat d{}; !dir.empty() && stat(dir.c_str(), &d) == 0) {
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(d.st_mode & 07777));
    text += " (directory " + dir + ": owner " + UserNameOf(d.st_uid) + ", group " +
            GroupNameOf(d.st_gid) + ", mode " + mode + ")";
  }
  return text;
}

// A database removed or replaced under the daemon: what it still holds of it (every job and
// result, the interrupted tasks requeued, the ids given) is saved beside it, so that nothing
// is lost unless someone wants it lost.
void RescueDatabase(Store& store) {
  char stamp[32] = "";
  const time_t now = time(nullptr);
  struct tm local {};
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime_r(&now, &local));
  const std::string to = store.path() + ".rescued-" + stamp;
  if (Status s = store.SaveCopy(to); !s) {
    spdlog::error("{}", s.error());
    return;
  }
  spdlog::error(
      "the database as this ckprofd had it (jobs, results, the ids given) is saved as {}: to "
      "carry on from it, once whatever removed {} is stopped, move it there (mv {} {}) and start "
      "ckprofd",
      to, store.path(), to, store.path());
}

// A default profiler that is not there fails every job that relies on it: say so at start.
void WarnAboutProfiler(const DaemonConfig& config) {
  if (config.profiler_path.empty()) {
    spdlog::info("no default profiler_path: every job must name its profiler");
  } else if (auto target = ResolveProfiler(config.profiler_path); !target) {
    spdlog::warn(
        "the default profiler_path does not resolve: {}; jobs that name no profiler "
        "are refused until it does",
        target.error());
  }
}

// The GPUs the daemon drives: a remote executor's slots (one per task handed to it at once;
// its GPUs are its own, so no host locks: `config.lock_dir` is cleared), the ones named, or
// those found (--gpus auto). An error says why there are none.
Result<std::vector<int>> ChooseGpus(DaemonConfig& config) {
  std::vector<int> gpus;
  if (const int slots = config.executor.RemoteSlots(); slots > 0) {
    for (int i = 0; i < slots; ++i) gpus.push_back(i);
    config.lock_dir.clear();
    return gpus;
  }
  if (config.gpus == "auto") {
    std::string note;
    gpus = DetectGpus(&note, config.sysfs_root);
    spdlog::info("--gpus auto: {}", note);
    if (gpus.empty()) {
      return MakeError("no GPU to drive: pass --gpus LIST (e.g. --gpus 0-7) to name them");
    }
    return gpus;
  }
  return ParseGpuList(config.gpus);
}

// What this host must offer to run local tasks: the host locks' directory (or a warning that
// there is none) and, for a root daemon, ckprofd-exec. Nothing for a remote executor.
Status PrepareHost(const DaemonConfig& config, bool remote) {
  if (remote) return Status::Ok();  // (no host GPU locks: the executor allocates the GPUs)
  if (!config.lock_dir.empty()) {
    if (Status s = PrepareLockDir(config.lock_dir); !s) {
      return MakeError(s.error() +
                       " (set lock_dir/--lock-dir to a directory every ckprofd of this host can "
                       "write, or to \"\" to run without host GPU locks)");
    }
  } else {
    spdlog::warn("lock_dir is \"\": no host GPU locks; another ckprofd may drive these GPUs too");
  }
  return Status::Ok();
}

// A root daemon starts other users' profilers through ckprofd-exec (daemon/spawn.h).
Status CheckExecHelper(bool remote) {
  if (remote || geteuid() != 0 || !FindExecHelper().empty()) return Status::Ok();
  return MakeError(
      "ckprofd-exec, the helper that starts profilers as their users, is not beside ckprofd "
      "nor in ../libexec/ckprof/ (install ckprofd whole)");
}

// The state dir's files the daemon stops for when they are removed or replaced: the database,
// its log, and the state dir's lock file.
Status WatchStateFiles(StateGuard& guard, const Store& store, const StateDirLock& state_lock) {
  const std::string lost = "stopping so that nothing is acknowledged that would be lost";
  Status s = guard.Watch(store.path(), -1, lost);
  // (The log exists while the database is open in WAL mode.)
  if (s && access((store.path() + "-wal").c_str(), F_OK) == 0) {
    s = guard.Watch(store.path() + "-wal", -1, lost);
  }
  if (s) {
    s = guard.Watch(state_lock.file.path(), state_lock.file.fd(),
                    "stopping, since a second ckprofd could take this state dir now and stop "
                    "this one's profilers");
  }
  return s;
}

// Each profiler in a cgroup of its own where cgroups can be written (task_cgroups); null, and
// said in the log, where they cannot.
std::unique_ptr<TaskCgroups> OpenCgroups(const DaemonConfig& config) {
  if (!config.task_cgroups) return nullptr;
  std::string note;
  auto opened = TaskCgroups::Open(config.task_memory_max, &note);
  if (!opened) {
    spdlog::warn(
        "containment: process groups only ({}); a profiler that leaves its process "
        "group is not stopped with it, and its CPU time and memory are its own only",
        opened.error());
    return nullptr;
  }
  spdlog::info("containment: {}", note);
  return std::move(*opened);
}

// The GPUs watched from outside (foreign processes and each task's GPU state), for a local
// executor where a probe sees them; null otherwise. Attached to the scheduler.
std::unique_ptr<GpuWatch> StartGpuWatch(asio::io_context& io, const DaemonConfig& config,
                                        Scheduler& scheduler, const TaskCgroups* cgroups) {
  if (scheduler.remote()) return nullptr;
  std::string note;
  auto probe = MakeGpuProbe(config.sysfs_root, config.pin_env, config.nvidia_smi,
                            cgroups ? cgroups->runs_path() : "", &note);
  spdlog::info("GPU watch: {}{}", note,
               probe && config.foreign_gpu_use != "ignore"
                   ? ", foreign processes: " + config.foreign_gpu_use
                   : "");
  if (!probe) return nullptr;
  auto watch = std::make_unique<GpuWatch>(
      io.get_executor(), std::move(probe),
      std::chrono::milliseconds(static_cast<int64_t>(config.foreign_poll_ms)),
      [&scheduler](GpuSnapshot s) { scheduler.OnGpuSnapshot(std::move(s)); });
  scheduler.AttachGpuWatch(watch.get());
  return watch;
}

// SIGHUP's reload policy: the config file read again, the flags over it as at start, and what
// is fixed for the daemon's life kept from `current` (the socket, state dir, GPUs and their
// locks, the executor, whose runs are in flight, and containment, set up once).
Result<DaemonConfig> ReloadConfig(const Flags& flags, const DaemonConfig& current) {
  Result<DaemonConfig> reloaded = Error{"unreadable"};
  try {  // a second line of defence: a reload must never end the daemon
    reloaded = LoadDaemonConfigFile(current.config_file, DaemonConfig{});
    if (reloaded) reloaded = ApplyFlags(flags, std::move(*reloaded));
  } catch (const std::exception& e) {
    reloaded = Error{current.config_file + ": " + e.what()};
  }
  if (!reloaded) return reloaded;
  DaemonConfig next = std::move(*reloaded);
  next.socket = current.socket;
  next.state_dir = current.state_dir;
  next.gpus = current.gpus;
  next.lock_dir = current.lock_dir;
  next.executor = current.executor;
  next.task_cgroups = current.task_cgroups;
  next.task_memory_max = current.task_memory_max;
  return next;
}

// What systemd is told while the daemon runs (when it listens): READY with the first status,
// then STATUS= lines as the counts change (at most two a second: every task's start and end
// changes them, and a datagram to systemd per change, hundreds a second, loads both it and
// us), and WATCHDOG= pings when the unit asks for them. Io thread only.
class SystemdReporter {
 public:
  SystemdReporter(asio::io_context& io, Scheduler& scheduler, size_t gpus)
      : scheduler_(scheduler), gpus_(gpus), status_timer_(io), watchdog_(io) {}

  void Start() {
    last_status_ = StatusLine();
    SystemdNotify("READY=1\n" + last_status_);
    if (auto every = SystemdWatchdogInterval(); every.count() > 0) Pet(every);
  }
  // The counts may have changed.
  void Changed() {
    if (status_due_ || !SystemdNotifyEnabled()) return;
    status_due_ = true;
    status_timer_.expires_after(std::chrono::milliseconds(500));
    status_timer_.async_wait([this](const asio::error_code& ec) {
      status_due_ = false;
      if (ec) return;
      if (std::string line = StatusLine(); line != last_status_) {
        SystemdNotify(line);
        last_status_ = std::move(line);
      }
    });
  }
  void Stop() {
    watchdog_.cancel();
    status_timer_.cancel();
  }

 private:
  std::string StatusLine() const {
    return "STATUS=" + std::to_string(scheduler_.running_count()) + " running, " +
           std::to_string(scheduler_.queued_count()) + " queued on " + std::to_string(gpus_) +
           " GPU(s)";
  }
  void Pet(std::chrono::microseconds every) {
    SystemdNotify("WATCHDOG=1");
    watchdog_.expires_after(every);
    watchdog_.async_wait([this, every](const asio::error_code& ec) {
      if (!ec) Pet(every);
    });
  }

  Scheduler& scheduler_;
  size_t gpus_;
  asio::steady_timer status_timer_, watchdog_;
  std::string last_status_;
  bool status_due_ = false;
};

// The GPUs for the start's log line: "0,1,2" or "from slurm (64 slots)".
std::string DescribeGpus(const std::vector<int>& gpus, const Launcher& launcher) {
  if (launcher.Remote()) {
    return "from " + std::string(launcher.Name()) + " (" + std::to_string(gpus.size()) + " slots)";
  }
  std::string list;
  for (int g : gpus) list += (list.empty() ? "" : ",") + std::to_string(g);
  return list;
}

int Run(const Flags& flags, DaemonConfig config) {
  if (Status s = ApplyLogLevel(config.log_level); !s) {
    spdlog::error("{}", s.error());
    return 1;
  }
  auto apply_env_level = [] {
    if (const char* env = std::getenv("SPDLOG_LEVEL"); env && *env) (void)ApplyLogLevel(env);
  };
  apply_env_level();

  auto chosen = ChooseGpus(config);
  if (!chosen) {
    spdlog::error("{}", chosen.error());
    return 1;
  }
  const std::vector<int> gpus = std::move(*chosen);
  const bool remote = config.executor.RemoteSlots() > 0;

  // What can be checked is checked before the database is touched.
  if (Status s = Server::CheckSocketPath(config); !s) {
    spdlog::error("cannot start: {}", s.error());
    return 1;
  }
  auto state_lock = LockStateDir(config.state_dir);
  if (!state_lock) {
    spdlog::error("cannot start: {}", state_lock.error());
    return 1;
  }
  if (Status s = PrepareHost(config, remote); !s) {
    spdlog::error("cannot start: {}", s.error());
    return 1;
  }
  WarnAboutProfiler(config);
  if (Status s = CheckExecHelper(remote); !s) {
    spdlog::error("cannot start: {}", s.error());
    return 1;
  }

  auto store = Store::Open(config.state_dir, config.full_sync);
  if (!store) {
    spdlog::error("cannot start: {}", store.error());
    return 1;
  }
  StateGuard guard(config.state_dir);
  if (Status s = WatchStateFiles(guard, **store, *state_lock); !s) {
    spdlog::error("cannot start: {}", s.error());
    return 1;
  }

  asio::io_context io(1);
  asio::thread_pool pool(2);
  std::unique_ptr<TaskCgroups> cgroups = OpenCgroups(config);
  auto made =
      MakeLauncher(config.executor,
                   LauncherContext{io.get_executor(), cgroups.get(),
                                   SchedulerOptionsFrom(config, gpus).remote_tag, config.pin_env});
  if (!made) {
    spdlog::error("cannot start: {}", made.error());
    return 1;
  }
  std::unique_ptr<Launcher> launcher = std::move(*made);
  Scheduler scheduler(io.get_executor(), **store, *launcher, SchedulerOptionsFrom(config, gpus));
  std::unique_ptr<GpuWatch> watch = StartGpuWatch(io, config, scheduler, cgroups.get());
  Service service(io.get_executor(), pool, scheduler, config);
  Server server(io, service, config);

  // Signals first, so that a SIGTERM during recovery is not lost.
  asio::signal_set stop_signals(io, SIGTERM, SIGINT);
  asio::signal_set hup(io, SIGHUP);
  signal(SIGPIPE, SIG_IGN);

  if (Status s = scheduler.Recover(); !s) {
    spdlog::error("cannot start: {}", s.error());
    return 1;
  }
  service.IdentifyRecoveredProfilers();
  if (Status s = server.Listen(); !s) {
    spdlog::error("cannot start: {}", s.error());
    return 1;
  }
  std::string pins;
  for (const auto& v : config.pin_env) pins += (pins.empty() ? "" : ",") + v;
  spdlog::info("ckprofd {} listening on {} (uid {}), GPUs {}, pin {}, state {}", kVersion,
               server.path(), getuid(), DescribeGpus(gpus, *launcher), pins, (*store)->path());
  spdlog::info("{}", DescribeSocketAccess(config.socket));
  server.Start();

  // keep_finished_days: ended jobs older than that are removed, at start and every hour.
  asio::steady_timer expiry_timer(io);
  std::function<void()> expire = [&] {
    if (config.keep_finished_days > 0) {
      auto removed = scheduler.ExpireEndedBefore(UnixNow() - config.keep_finished_days * 86400);
      if (!removed) spdlog::error("keep_finished_days: {}", removed.error());
    }
    expiry_timer.expires_after(std::chrono::hours(1));
    expiry_timer.async_wait([&](const asio::error_code& ec) {
      if (!ec) expire();
    });
  };
  expire();

  SystemdReporter systemd(io, scheduler, gpus.size());
  systemd.Start();
  scheduler.on_change = [&] { systemd.Changed(); };

  int exit_code = 0;
  bool stopping = false;
  bool rescue_db = false;  // the database went: save what the daemon still holds of it
  asio::steady_timer state_timer(io);
  auto stop = [&] {
    stopping = true;
    SystemdNotify("STOPPING=1");
    server.Stop();
    hup.cancel();
    stop_signals.cancel();
    state_timer.cancel();
    scheduler.Shutdown([&] {
      systemd.Stop();
      expiry_timer.cancel();
      if (rescue_db) RescueDatabase(**store);
      if (exit_code == 0) {
        spdlog::info("stopped: state committed to {}", (*store)->path());
      } else {
        spdlog::error("stopped (exit {})", exit_code);
      }
      io.stop();
    });
  };
  stop_signals.async_wait([&](const asio::error_code& ec, int sig) {
    if (ec || stopping) return;
    spdlog::info("{}: stopping (running tasks are interrupted and requeued for the next start)",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT");
    stop();
  });
  // The state dir's files, checked before each submit is acknowledged and every few seconds:
  // a daemon whose database or lock file is gone stops (exit 3; systemd does not restart it).
  // Its running profilers are stopped with it: their jobs' records went with the database
  // (or, when only the lock went, are requeued at the next start).
  auto state_lost = [&](const Status& s, const std::string& lost) {
    if (stopping) return;
    rescue_db = lost != state_lock->file.path();
    spdlog::error("{}", s.error());
    spdlog::error(
        "stopping: running profilers are stopped, nothing more is acknowledged; find what "
        "removed the file before starting ckprofd again");
    SystemdNotify("STATUS=stopped: " + s.error());
    exit_code = kExitStateLost;
    stop();
  };
  service.check_state = [&]() -> Status {
    std::string lost;
    Status s = guard.Check(&lost);
    if (!s) asio::post(io, [&, s, lost] { state_lost(s, lost); });
    return s;
  };
  const auto check_every = StateCheckInterval();
  std::function<void()> check_state_files = [&] {
    std::string lost;
    if (Status s = guard.Check(&lost); !s) return state_lost(s, lost);
    state_timer.expires_after(check_every);
    state_timer.async_wait([&](const asio::error_code& ec) {
      if (!ec) check_state_files();
    });
  };
  check_state_files();
  std::function<void()> wait_hup = [&] {
    hup.async_wait([&](const asio::error_code& ec, int) {
      if (ec || stopping) return;
      if (config.config_file.empty()) {
        spdlog::info("SIGHUP: no config file to re-read");
      } else {
        Result<DaemonConfig> reloaded = ReloadConfig(flags, config);
        if (!reloaded) {
          spdlog::error("SIGHUP: keeping the current config: {}", reloaded.error());
        } else {
          const DaemonConfig& next = *reloaded;
          if (Status s = ApplyLogLevel(next.log_level); !s) spdlog::error("SIGHUP: {}", s.error());
          apply_env_level();
          config = next;
          scheduler.UpdateOptions(SchedulerOptionsFrom(config, gpus));
          service.set_config(config);
          server.set_config(config);
          spdlog::info("SIGHUP: re-read {}", config.config_file);
        }
      }
      wait_hup();
    });
  };
  wait_hup();

  io.run();
  pool.join();
  return exit_code;
}

}  // namespace

int DaemonMain(int argc, char** argv) {
  ConfigureHeap();
  auto logger = spdlog::stderr_color_mt("ckprofd");
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);

  Flags f;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i], value;
    if (a == "-h" || a == "--help") {
      std::cout << kHelp;
      return 0;
    }
    if (a == "--version") {
      std::cout << "ckprofd " << kVersion << "\n";
      return 0;
    }
    bool has_value = false;
    if (auto eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    struct {
      const char* name;
      std::string* target;
    } options[] = {{"--config", &f.config},
                   {"--socket", &f.socket},
                   {"--state-dir", &f.state_dir},
                   {"--gpus", &f.gpus},
                   {"--profiler-path", &f.profiler_path},
                   {"--pin-env", &f.pin_env},
                   {"--timeout", &f.timeout},
                   {"--log-level", &f.log_level},
                   {"--pass-env", &f.pass_env},
                   {"--socket-group", &f.socket_group},
                   {"--socket-mode", &f.socket_mode},
                   {"--lock-dir", nullptr}};
    bool matched = false;
    for (auto& o : options) {
      if (a != o.name) continue;
      matched = true;
      if (!has_value) {
        if (i + 1 >= args.size()) {
          std::cerr << "ckprofd: option " << a << " needs a value (see 'ckprofd --help')\n";
          return 2;
        }
        value = args[++i];
      }
      if (o.target) {
        *o.target = value;
      } else {
        f.lock_dir = value;
      }
    }
    if (!matched) {
      std::cerr << "ckprofd: unknown option " << a << " (see 'ckprofd --help')\n";
      return 2;
    }
  }
  // A relative path is taken from where ckprofd starts, once: jobs run elsewhere.
  if (!f.profiler_path.empty()) f.profiler_path = std::filesystem::absolute(f.profiler_path);
  auto config = BuildConfig(f);
  if (!config) {
    std::cerr << "ckprofd: " << config.error() << "\n";
    return 1;
  }
  return Run(f, *config);
}

}  // namespace ckprof

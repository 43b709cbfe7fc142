// LocalDaemon: a private ckprofd on a temporary socket and state dir, for `ckprof run --local`
// and the demo. The client uses it like any daemon — one scheduler, one runner, one code path —
// and stops it (SIGTERM, wait) when done. Single-threaded.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace ckprof {

// A private datagram socket for systemd's notify protocol: a ckprofd started with
// NOTIFY_SOCKET=path() sends READY=1 on it once it serves, so whoever starts one (LocalDaemon,
// the tests, the benchmarks) waits for that event instead of polling. Move-only; closes and
// removes the socket on destruction.
class NotifySocket {
 public:
  // Binds `path` (an old file there is removed), mode 0666 so that a daemon running as
  // another user can send. Error: "cannot bind the notify socket PATH: <reason>".
  static Result<NotifySocket> Bind(const std::string& path);
  NotifySocket(NotifySocket&& other) noexcept;
  NotifySocket& operator=(NotifySocket&&) = delete;
  NotifySocket(const NotifySocket&) = delete;
  ~NotifySocket();

  const std::string& path() const { return path_; }

  enum class Wait { kReady, kExited, kTimedOut };
  // Waits until READY=1 arrives, the process `pid` (a child) exits (then reaped, its wait
  // status in *exit_status), or timeout_ms pass.
  Wait WaitReady(pid_t pid, int timeout_ms, int* exit_status);

 private:
  NotifySocket(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

// How to start a ckprofd process: the one fork/exec for LocalDaemon, the tests and the
// benchmark. The child gets stdin from /dev/null and stderr (and stdout unless
// `stdout_to_log` is false) in `log_path`; a setup step that fails exits 126, an exec that
// fails says so in the log and exits 127. It starts with no signal blocked.
struct DaemonProcessSpec {
  std::vector<std::string> argv;  // argv[0]: the binary (a path, or a name looked up in PATH)
  std::vector<std::string> env;   // the whole environment, "K=V"
  std::string log_path;           // created 0644 (0600 with `private_log`)
  bool truncate_log = false;      // else appended to
  bool private_log = false;
  bool stdout_to_log = true;
  bool own_process_group = false;  // setpgid(0, 0): a terminal's Ctrl-C goes to the caller only
  bool die_with_parent = false;    // SIGTERM when the caller dies (PR_SET_PDEATHSIG)
  int nice = 0;                    // setpriority when not 0
  int64_t uid = -1, gid = -1;      // switch to these (root only); -1 = keep
  int64_t fsize_limit = -1;        // RLIMIT_FSIZE in bytes, SIGXFSZ ignored; -1 = none
};
// Forks and execs `spec`; the child's pid, or why there is none.
Result<pid_t> StartDaemonProcess(const DaemonProcessSpec& spec);
// This process's environment without systemd's variables for it (NOTIFY_SOCKET, LISTEN_*,
// WATCHDOG_*), which a daemon it starts must not take for its own.
std::vector<std::string> EnvironmentForDaemon();
// Waits up to `timeout_s` for the child `pid` to exit and reaps it: its wait status, or
// nullopt when it still runs (not reaped) or was reaped elsewhere.
std::optional<int> WaitForExit(pid_t pid, double timeout_s);

struct LocalDaemonOptions {
  std::string gpus = "auto";  // as ckprofd --gpus; "auto" falls back to "0" when none is found
  std::string profiler_path;  // absolute
  std::string pin_env;        // "" = ckprofd's default
  std::string timeout;        // "" = none
  std::optional<std::string> lock_dir;  // ckprofd --lock-dir; nullopt = ckprofd's default
};

class LocalDaemon {
 public:
  // Starts ckprofd (next to this executable, else $CKPROF_DAEMON, else on PATH) on a fresh
  // temporary directory ($TMPDIR/ckprof-local-XXXXXX: socket, state, log). The daemon gets
  // SIGTERM when this process dies (PR_SET_PDEATHSIG), so it never outlives its client; the
  // directories such a death leaves are removed by the next Spawn. Call WaitReady next.
  static Result<std::unique_ptr<LocalDaemon>> Spawn(const LocalDaemonOptions& options);
  // Waits for its READY=1 (systemd's notify protocol on a private datagram socket): no polling.
  Status WaitReady();
  // Stops it, then removes its directory.
  ~LocalDaemon();
  LocalDaemon(const LocalDaemon&) = delete;
  LocalDaemon& operator=(const LocalDaemon&) = delete;

  const std::string& socket() const { return socket_; }
  const std::string& gpus() const { return gpus_; }
  // SIGTERM (its running profilers are stopped), then waits up to timeout_s for the exit, then
  // SIGKILL. Ok when it exited 0. Safe to call from another thread than WaitReady's (Ctrl-C).
  Status Stop(double timeout_s = 30);
  // Stop, then removes its directory.
  void StopAndRemove();

 private:
  LocalDaemon() = default;
  std::string dir_, socket_, log_, gpus_;
  std::optional<NotifySocket> notify_;
  std::atomic<pid_t> pid_{-1};
};

// Where the ckprofd binary is: $CKPROF_DAEMON, next to this executable, or "ckprofd" on PATH.
std::string FindDaemonBinary();

}  // namespace ckprof

// Helpers shared by the tests: paths of test data and built binaries, temp dirs, running
// commands and capturing their output, configs and the emulator's log, real daemons, and (for
// the reliability suite) users, groups, processes and SQL on a daemon's state. Test threads
// only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/ck_config.h"
#include "daemon/process_util.h"

namespace ckprof::testing {

// Path of a file under tests/data.
std::string DataPath(const std::string& name);
// Path of a built binary under build/bin.
std::string BinPath(const std::string& name);
// The same binary (ckprof, ckprofd or ckprofiler-emu) where every user may run it, for what
// tests run as other users: the build tree may sit under a directory they cannot enter (a
// clone in a 0700 home). A hard link (else a copy) in a world-readable temporary directory,
// made once per test process with its two companions, removed at exit.
std::string SharedBinPath(const std::string& name);
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& content);

// A fresh directory under $TMPDIR, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal; see term_signal.
  int term_signal = 0;
  std::string out;
  std::string err;
};

// Runs argv (no shell) with extra environment entries "K=V", in `cwd` when not empty, and
// feeds `input` to its stdin. Waits for it to exit.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::vector<std::string>& env = {}, const std::string& cwd = "",
                         const std::string& input = "");

// A command running in the background (no shell), its stdout and stderr read as they come:
// for tests that act while it runs (send Ctrl-C, kill it) and wait on what it prints.
class BackgroundCommand {
 public:
  // Starts argv with extra environment entries "K=V" in `cwd` (when not empty), stdin from
  // /dev/null. Throws when it cannot.
  BackgroundCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
                    const std::string& cwd = "");
  ~BackgroundCommand();  // SIGKILLs it when still running
  BackgroundCommand(const BackgroundCommand&) = delete;
  BackgroundCommand& operator=(const BackgroundCommand&) = delete;

  pid_t pid() const { return pid_; }
  // Reads its output until stdout or stderr holds `needle` (true), it closes both or timeout_s
  // passes (false).
  bool WaitForOutput(const std::string& needle, double timeout_s = 30);
  void Signal(int sig);
  // Reads to the end and reaps it; a command still running after timeout_s is SIGKILLed.
  CommandResult Finish(double timeout_s = 30);

 private:
  bool ReadSome(int timeout_ms);  // false once both streams are closed
  pid_t pid_ = -1;
  int out_ = -1, err_ = -1;
  CommandResult result_;
};

// A 2-D convolution with a 3x3 filter, stride, dilation and padding 1, one group, input
// spatial x spatial: the small problem the tests run (index_type 0 for fwd; defaults elsewhere).
CkConfig Conv3x3(ConvOp op, int64_t n, int64_t k, int64_t c, int64_t spatial);

// Configs-file text of `n` distinct small fwd problems (K varies, priority_rank 1..n); every
// `every`-th config gets the emulator's fault-selecting batch size `magic_n` (0 = none).
std::string FwdConfigsText(int n, int magic_n = 0, int every = 1, int64_t spatial = 8);

// One invocation of the emulator, from its CKEMU_LOG (its start and end lines merged).
struct EmuRun {
  int pid = 0, pgid = 0, uid = -1, gid = -1;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // the pin variables it saw (HIP_VISIBLE_DEVICES, ...)
  std::string gpu;                         // HIP_VISIBLE_DEVICES
  double start = 0;                        // microseconds since the epoch
  double end = 0;                          // 0 when it never logged an end (killed)
  std::string outcome;
};

// The runs logged in a CKEMU_LOG file, in the order they started. A run is its pid and start
// time together: pids wrap quickly on a busy machine, so two runs may share a pid.
std::vector<EmuRun> ReadEmuRuns(const std::string& log_path);

// Processes whose environment holds `needle` ("CKPROFD_STATE=/dir"): the daemon's own reader.
using ckprof::ProcessesWithEnv;
// True when `pid` exists and is not a zombie.
using ckprof::ProcessIsLive;

}  // namespace ckprof::testing

// ---- Users, groups, daemons and processes: the integration and reliability tests ----

namespace ckprof::testing {

// A throwaway system user created for a test (root only; useradd), removed on destruction.
// `groups`: supplementary groups to join (they must exist).
class SystemUser {
 public:
  explicit SystemUser(const std::string& name, const std::vector<std::string>& groups = {});
  ~SystemUser();
  SystemUser(const SystemUser&) = delete;
  SystemUser& operator=(const SystemUser&) = delete;
  bool ok() const { return ok_ && uid_ != 0; }
  const std::string& name() const { return name_; }
  uint32_t uid() const { return uid_; }
  uint32_t gid() const { return gid_; }
  // A command prefix that runs the rest as this user (setpriv, with the user's groups).
  std::vector<std::string> As() const;

 private:
  std::string name_;
  bool ok_ = false;
  uint32_t uid_ = 0, gid_ = 0;
};

// A throwaway group (root only; groupadd), removed on destruction.
class SystemGroup {
 public:
  explicit SystemGroup(const std::string& name);
  ~SystemGroup();
  SystemGroup(const SystemGroup&) = delete;
  SystemGroup& operator=(const SystemGroup&) = delete;
  bool ok() const { return ok_; }
  const std::string& name() const { return name_; }
  uint32_t gid() const { return gid_; }

 private:
  std::string name_;
  bool ok_ = false;
  uint32_t gid_ = 0;
};

// A real ckprofd started for a test, with full control: as another user, with a file size
// limit, on a chosen state dir. Start() waits for READY=1 (sd_notify on a private socket): no
// sleeps. The destructor stops it (StopGracefully) and SIGKILLs whatever processes carrying its
// state dir's marker are left.
class LaunchedDaemon {
 public:
  struct Options {
    std::string dir;        // socket, log, config and notify socket live here
    std::string state_dir;  // default: dir + "/state"
    std::string gpus = "0-3";
    std::vector<std::string> args;  // more ckprofd flags
    std::vector<std::string> env;   // "K=V" for the daemon (and so its profilers)
    std::string config_json;        // written to dir/ckprofd.json and passed with --config
    int64_t uid = -1, gid = -1;     // run as this uid/gid (root only); -1 = ours
    int64_t fsize_limit = -1;       // RLIMIT_FSIZE in bytes (SIGXFSZ ignored); -1 = none
  };
  LaunchedDaemon() = default;
  ~LaunchedDaemon();
  LaunchedDaemon(const LaunchedDaemon&) = delete;
  LaunchedDaemon& operator=(const LaunchedDaemon&) = delete;

  // Starts ckprofd; false (and `error`, with its log) when it exits or is not ready in 30 s.
  bool Start(const Options& options, std::string* error);
  // Runs ckprofd to its exit (a start that must fail); returns its wait status.
  int RunToExit(const Options& options, double timeout_s = 30);
  // Sends `sig` and waits for the exit; returns the wait status (-1 when not running).
  int Stop(int sig);
  // Waits up to timeout_s for the daemon to exit by itself; its wait status, or nullopt.
  std::optional<int> WaitExit(double timeout_s);
  // SIGTERM, then up to timeout_s for the exit, then SIGKILL. "" when the daemon exited with
  // status 0 (a clean shutdown, and no sanitizer report at exit); else what happened, with the
  // end of its log.
  std::string StopGracefully(double timeout_s);
  // Destruction then leaves the processes carrying the state dir's marker alone: a test that
  // killed the daemon and starts another on the same state dir wants its recovery to find them.
  void KeepLeftovers() { kill_leftovers_ = false; }
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  std::string socket() const { return options_.dir + "/ckprofd.sock"; }
  std::string state_dir() const {
    return options_.state_dir.empty() ? options_.dir + "/state" : options_.state_dir;
  }
  std::string log_path() const { return options_.dir + "/ckprofd.log"; }
  // Peak resident set (VmHWM) and current (VmRSS) in bytes; -1 when unknown.
  int64_t PeakRssBytes() const;
  int64_t RssBytes() const;

 private:
  pid_t Spawn(const std::string& notify_path);
  Options options_;
  pid_t pid_ = -1;
  bool kill_leftovers_ = true;
};

// A real ckprofd started for a test: on a socket in its own temp dir (`dir`, which it does not
// own), with the emulator as profiler. Start() waits for its READY=1 (sd_notify on a private
// socket): no sleeps. Destroyed while running, it stops the daemon with SIGTERM (SIGKILL after
// kStopTimeoutS) and fails the test unless the daemon exited with status 0. A test that wants
// kill -9 calls Signal(SIGKILL); what that daemon left running is then left for the next one.
class DaemonProcess {
 public:
  struct Options {
    std::string gpus = "0-3";
    std::vector<std::string> extra_args;  // more ckprofd flags
    std::vector<std::string> env;         // "K=V" for the daemon (and so its profilers)
    std::string config_json;              // written to a file and passed with --config
  };
  static constexpr double kStopTimeoutS = 30;

  explicit DaemonProcess(const std::string& dir) : dir_(dir) {}
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // Starts ckprofd; false (and `error`) when it exits or is not ready within 30 s.
  bool Start(const Options& options, std::string* error);
  // Sends a signal and, unless sig is 0, waits for the exit; returns the wait status.
  int Signal(int sig);
  int pid() const { return daemon_.pid(); }
  std::string socket() const { return dir_ + "/ckprofd.sock"; }
  std::string state_dir() const { return dir_ + "/state"; }
  std::string log_path() const { return dir_ + "/ckprofd.log"; }

 private:
  std::string dir_;
  LaunchedDaemon daemon_;
};

// SIGKILLs every process whose environment holds `marker` ("CKPROFD_STATE=/dir"), with its
// process group: the profilers a daemon killed with SIGKILL leaves behind.
void KillMarkedProcesses(const std::string& marker);

// True when some live (non-zombie) process is in process group `pgid`.
inline bool GroupHasLiveProcess(pid_t pgid) { return pgid > 1 && ProcessGroupAlive(pgid); }

// Runs an SQLite query on a database file; the rows, each column as text. For checks such as
// PRAGMA integrity_check on a daemon's state. Throws on error.
std::vector<std::vector<std::string>> SqlQuery(const std::string& db_path, const std::string& sql);

}  // namespace ckprof::testing

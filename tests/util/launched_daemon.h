// LaunchedDaemon: the one way tests start a real ckprofd, through the ckprofd launcher that
// LocalDaemon and the benchmark use too (client/local_daemon: StartDaemonProcess, NotifySocket).
// Test threads only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ckprof::testing {

// False in builds with a sanitizer: ASan keeps freed memory in quarantine (256 MiB) and pads
// every allocation, so the daemon's peak memory says nothing there. Tests still run every
// step; they check memory bounds only where the numbers mean something.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kMemoryIsMeasurable = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kMemoryIsMeasurable = false;
#else
inline constexpr bool kMemoryIsMeasurable = true;
#endif
#else
inline constexpr bool kMemoryIsMeasurable = true;
#endif

// A real ckprofd started for a test on a socket in a directory of the test's: with the
// emulator or any profiler, as another user, with a file size limit, on a chosen state dir.
// Start() waits for READY=1 (sd_notify on a private socket): no sleeps. The destructor stops a
// daemon still running (StopGracefully: SIGTERM, SIGKILL only after kStopTimeoutS, so that its
// shutdown path and the sanitizers' exit checks run) and SIGKILLs whatever processes carrying
// its state dir's marker are left. A test that wants kill -9 sends it (Stop(SIGKILL)); it may
// then Start() again on the same state dir, and the new daemon's recovery meets what the old
// one left running.
class LaunchedDaemon {
 public:
  struct Options {
    std::string dir;        // socket, log, config and notify socket live here
    std::string state_dir;  // default: dir + "/state"
    std::string gpus = "0-3";
    std::vector<std::string> args;  // more ckprofd flags
    // "K=V" for the daemon (and so its profilers), each in place of an inherited or earlier
    // entry for K.
    std::vector<std::string> env;
    std::string config_json;  // written to dir/ckprofd.json and passed with --config
    // Reuse of earlier results (submit --reuse auto). Off unless asked for (or the config sets
    // reuse_max_age_days): tests submit the same configs again and again as distinct work.
    bool reuse = false;
    int64_t uid = -1, gid = -1;  // run as this uid/gid (root only); -1 = ours
    int64_t fsize_limit = -1;    // RLIMIT_FSIZE in bytes (SIGXFSZ ignored); -1 = none
  };
  static constexpr double kStopTimeoutS = 30;

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
  // Destruction then fails the test unless the daemon, if still running, stops with status 0 on
  // SIGTERM (a clean shutdown, and no sanitizer report at exit): ADD_FAILURE with
  // StopGracefully's account and the end of the daemon's log.
  void ExpectCleanStop() { expect_clean_stop_ = true; }
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
  bool expect_clean_stop_ = false;
};

}  // namespace ckprof::testing

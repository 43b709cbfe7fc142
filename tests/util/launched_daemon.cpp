#include "tests/util/launched_daemon.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <stdexcept>

#include "client/local_daemon.h"
#include "daemon/process_util.h"
#include "tests/util/commands.h"
#include "tests/util/files.h"
#include "tests/util/processes.h"

namespace ckprof::testing {

LaunchedDaemon::~LaunchedDaemon() {
  // Gracefully, so that the daemon stops its running profilers; then whatever a daemon killed
  // with SIGKILL (by a test, or here) left behind: processes carrying this state dir's marker.
  if (pid_ > 0) {
    if (std::string error = StopGracefully(kStopTimeoutS); !error.empty() && expect_clean_stop_) {
      ADD_FAILURE() << error;
    }
  }
  if (kill_leftovers_ && !options_.dir.empty()) {
    KillMarkedProcesses("CKPROFD_STATE=" + state_dir());
  }
}

std::string LaunchedDaemon::StopGracefully(double timeout_s) {
  if (pid_ <= 0) return "";
  const pid_t pid = pid_;
  kill(pid_, SIGTERM);
  std::optional<int> status = WaitExit(timeout_s);
  std::string what;
  if (!status) {
    Stop(SIGKILL);
    what = "did not exit within " + std::to_string(static_cast<int>(timeout_s)) +
           " s of SIGTERM (killed)";
  } else if (WIFSIGNALED(*status)) {
    what = std::string("died by ") + strsignal(WTERMSIG(*status)) + " after SIGTERM";
  } else if (WEXITSTATUS(*status) != 0) {
    what = "exited with status " + std::to_string(WEXITSTATUS(*status)) + " after SIGTERM";
  } else {
    return "";
  }
  std::string log;
  try {
    log = ReadFile(log_path());
  } catch (const std::exception&) {
  }
  constexpr size_t kTail = 8000;
  if (log.size() > kTail) log = "[...]" + log.substr(log.size() - kTail);
  return "ckprofd (pid " + std::to_string(pid) + ") " + what + "; the end of its log:\n" + log;
}

pid_t LaunchedDaemon::Spawn(const std::string& notify_path) {
  const Options& o = options_;
  std::vector<std::string> argv = {o.uid >= 0 ? SharedBinPath("ckprofd") : BinPath("ckprofd"),
                                   "--socket",
                                   socket(),
                                   "--state-dir",
                                   state_dir(),
                                   "--gpus",
                                   o.gpus,
                                   "--log-level",
                                   "debug"};
  std::string config_json = o.config_json;
  if (!o.reuse && config_json.find("\"reuse_max_age_days\"") == std::string::npos) {
    const size_t brace = config_json.find('{');
    const size_t next = brace == std::string::npos
                            ? std::string::npos
                            : config_json.find_first_not_of(" \t\r\n", brace + 1);
    const bool empty_object = next != std::string::npos && config_json[next] == '}';
    config_json = brace == std::string::npos
                      ? std::string("{\"reuse_max_age_days\": 0}")
                      : config_json.substr(0, brace + 1) + "\"reuse_max_age_days\": 0" +
                            (empty_object ? "" : ",") + config_json.substr(brace + 1);
  }
  if (!config_json.empty()) {
    WriteFile(o.dir + "/ckprofd.json", config_json);
    chmod((o.dir + "/ckprofd.json").c_str(), 0644);
    argv.insert(argv.end(), {"--config", o.dir + "/ckprofd.json"});
  }
  // Each test daemon locks its GPUs in a directory of its own, unless the test says otherwise:
  // tests run in parallel, and their fake GPUs are not the host's.
  const bool own_lock_dir =
      std::find(o.args.begin(), o.args.end(), "--lock-dir") == o.args.end() &&
      std::none_of(o.args.begin(), o.args.end(),
                   [](const std::string& a) { return a.rfind("--lock-dir=", 0) == 0; }) &&
      o.config_json.find("\"lock_dir\"") == std::string::npos;
  if (own_lock_dir) argv.insert(argv.end(), {"--lock-dir", o.dir + "/locks"});
  // Other users' profilers get a clean environment: the emulator's settings, the fake torch's
  // and the sanitizers' reach them only when passed.
  const bool own_pass_env =
      std::none_of(o.args.begin(), o.args.end(),
                   [](const std::string& a) { return a.rfind("--pass-env", 0) == 0; }) &&
      o.config_json.find("\"pass_env\"") == std::string::npos;
  if (own_pass_env) {
    argv.insert(argv.end(), {"--pass-env",
                             "CKEMU_*,TORCH_*,PYTHONPATH,ASAN_OPTIONS,UBSAN_OPTIONS,LSAN_OPTIONS,"
                             "TSAN_OPTIONS"});
  }
  argv.insert(argv.end(), o.args.begin(), o.args.end());
  DaemonProcessSpec spec;
  spec.argv = std::move(argv);
  spec.env = WithEnvironment(EnvironmentForDaemon(), o.env);
  if (!notify_path.empty()) spec.env.push_back("NOTIFY_SOCKET=" + notify_path);
  spec.log_path = log_path();
  spec.uid = o.uid;
  spec.gid = o.gid;
  spec.fsize_limit = o.fsize_limit;
  auto pid = StartDaemonProcess(spec);
  if (!pid) throw std::runtime_error("cannot start ckprofd: " + pid.error());
  return *pid;
}

bool LaunchedDaemon::Start(const Options& o, std::string* error) {
  options_ = o;
  // A daemon of another uid must be able to send: NotifySocket makes it 0666.
  auto notify = NotifySocket::Bind(o.dir + "/notify-" + std::to_string(getpid()) + ".sock");
  if (!notify) {
    *error = notify.error();
    return false;
  }
  pid_ = Spawn(notify->path());
  int status = 0;
  switch (notify->WaitReady(pid_, 30000, &status)) {
    case NotifySocket::Wait::kReady:
      return true;
    case NotifySocket::Wait::kExited:
      pid_ = -1;
      *error = "ckprofd exited (status " + std::to_string(status) + "): " + ReadFile(log_path());
      return false;
    case NotifySocket::Wait::kTimedOut:
      break;
  }
  *error = "ckprofd not ready within 30 s: " + ReadFile(log_path());
  return false;
}

int LaunchedDaemon::RunToExit(const Options& o, double timeout_s) {
  options_ = o;
  pid_ = Spawn("");
  auto status = WaitExit(timeout_s);
  if (!status) return Stop(SIGKILL);
  return *status;
}

std::optional<int> LaunchedDaemon::WaitExit(double timeout_s) {
  std::optional<int> status = WaitForExit(pid_, timeout_s);
  if (status) pid_ = -1;
  return status;
}

int LaunchedDaemon::Stop(int sig) {
  if (pid_ <= 0) return -1;
  kill(pid_, sig);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

int64_t LaunchedDaemon::PeakRssBytes() const {
  const int64_t kib = ProcStatusKiB(pid_, "VmHWM");
  return kib < 0 ? -1 : kib * 1024;
}
int64_t LaunchedDaemon::RssBytes() const {
  const int64_t kib = ProcStatusKiB(pid_, "VmRSS");
  return kib < 0 ? -1 : kib * 1024;
}

}  // namespace ckprof::testing

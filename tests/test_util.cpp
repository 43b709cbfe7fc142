#include "tests/test_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "client/local_daemon.h"
#include "common/ck_config.h"
#include "common/json_util.h"

extern char** environ;

namespace ckprof::testing {

std::string DataPath(const std::string& name) {
  return std::string(CKPROF_TEST_DATA_DIR) + "/" + name;
}

std::string BinPath(const std::string& name) { return std::string(CKPROF_BIN_DIR) + "/" + name; }

namespace {

// The directory of SharedBinPath's links: made on first use, removed at exit.
class SharedBinDir {
 public:
  SharedBinDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/ckprof-test-bin-XXXXXX";
    if (!mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed for the shared binaries");
    path_ = templ;
    chmod(path_.c_str(), 0755);
    for (const char* name : {"ckprof", "ckprofd", "ckprofiler-emu"}) {
      const std::string from = BinPath(name), to = path_ + "/" + name;
      std::error_code ec;
      if (link(from.c_str(), to.c_str()) != 0) {
        std::filesystem::copy_file(from, to, ec);
        chmod(to.c_str(), 0755);
      }
    }
  }
  ~SharedBinDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

std::string SharedBinPath(const std::string& name) {
  static SharedBinDir dir;
  return dir.path() + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << content;
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/ckprof-test-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

CommandResult RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         const std::string& cwd, const std::string& input) {
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) || pipe2(out_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC)) {
    throw std::runtime_error("pipe failed");
  }
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  for (const auto& kv : env) {
    auto key = kv.substr(0, kv.find('=') + 1);
    std::erase_if(env_strings, [&](const std::string& s) { return s.rfind(key, 0) == 0; });
    env_strings.push_back(kv);
  }
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(127);
    execvpe(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  signal(SIGPIPE, SIG_IGN);
  size_t written = 0;
  if (input.empty()) {
    close(in_pipe[1]);
    in_pipe[1] = -1;
  }
  CommandResult r;
  int open_fds = 2;
  while (open_fds > 0 || in_pipe[1] >= 0) {
    pollfd fds[3];
    int n = 0;
    if (out_pipe[0] >= 0) fds[n++] = {out_pipe[0], POLLIN, 0};
    if (err_pipe[0] >= 0) fds[n++] = {err_pipe[0], POLLIN, 0};
    if (in_pipe[1] >= 0) fds[n++] = {in_pipe[1], POLLOUT, 0};
    if (poll(fds, n, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < n; ++i) {
      if (!fds[i].revents) continue;
      if (fds[i].fd == in_pipe[1]) {
        ssize_t w = write(in_pipe[1], input.data() + written, input.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
        if (w < 0 || written >= input.size()) {
          close(in_pipe[1]);
          in_pipe[1] = -1;
        }
        continue;
      }
      char buf[65536];
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        (fds[i].fd == out_pipe[0] ? r.out : r.err).append(buf, static_cast<size_t>(got));
      } else {
        close(fds[i].fd);
        if (fds[i].fd == out_pipe[0])
          out_pipe[0] = -1;
        else
          err_pipe[0] = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.term_signal = WTERMSIG(status);
  }
  return r;
}

BackgroundCommand::BackgroundCommand(const std::vector<std::string>& argv,
                                     const std::vector<std::string>& env, const std::string& cwd) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC)) {
    throw std::runtime_error("pipe failed");
  }
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  for (const auto& kv : env) {
    auto key = kv.substr(0, kv.find('=') + 1);
    std::erase_if(env_strings, [&](const std::string& s) { return s.rfind(key, 0) == 0; });
    env_strings.push_back(kv);
  }
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(127);
    execvpe(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  out_ = out_pipe[0];
  err_ = err_pipe[0];
}

BackgroundCommand::~BackgroundCommand() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_ >= 0) close(out_);
  if (err_ >= 0) close(err_);
}

bool BackgroundCommand::ReadSome(int timeout_ms) {
  pollfd fds[2];
  int n = 0;
  if (out_ >= 0) fds[n++] = {out_, POLLIN, 0};
  if (err_ >= 0) fds[n++] = {err_, POLLIN, 0};
  if (n == 0) return false;
  int ready = poll(fds, n, timeout_ms);
  if (ready < 0 && errno != EINTR) return false;
  for (int i = 0; i < n && ready > 0; ++i) {
    if (!fds[i].revents) continue;
    char buf[65536];
    ssize_t got = read(fds[i].fd, buf, sizeof buf);
    const bool is_out = fds[i].fd == out_;
    if (got > 0) {
      (is_out ? result_.out : result_.err).append(buf, static_cast<size_t>(got));
    } else {
      close(fds[i].fd);
      (is_out ? out_ : err_) = -1;
    }
  }
  return out_ >= 0 || err_ >= 0;
}

bool BackgroundCommand::WaitForOutput(const std::string& needle, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  for (;;) {
    if (result_.out.find(needle) != std::string::npos ||
        result_.err.find(needle) != std::string::npos) {
      return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0 || !ReadSome(static_cast<int>(left))) return false;
  }
}

void BackgroundCommand::Signal(int sig) {
  if (pid_ > 0) kill(pid_, sig);
}

CommandResult BackgroundCommand::Finish(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      kill(pid_, SIGKILL);
      break;
    }
    if (!ReadSome(static_cast<int>(left))) break;
  }
  int status = 0;
  if (pid_ > 0) waitpid(pid_, &status, 0);
  pid_ = -1;
  if (WIFEXITED(status)) {
    result_.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result_.term_signal = WTERMSIG(status);
  }
  return result_;
}

CkConfig Conv3x3(ConvOp op, int64_t n, int64_t k, int64_t c, int64_t spatial) {
  CkConfig config;
  config.op = op;
  if (op == ConvOp::kFwd) config.index_type = 0;
  config.num_dim_spatial = 2;
  config.G = 1;
  config.N = n;
  config.K = k;
  config.C = c;
  config.filter_spatial = {3, 3};
  config.input_spatial = {spatial, spatial};
  config.strides = {1, 1};
  config.dilations = {1, 1};
  config.left_pads = {1, 1};
  config.right_pads = {1, 1};
  return config;
}

std::string FwdConfigsText(int n, int magic_n, int every, int64_t spatial) {
  std::vector<CkConfig> configs;
  for (int i = 1; i <= n; ++i) {
    CkConfig c =
        Conv3x3(ConvOp::kFwd, (magic_n && i % every == 0) ? magic_n : 2, 8 + i, 8, spatial);
    c.metadata["priority_rank"] = i;
    c.metadata["description"] = Describe(c);
    configs.push_back(c);
  }
  return ConfigsToText(configs);
}

std::vector<EmuRun> ReadEmuRuns(const std::string& log_path) {
  std::vector<EmuRun> runs;
  std::map<std::pair<int, double>, size_t> index;  // (pid, start) -> runs[i]
  std::ifstream in(log_path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = ParseJson(line);
    if (!j.ok() || !j->is_object()) continue;
    const std::pair<int, double> key = {j->value("pid", 0), j->value("start", 0.0)};
    auto [it, added] = index.emplace(key, runs.size());
    if (added) runs.emplace_back();
    EmuRun& r = runs[it->second];
    r.pid = key.first;
    r.start = key.second;
    r.pgid = j->value("pgid", 0);
    r.uid = j->value("uid", -1);
    r.gid = j->value("gid", -1);
    r.argv = j->value("argv", std::vector<std::string>{});
    r.env.clear();
    const nlohmann::json env = j->value("env", nlohmann::json::object());
    for (const auto& [name, value] : env.items()) {
      if (value.is_string()) r.env[name] = value.get<std::string>();
    }
    auto gpu = r.env.find("HIP_VISIBLE_DEVICES");
    r.gpu = gpu == r.env.end() ? "" : gpu->second;
    if (j->value("event", "") == "end") {
      r.end = j->value("end", 0.0);
      r.outcome = j->value("outcome", "");
    }
  }
  return runs;
}

}  // namespace ckprof::testing

#include <dirent.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>

namespace ckprof::testing {}  // namespace ckprof::testing

// ---- Users, groups, daemons and processes: the integration and reliability tests ----

#include <grp.h>
#include <pwd.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <map>

namespace ckprof::testing {

SystemUser::SystemUser(const std::string& name, const std::vector<std::string>& groups)
    : name_(name) {
  RunCommand({"userdel", name_});
  std::vector<std::string> argv = {"useradd", "--no-create-home", "--shell", "/usr/sbin/nologin"};
  if (!groups.empty()) {
    std::string list;
    for (const auto& g : groups) list += (list.empty() ? "" : ",") + g;
    argv.insert(argv.end(), {"--groups", list});
  }
  argv.push_back(name_);
  // Tests run in parallel: useradd fails at once while another holds /etc/passwd's lock.
  for (int attempt = 0; attempt < 50 && !ok_; ++attempt) ok_ = RunCommand(argv).exit_code == 0;
  if (passwd* pw = getpwnam(name_.c_str()); ok_ && pw) {
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
  }
}

SystemUser::~SystemUser() {
  if (!ok_) return;
  for (int attempt = 0; attempt < 50; ++attempt) {
    // --force: a daemon started as this user may still be running when the test ends.
    int code = RunCommand({"userdel", "--force", name_}).exit_code;
    if (code != 1 && code != 10) break;  // 1, 10: a file is locked by another test
  }
}

std::vector<std::string> SystemUser::As() const {
  return {"setpriv", "--reuid=" + name_, "--regid=" + name_, "--init-groups", "--"};
}

SystemGroup::SystemGroup(const std::string& name) : name_(name) {
  RunCommand({"groupdel", name_});
  for (int attempt = 0; attempt < 50 && !ok_; ++attempt) {
    ok_ = RunCommand({"groupadd", name_}).exit_code == 0;
  }
  if (group* g = getgrnam(name_.c_str()); ok_ && g) gid_ = g->gr_gid;
  ok_ = ok_ && gid_ != 0;
}

SystemGroup::~SystemGroup() {
  if (!ok_) return;
  for (int attempt = 0; attempt < 50; ++attempt) {
    int code = RunCommand({"groupdel", name_}).exit_code;
    if (code != 10) break;  // 10: the group file is locked by another test
  }
}

LaunchedDaemon::~LaunchedDaemon() {
  // Gracefully, so that the daemon stops its running profilers; then whatever a daemon killed
  // with SIGKILL (by a test, or here) left behind: processes carrying this state dir's marker.
  if (pid_ > 0) (void)StopGracefully(30);
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

DaemonProcess::~DaemonProcess() {
  if (!daemon_.running()) {
    daemon_.KeepLeftovers();
    return;
  }
  if (std::string error = daemon_.StopGracefully(kStopTimeoutS); !error.empty()) {
    ADD_FAILURE() << error;
  }
}

bool DaemonProcess::Start(const Options& o, std::string* error) {
  LaunchedDaemon::Options options;
  options.dir = dir_;
  options.gpus = o.gpus;
  options.args = o.extra_args;
  options.env = o.env;
  options.config_json = o.config_json;
  return daemon_.Start(options, error);
}

int DaemonProcess::Signal(int sig) {
  if (!daemon_.running()) return -1;
  if (sig == 0) return kill(daemon_.pid(), 0);
  return daemon_.Stop(sig);
}

void KillMarkedProcesses(const std::string& marker) {
  for (int pid : ProcessesWithEnv(marker)) {
    pid_t group = getpgid(pid);
    if (group > 1 && group != getpgrp()) {
      kill(-group, SIGKILL);
    } else {
      kill(pid, SIGKILL);
    }
  }
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
  if (!o.config_json.empty()) {
    WriteFile(o.dir + "/ckprofd.json", o.config_json);
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
  argv.insert(argv.end(), o.args.begin(), o.args.end());
  DaemonProcessSpec spec;
  spec.argv = std::move(argv);
  spec.env = EnvironmentForDaemon();
  spec.env.insert(spec.env.end(), o.env.begin(), o.env.end());
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

std::vector<std::vector<std::string>> SqlQuery(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close_v2(db);
    throw std::runtime_error("cannot open " + db_path + ": " + msg);
  }
  sqlite3_busy_timeout(db, 5000);
  std::vector<std::vector<std::string>> rows;
  auto on_row = [](void* p, int n, char** values, char**) {
    auto* out = static_cast<std::vector<std::vector<std::string>>*>(p);
    std::vector<std::string> row;
    for (int i = 0; i < n; ++i) row.emplace_back(values[i] ? values[i] : "");
    out->push_back(std::move(row));
    return 0;
  };
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), on_row, &rows, &err);
  std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close_v2(db);
  if (rc != SQLITE_OK) throw std::runtime_error("query failed on " + db_path + ": " + msg);
  return rows;
}

}  // namespace ckprof::testing

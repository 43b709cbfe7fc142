#include "client/local_daemon.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <utility>

extern char** environ;

namespace ckprof {
namespace {

std::string LogTail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.size() > 2000) s = "..." + s.substr(s.size() - 2000);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace

Result<NotifySocket> NotifySocket::Bind(const std::string& path) {
  unlink(path.c_str());
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (fd < 0 || path.size() >= sizeof addr.sun_path ||
      bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const std::string reason = path.size() >= sizeof addr.sun_path
                                   ? std::string("the path is too long for a socket")
                                   : std::string(std::strerror(errno));
    if (fd >= 0) close(fd);
    return MakeError("cannot bind the notify socket " + path + ": " + reason);
  }
  chmod(path.c_str(), 0666);
  return NotifySocket(fd, path);
}

NotifySocket::NotifySocket(NotifySocket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

NotifySocket::~NotifySocket() {
  if (fd_ < 0) return;
  close(fd_);
  unlink(path_.c_str());
}

NotifySocket::Wait NotifySocket::WaitReady(pid_t pid, int timeout_ms, int* exit_status) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  Wait result = Wait::kTimedOut;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) break;
    pollfd fds[2] = {{fd_, POLLIN, 0}, {pidfd, POLLIN, 0}};
    const int n = poll(fds, pidfd >= 0 ? 2 : 1, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (fds[0].revents & POLLIN) {
      char buf[512];
      const ssize_t got = recv(fd_, buf, sizeof buf, 0);
      if (got > 0 && std::string_view(buf, static_cast<size_t>(got)).find("READY=1") !=
                         std::string_view::npos) {
        result = Wait::kReady;
        break;
      }
    }
    if (pidfd >= 0 && (fds[1].revents & POLLIN)) {
      int status = 0;
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      if (exit_status) *exit_status = status;
      result = Wait::kExited;
      break;
    }
  }
  if (pidfd >= 0) close(pidfd);
  return result;
}

Result<pid_t> StartDaemonProcess(const DaemonProcessSpec& spec) {
  if (spec.argv.empty()) return MakeError("no ckprofd to start");
  // Everything the child needs is made before the fork: after it, only plain system calls.
  std::vector<std::string> argv = spec.argv, env = spec.env;
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  const int log_fd = open(spec.log_path.c_str(),
                          O_WRONLY | O_CREAT | O_CLOEXEC | (spec.truncate_log ? O_TRUNC : O_APPEND),
                          spec.private_log ? 0600 : 0644);
  if (log_fd < 0) {
    return MakeError("cannot open " + spec.log_path + ": " + std::strerror(errno));
  }
  const pid_t parent = getpid();
  sigset_t none;
  sigemptyset(&none);
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    close(log_fd);
    return MakeError(std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    // The caller may block signals (its Ctrl-C thread does); the daemon starts with none
    // blocked.
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (spec.die_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(1);  // it died before the line above
    }
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(log_fd, 2) < 0) _exit(126);
    if (spec.stdout_to_log && dup2(log_fd, 1) < 0) _exit(126);
    if (spec.own_process_group) setpgid(0, 0);
    if (spec.nice != 0 && setpriority(PRIO_PROCESS, 0, spec.nice) != 0) {
      dprintf(2, "cannot set nice %d: %s\n", spec.nice, std::strerror(errno));
      _exit(126);
    }
    if (spec.fsize_limit >= 0) {
      signal(SIGXFSZ, SIG_IGN);  // inherited through exec: writes fail with EFBIG instead
      const rlimit lim{static_cast<rlim_t>(spec.fsize_limit),
                       static_cast<rlim_t>(spec.fsize_limit)};
      if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(126);
    }
    if (spec.gid >= 0) {
      const gid_t g = static_cast<gid_t>(spec.gid);
      if (setgroups(1, &g) != 0 || setgid(g) != 0) _exit(126);
    }
    if (spec.uid >= 0 && setuid(static_cast<uid_t>(spec.uid)) != 0) _exit(126);
    execvpe(cargv[0], cargv.data(), cenv.data());
    dprintf(2, "cannot execute %s: %s\n", cargv[0], std::strerror(errno));
    _exit(127);
  }
  close(log_fd);
  return pid;
}

std::vector<std::string> EnvironmentForDaemon() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string_view kv = *e;
    if (kv.rfind("NOTIFY_SOCKET=", 0) == 0 || kv.rfind("LISTEN_", 0) == 0 ||
        kv.rfind("WATCHDOG_", 0) == 0) {
      continue;
    }
    env.emplace_back(kv);
  }
  return env;
}

std::optional<int> WaitForExit(pid_t pid, double timeout_s) {
  if (pid <= 0) return std::nullopt;
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    pollfd fd = {pidfd, POLLIN, 0};
    int n;
    while ((n = poll(&fd, 1, static_cast<int>(timeout_s * 1000))) < 0 && errno == EINTR) {
    }
    close(pidfd);
    if (n == 0) return std::nullopt;  // still running
  }
  int status = 0;
  pid_t got;
  while ((got = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (got < 0) return std::nullopt;  // reaped elsewhere
  return status;
}

std::string FindDaemonBinary() {
  if (const char* env = std::getenv("CKPROF_DAEMON"); env && *env) return env;
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto beside = self.parent_path() / "ckprofd";
    if (access(beside.c_str(), X_OK) == 0) return beside.string();
  }
  return "ckprofd";
}

namespace {

constexpr const char* kLocalDirPrefix = "ckprof-local-";

// Removes the directories of private daemons whose client died without cleaning up (SIGKILL):
// ours, with a client pid that is gone and no daemon answering on the socket.
void RemoveAbandonedDirs(const std::string& tmp) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(tmp, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kLocalDirPrefix, 0) != 0) continue;
    struct stat st {};
    if (lstat(entry.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) {
      continue;
    }
    std::ifstream owner(entry.path() / "client.pid");
    long client = 0;
    if (!(owner >> client) || client <= 0) continue;  // not ours to judge (or not yet written)
    if (kill(static_cast<pid_t>(client), 0) == 0 || errno != ESRCH) continue;
    const std::string sock = (entry.path() / "ckprofd.sock").string();
    sockaddr_un addr{};
    if (sock.size() < sizeof addr.sun_path) {
      addr.sun_family = AF_UNIX;
      std::memcpy(addr.sun_path, sock.c_str(), sock.size());
      int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      const bool answers =
          fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
      if (fd >= 0) close(fd);
      if (answers) continue;  // its daemon still stops
    }
    std::filesystem::remove_all(entry.path(), ec);
  }
}

}  // namespace

Result<std::unique_ptr<LocalDaemon>> LocalDaemon::Spawn(const LocalDaemonOptions& o) {
  std::unique_ptr<LocalDaemon> d(new LocalDaemon());
  const char* tmp_env = std::getenv("TMPDIR");
  const std::string tmp = tmp_env && *tmp_env ? tmp_env : "/tmp";
  RemoveAbandonedDirs(tmp);
  std::string templ = tmp + "/" + kLocalDirPrefix + "XXXXXX";
  if (!mkdtemp(templ.data())) {
    return MakeError("cannot create a temporary directory for the local ckprofd in " + tmp + ": " +
                     std::string(std::strerror(errno)));
  }
  d->dir_ = templ;
  d->socket_ = d->dir_ + "/ckprofd.sock";
  d->log_ = d->dir_ + "/ckprofd.log";
  {
    std::ofstream owner(d->dir_ + "/client.pid");
    owner << getpid() << "\n";
  }
  auto notify = NotifySocket::Bind(d->dir_ + "/notify.sock");
  if (!notify) return MakeError("cannot start the local ckprofd: " + notify.error());
  d->notify_.emplace(std::move(*notify));
  std::string gpus = o.gpus.empty() ? "auto" : o.gpus;
  d->gpus_ = gpus;
  std::vector<std::string> argv = {
      FindDaemonBinary(), "--socket", d->socket_,    "--state-dir", d->dir_ + "/state",
      "--gpus",           gpus,       "--log-level", "warn"};
  if (!o.profiler_path.empty()) argv.insert(argv.end(), {"--profiler-path", o.profiler_path});
  if (!o.pin_env.empty()) argv.insert(argv.end(), {"--pin-env", o.pin_env});
  if (!o.timeout.empty()) argv.insert(argv.end(), {"--timeout", o.timeout});
  if (o.lock_dir) argv.insert(argv.end(), {"--lock-dir", *o.lock_dir});
  DaemonProcessSpec spec;
  spec.argv = std::move(argv);
  spec.env = EnvironmentForDaemon();
  spec.env.push_back("NOTIFY_SOCKET=" + d->notify_->path());
  spec.log_path = d->log_;
  spec.truncate_log = true;
  spec.private_log = true;
  spec.stdout_to_log = false;
  spec.own_process_group = true;  // a terminal's Ctrl-C reaches the client, which stops it
  spec.die_with_parent = true;    // never outlive the client, even one killed by SIGKILL
  auto pid = StartDaemonProcess(spec);
  if (!pid) return MakeError("cannot start the local ckprofd: " + pid.error());
  d->pid_ = *pid;
  return d;
}

Status LocalDaemon::WaitReady() {
  const pid_t pid = pid_;
  if (pid <= 0 || !notify_) return MakeError("the local ckprofd is not running");
  int status = 0;
  switch (notify_->WaitReady(pid, 60000, &status)) {
    case NotifySocket::Wait::kReady:
      return Status::Ok();
    case NotifySocket::Wait::kExited:
      pid_ = -1;
      return MakeError("the local ckprofd exited before it was ready:\n" + LogTail(log_));
    case NotifySocket::Wait::kTimedOut:
      break;
  }
  return MakeError("the local ckprofd did not become ready within 60 s");
}

Status LocalDaemon::Stop(double timeout_s) {
  const pid_t pid = pid_.exchange(-1);
  if (pid <= 0) return Status::Ok();
  kill(pid, SIGTERM);
  std::optional<int> status = WaitForExit(pid, timeout_s);
  if (!status && kill(pid, 0) == 0) {  // it did not stop in time
    kill(pid, SIGKILL);
    status = WaitForExit(pid, 60);
  }
  if (!status) return Status::Ok();  // reaped elsewhere (WaitReady saw it exit)
  if (WIFEXITED(*status) && WEXITSTATUS(*status) == 0) return Status::Ok();
  return MakeError("the local ckprofd did not stop cleanly:\n" + LogTail(log_));
}

void LocalDaemon::StopAndRemove() {
  (void)Stop();
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

LocalDaemon::~LocalDaemon() { StopAndRemove(); }

}  // namespace ckprof

#include "client/local_daemon.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

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

Result<std::unique_ptr<LocalDaemon>> LocalDaemon::Start(const LocalDaemonOptions& o) {
  std::unique_ptr<LocalDaemon> d(new LocalDaemon());
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/ckprof-local-XXXXXX";
  if (!mkdtemp(templ.data())) {
    return MakeError("cannot create a temporary directory for the local ckprofd: " +
                     std::string(std::strerror(errno)));
  }
  d->dir_ = templ;
  d->socket_ = d->dir_ + "/ckprofd.sock";
  d->log_ = d->dir_ + "/ckprofd.log";
  const std::string notify_path = d->dir_ + "/notify.sock";

  int notify = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, notify_path.c_str(), sizeof addr.sun_path - 1);
  if (notify < 0 || bind(notify, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (notify >= 0) close(notify);
    return MakeError("cannot create the local ckprofd's notify socket: " +
                     std::string(std::strerror(errno)));
  }
  std::string gpus = o.gpus.empty() ? "auto" : o.gpus;
  d->gpus_ = gpus;
  std::vector<std::string> argv = {FindDaemonBinary(), "--socket", d->socket_, "--state-dir",
                                   d->dir_ + "/state", "--gpus", gpus, "--log-level", "warn"};
  if (!o.profiler_path.empty()) argv.insert(argv.end(), {"--profiler-path", o.profiler_path});
  if (!o.pin_env.empty()) argv.insert(argv.end(), {"--pin-env", o.pin_env});
  if (!o.timeout.empty()) argv.insert(argv.end(), {"--timeout", o.timeout});
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("NOTIFY_SOCKET=", 0) == 0 || kv.rfind("LISTEN_", 0) == 0 ||
        kv.rfind("WATCHDOG_", 0) == 0) {
      continue;
    }
    env.push_back(kv);
  }
  env.push_back("NOTIFY_SOCKET=" + notify_path);
  std::vector<char*> cargv, cenv;
  for (auto& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  for (auto& s : env) cenv.push_back(s.data());
  cenv.push_back(nullptr);
  int log_fd = open(d->log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  pid_t pid = fork();
  if (pid < 0) {
    close(notify);
    return MakeError("cannot start the local ckprofd: " + std::string(std::strerror(errno)));
  }
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    if (log_fd >= 0) dup2(log_fd, 2);
    setpgid(0, 0);  // a terminal's Ctrl-C reaches the client, which stops the daemon cleanly
    execvpe(cargv[0], cargv.data(), cenv.data());
    dprintf(2, "cannot execute %s: %s\n", cargv[0], std::strerror(errno));
    _exit(127);
  }
  if (log_fd >= 0) close(log_fd);
  d->pid_ = pid;
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  // Wait for READY=1, or the daemon's death, for at most 60 s.
  std::string error;
  for (;;) {
    pollfd fds[2] = {{notify, POLLIN, 0}, {pidfd, POLLIN, 0}};
    int n = poll(fds, pidfd >= 0 ? 2 : 1, 60000);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      error = "the local ckprofd did not become ready within 60 s";
      break;
    }
    if (fds[0].revents & POLLIN) {
      char buf[512];
      ssize_t got = recv(notify, buf, sizeof buf - 1, 0);
      if (got > 0 && std::string(buf, static_cast<size_t>(got)).find("READY=1") != std::string::npos) {
        break;
      }
    }
    if (pidfd >= 0 && (fds[1].revents & POLLIN)) {
      int status = 0;
      waitpid(pid, &status, 0);
      d->pid_ = -1;
      error = "the local ckprofd exited before it was ready:\n" + LogTail(d->log_);
      break;
    }
  }
  if (pidfd >= 0) close(pidfd);
  close(notify);
  if (!error.empty()) return MakeError(error);
  return d;
}

Status LocalDaemon::Stop() {
  if (pid_ <= 0) return Status::Ok();
  kill(pid_, SIGTERM);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  return MakeError("the local ckprofd did not stop cleanly:\n" + LogTail(log_));
}

LocalDaemon::~LocalDaemon() {
  (void)Stop();
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

}  // namespace ckprof

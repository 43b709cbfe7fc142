#include "daemon/spawn.h"

#include <fcntl.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

namespace ckprof {
namespace {

constexpr const char* kDroppedVariables[] = {"HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                                             "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"};
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CKPROF_SANITIZED 1
#else
#define CKPROF_SANITIZED 0
#endif

// The spawned child's stack, until it execs (sanitizer builds need more than a few KiB).
constexpr size_t kChildStackBytes = 256 * 1024;

// The child, between clone and exec: only async-signal-safe calls, and no glibc call that
// touches process-wide state (it is not a thread glibc knows of: setuid & co. are raw system
// calls, since glibc's wrappers would change the credentials of every thread of the daemon).
// Never returns.
int ChildMain(void* p) {
  auto* a = static_cast<ChildArgs*>(p);
  auto fail = [a](SpawnStage stage) {
    const SpawnError e{stage, errno};
    a->error = e;
    if (a->status_fd >= 0) {
      ssize_t ignored = write(a->status_fd, &e, sizeof e);
      (void)ignored;
    }
    _exit(127);
  };
  setpgid(0, 0);
  // Into the run's cgroup before anything else, so that all it starts is in there too.
  if (a->cgroup_fd >= 0) {
    char digits[24];
    char* end = digits + sizeof digits;
    char* p = end;
    for (long pid = syscall(SYS_getpid); pid > 0 || p == end; pid /= 10) *--p = '0' + pid % 10;
    if (write(a->cgroup_fd, p, static_cast<size_t>(end - p)) != end - p) {
      fail(SpawnStage::kCgroup);
    }
  }
  // A daemon given a higher CPU priority (Nice=-5 in its unit) runs profilers at the normal one.
  if (a->reset_nice) setpriority(PRIO_PROCESS, 0, 0);
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  // The pipes were made non-blocking for our ends; the profiler's ends block, as usual.
  if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(a->out_fd, 1) < 0 || dup2(a->err_fd, 2) < 0 ||
      fcntl(1, F_SETFL, 0) != 0 || fcntl(2, F_SETFL, 0) != 0) {
    fail(SpawnStage::kStdio);
  }
  if (a->set_groups && syscall(SYS_setgroups, a->n_groups, a->groups) != 0) {
    fail(SpawnStage::kGroups);
  }
  if (a->gid >= 0 && syscall(SYS_setgid, static_cast<gid_t>(a->gid)) != 0) fail(SpawnStage::kGid);
  // Everything above 2 closes at exec.
  if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    long max_fd = sysconf(_SC_OPEN_MAX);
    if (max_fd < 0 || max_fd > 65536) max_fd = 65536;
    for (int fd = 3; fd < max_fd; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  // The profiler's own file stays open for it: a script's interpreter reads it as /dev/fd/N.
  if (a->exec_fd >= 0 && fcntl(a->exec_fd, F_SETFD, 0) != 0) fail(SpawnStage::kStdio);
  if (a->helper != nullptr) {
    // Still root: the helper switches to the user; until it has, no user may signal it.
    if (a->status_fd >= 0 && fcntl(a->status_fd, F_SETFD, 0) != 0) fail(SpawnStage::kStdio);
    execve(a->helper, a->helper_argv, a->envp);
    fail(SpawnStage::kHelper);
  }
  if (a->uid >= 0 && syscall(SYS_setuid, static_cast<uid_t>(a->uid)) != 0) fail(SpawnStage::kUid);
  if (a->cwd != nullptr && a->cwd[0] != '\0' && chdir(a->cwd) != 0) fail(SpawnStage::kChdir);
  if (a->exec_fd >= 0) {
    execveat(a->exec_fd, "", a->argv, a->envp, AT_EMPTY_PATH);
  } else {
    execve(a->path, a->argv, a->envp);
  }
  fail(SpawnStage::kExec);
  return 127;  // not reached
}

}  // namespace

std::string SpawnErrorText(const ChildArgs& child) {
  const SpawnError& e = child.error;
  const std::string why = std::strerror(e.err);
  switch (e.stage) {
    case SpawnStage::kCgroup:
      return "cannot move the child into its cgroup: " + why;
    case SpawnStage::kStdio:
      return "cannot set up the child's stdin/stdout/stderr: " + why;
    case SpawnStage::kGroups:
      return "cannot set supplementary groups: " + why;
    case SpawnStage::kGid:
      return "cannot switch to gid " + std::to_string(child.gid) + ": " + why;
    case SpawnStage::kUid:
      return "cannot switch to uid " + std::to_string(child.uid) + ": " + why;
    case SpawnStage::kChdir:
      return "cannot change directory to " + std::string(child.cwd) + ": " + why;
    case SpawnStage::kExec:
      return "cannot execute " + std::string(child.path) + ": " + why;
    case SpawnStage::kHelper:
      return "cannot execute " + std::string(child.helper ? child.helper : "ckprofd-exec") +
             " (ckprofd's helper that starts profilers as their users; is ckprofd installed "
             "whole?): " +
             why;
    case SpawnStage::kNone:
      break;
  }
  return why;
}

std::vector<std::string> UserEnvironment(uint32_t uid, const std::vector<std::string>& ours,
                                         const std::vector<std::string>& pass) {
  std::vector<std::string> env;
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  const bool known =
      getpwuid_r(static_cast<uid_t>(uid), &pw, buf.data(), buf.size(), &found) == 0 &&
      found != nullptr;
  const std::string name = known && pw.pw_name ? pw.pw_name : std::to_string(uid);
  env.push_back("HOME=" + std::string(known && pw.pw_dir && *pw.pw_dir ? pw.pw_dir : "/"));
  env.push_back("USER=" + name);
  env.push_back("LOGNAME=" + name);
  env.push_back("SHELL=" +
                std::string(known && pw.pw_shell && *pw.pw_shell ? pw.pw_shell : "/bin/sh"));
  env.push_back(uid == 0 ? "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
                         : "PATH=/usr/local/bin:/usr/bin:/bin");
  std::string lang = "LANG=C.UTF-8";
  for (const auto& e : ours) {
    if (e.rfind("LANG=", 0) == 0) lang = e;
  }
  env.push_back(lang);
  auto passed = [&pass](std::string_view name) {
    for (const auto& p : pass) {
      if (!p.empty() && p.back() == '*') {
        if (name.substr(0, p.size() - 1) == std::string_view(p).substr(0, p.size() - 1))
          return true;
      } else if (name == p) {
        return true;
      }
    }
    return false;
  };
  for (const auto& e : ours) {
    const std::string_view name = std::string_view(e).substr(0, e.find('='));
    if (name == "LANG" || !passed(name)) continue;
    // One entry per name: a passed variable replaces the standard one (PATH, HOME, ...).
    std::erase_if(env, [&](const std::string& have) {
      return std::string_view(have).substr(0, have.find('=')) == name;
    });
    env.push_back(e);
  }
  return env;
}

std::string FindExecHelper() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  self[n] = '\0';
  std::string dir(self);
  dir.erase(dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
  for (const std::string& candidate :
       {dir + "/ckprofd-exec", dir + "/../libexec/ckprof/ckprofd-exec"}) {
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::vector<std::string> HelperArguments(const std::string& helper, const ChildArgs& child) {
  std::vector<std::string> args = {helper,
                                   std::to_string(child.status_fd),
                                   std::to_string(child.uid),
                                   child.cwd ? child.cwd : "",
                                   std::to_string(child.exec_fd),
                                   child.path ? child.path : "",
                                   "--"};
  for (char* const* a = child.argv; a && *a; ++a) args.emplace_back(*a);
  return args;
}

bool OwnNiceIsRaised() {
  // getpriority returns -1 both for nice -1 and for an error: errno tells.
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, 0);
  return errno == 0 && nice < 0;
}

std::vector<std::string> BuildChildEnvironment(
    const std::vector<std::string>& base,
    const std::vector<std::pair<std::string, std::string>>& set_env) {
  auto name_of = [](const std::string& entry) {
    return std::string_view(entry).substr(0, entry.find('='));
  };
  std::vector<std::string> env;
  env.reserve(base.size() + set_env.size());
  for (const auto& e : base) {
    std::string_view name = name_of(e);
    bool drop = std::any_of(std::begin(kDroppedVariables), std::end(kDroppedVariables),
                            [&](const char* d) { return name == d; }) ||
                std::any_of(set_env.begin(), set_env.end(),
                            [&](const auto& kv) { return name == kv.first; });
    if (!drop) env.push_back(e);
  }
  for (const auto& [k, v] : set_env) env.push_back(k + "=" + v);
  return env;
}

SpawnThread::SpawnThread() {
#if !CKPROF_SANITIZED
  stack_ = std::make_unique<char[]>(kChildStackBytes);
#endif
  thread_ = std::thread([this] { Loop(); });
}

SpawnThread::~SpawnThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void SpawnThread::Post(ChildArgs* child, Done done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Request{child, std::move(done)});
  }
  cv_.notify_one();
}

void SpawnThread::Loop() {
  for (;;) {
    Request req;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      req = std::move(queue_.front());
      queue_.pop_front();
    }
    int clone_errno = 0;
    const pid_t pid = Clone(*req.child, &clone_errno);
    req.done(pid, clone_errno);
  }
}

pid_t SpawnThread::Clone(ChildArgs& child, int* clone_errno) {
  // Signals stay blocked until the child has reset every handler (ours must not run in it).
  sigset_t all, old_mask;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old_mask);
#if CKPROF_SANITIZED
  // The sanitizers cannot follow a child running on a stack of ours: vfork, which they
  // intercept. TSan turns it into fork (no shared memory): the child's failure then reaches
  // the runner through the status pipe alone.
  pid_t pid = vfork();
  if (pid == 0) _exit(ChildMain(&child));
  // Where vfork became fork (TSan), the parent returns before the child has exec'd: a child
  // of our own (no helper: it never holds a user's uid) is waited for here until its exec
  // closes the pipe, as a vfork would, so that its failure and its pid come back together.
  // One that execs ckprofd-exec is not: the helper's exec of the profiler is its user's.
  if (pid > 0 && child.helper == nullptr && child.status_read_fd >= 0 && child.status_fd >= 0) {
    close(child.status_fd);
    child.status_fd = -1;
    SpawnError report;
    ssize_t got;
    while ((got = read(child.status_read_fd, &report, sizeof report)) < 0 && errno == EINTR) {
    }
    if (got == static_cast<ssize_t>(sizeof report)) child.error = report;
  }
#else
  pid_t pid =
      clone(ChildMain, stack_.get() + kChildStackBytes, CLONE_VM | CLONE_VFORK | SIGCHLD, &child);
#endif
  *clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  close(child.out_fd);
  close(child.err_fd);
  if (child.status_fd >= 0) close(child.status_fd);
  return pid;
}

}  // namespace ckprof

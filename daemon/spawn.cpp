#include "daemon/spawn.h"

#include <fcntl.h>
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
    if (a->report_fd >= 0) {
      ssize_t ignored = write(a->report_fd, &e, sizeof e);
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
  if (a->uid >= 0 && syscall(SYS_setuid, static_cast<uid_t>(a->uid)) != 0) fail(SpawnStage::kUid);
  if (a->cwd != nullptr && a->cwd[0] != '\0' && chdir(a->cwd) != 0) fail(SpawnStage::kChdir);
  // Everything above 2 closes at exec.
  if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    long max_fd = sysconf(_SC_OPEN_MAX);
    if (max_fd < 0 || max_fd > 65536) max_fd = 65536;
    for (int fd = 3; fd < max_fd; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  if (a->keep_fd >= 0 && fcntl(a->keep_fd, F_SETFD, 0) != 0) fail(SpawnStage::kStdio);
  execve(a->path, a->argv, a->envp);
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
    case SpawnStage::kNone:
      break;
  }
  return why;
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
  // intercept. TSan turns it into fork (no shared memory), so the child also reports a
  // failure through a CLOEXEC pipe, read until the exec closes it.
  int report_pipe[2];
  if (pipe2(report_pipe, O_CLOEXEC) == 0) child.report_fd = report_pipe[1];
  pid_t pid = vfork();
  if (pid == 0) _exit(ChildMain(&child));
  if (child.report_fd >= 0) {
    close(report_pipe[1]);
    SpawnError report;
    ssize_t got;
    while ((got = read(report_pipe[0], &report, sizeof report)) < 0 && errno == EINTR) {
    }
    if (got == static_cast<ssize_t>(sizeof report)) child.error = report;
    close(report_pipe[0]);
  }
#else
  pid_t pid =
      clone(ChildMain, stack_.get() + kChildStackBytes, CLONE_VM | CLONE_VFORK | SIGCHLD, &child);
#endif
  *clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  close(child.out_fd);
  close(child.err_fd);
  return pid;
}

}  // namespace ckprof

// Starting a profiler process: the child's setup between clone and exec, the environment it
// gets, and the thread that clones. The runner (daemon/runner.h) owns a run's lifecycle after
// that: pipes, exit, timeout, cancel.
//
// A child that is to run as another user never switches uid here: it execs ckprofd-exec
// (daemon/exec_helper.cpp) while still root, so no user can stop it while the spawn thread
// waits for its exec; the helper switches to the user, changes directory and execs the
// profiler, and reports a failure on the status pipe. Every child reports its failures there
// too; the pipe closes on the profiler's exec.
//
// Threading: SpawnThread's Post may be called from any one thread; the done callback runs on
// the spawn thread. ChildMain runs in the child only.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace ckprof {

// Where the child failed, if it could not exec.
enum class SpawnStage : int {
  kNone = 0,
  kCgroup,
  kStdio,
  kGroups,
  kGid,
  kUid,
  kChdir,
  kExec,
  kHelper  // ckprofd-exec could not be executed
};
struct SpawnError {
  SpawnStage stage = SpawnStage::kNone;
  int err = 0;
};

// What the child needs, prepared by the parent, and where it reports a failure. The child
// shares our memory (CLONE_VM) while we are suspended (CLONE_VFORK): it reads this in place and
// writes `error` before it exits; once the clone returns, the child has exec'd (the profiler,
// or ckprofd-exec) or exited. A failure is also written to `status_fd`.
struct ChildArgs {
  int out_fd = -1, err_fd = -1;  // the child's stdout and stderr (closed in the parent after)
  const char* path = nullptr;    // argv[0]
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  bool set_groups = false;  // replace the supplementary groups with `groups`
  const gid_t* groups = nullptr;
  size_t n_groups = 0;
  int64_t gid = -1, uid = -1;  // switch to these; -1 = keep ours
  const char* cwd = nullptr;   // change to it; null or "" = inherit
  int exec_fd = -1;            // execute the file open here (execveat) instead of `path`; -1 = path
  int cgroup_fd = -1;          // the run's cgroup.procs, open for writing; the child joins it
  bool reset_nice = false;     // run at nice 0 (the daemon's own may be raised)
  int status_fd = -1;          // the status pipe's write end (close-on-exec); -1 = none
  int status_read_fd = -1;     // its read end (the parent's; sanitizer builds read it: Clone)
  // ckprofd-exec and its arguments (see HelperArguments): set when the child is to switch to
  // `uid`; then the child leaves the uid and the directory to the helper.
  const char* helper = nullptr;
  char* const* helper_argv = nullptr;
  SpawnError error;
};

// What went wrong in the child, for the task's error: "cannot switch to uid 1001: ...".
std::string SpawnErrorText(const ChildArgs& child);

// ckprofd-exec beside the running program (or in ../libexec/ckprof/), "" when not found.
std::string FindExecHelper();

// ckprofd-exec's arguments for `child` (its status_fd, uid, cwd, exec_fd, path and argv, which
// must be set): "ckprofd-exec STATUS_FD UID CWD EXEC_FD PATH -- ARGV...".
std::vector<std::string> HelperArguments(const std::string& helper, const ChildArgs& child);

// True when this process runs at a raised CPU priority (a negative nice value).
bool OwnNiceIsRaised();

// Builds a child environment from `base` (KEY=VALUE strings, e.g. environ): drops
// HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES and GPU_DEVICE_ORDINAL, then
// sets each of `set_env` (replacing any value of the same name).
std::vector<std::string> BuildChildEnvironment(
    const std::vector<std::string>& base,
    const std::vector<std::pair<std::string, std::string>>& set_env);

// The environment a process run as another user (a root daemon's profiler or --on-end
// command) starts from, instead of the daemon's own: that user's HOME, USER, LOGNAME and SHELL
// (from the password database), a standard PATH, LANG (ours, else C.UTF-8), and the variables
// of `ours` (KEY=VALUE strings, e.g. environ) that `pass` names (the config's pass_env; "X_*"
// matches a prefix). Nothing else of the daemon's (its PATH, the unit's tokens) reaches them.
std::vector<std::string> UserEnvironment(uint32_t uid, const std::vector<std::string>& ours,
                                         const std::vector<std::string>& pass);

// The spawn thread. clone(CLONE_VM | CLONE_VFORK) suspends the calling thread until the child
// has exec'd: on a machine busy with the profilers themselves that is close to a millisecond per
// spawn, during which an io thread that spawned itself could neither reap the runs that end nor
// record them: the GPUs waited in turn. The child shares this thread's stack region and
// thread-local state (errno) only while this thread is suspended, as with posix_spawn.
class SpawnThread {
 public:
  // Called on the spawn thread once the clone returned: the child's pid (it has exec'd, or
  // failed and said why in ChildArgs::error), or -1 and the clone's errno.
  using Done = std::function<void(pid_t pid, int clone_errno)>;

  SpawnThread();
  // Finishes the clone in progress; those still queued are dropped (never cloned, done not
  // called).
  ~SpawnThread();
  SpawnThread(const SpawnThread&) = delete;
  SpawnThread& operator=(const SpawnThread&) = delete;

  // Queues a clone of `child` (which must stay valid until `done` is called, or this thread is
  // destroyed). Closes child->out_fd, err_fd and status_fd in the parent after the clone.
  void Post(ChildArgs* child, Done done);

 private:
  struct Request {
    ChildArgs* child = nullptr;
    Done done;
  };
  void Loop();
  pid_t Clone(ChildArgs& child, int* clone_errno);

  std::unique_ptr<char[]> stack_;  // the child's, until it execs (one spawn at a time)
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ckprof

// ckprofd-exec: the last step of starting a profiler as another user, in a process of its
// own. A root ckprofd's spawn thread is suspended from the clone until its child execs
// (CLONE_VFORK); a child that switched to the user's uid first could be stopped (SIGSTOP) by
// that user before its exec, and with it every later start, cancel and shutdown. So the child
// execs this program while still root (no user may signal it), and this program, sharing
// nothing with the daemon, switches to the user, changes to the working directory and
// executes the profiler. If it cannot, it writes what failed (a SpawnError, daemon/spawn.h)
// to STATUS_FD and exits 127; STATUS_FD closes on the profiler's exec, which tells the daemon
// that the profiler runs. A user who stops this process stops only their own task, which the
// daemon kills when it has not started by its deadline.
//
//   ckprofd-exec STATUS_FD UID CWD EXEC_FD PATH -- ARGV...
//
// CWD "" keeps the directory; EXEC_FD -1 executes PATH, else the file open on EXEC_FD (the
// build the daemon identified, whatever PATH now names). The environment is the profiler's.
// Supplementary groups and gid were set by the daemon's child before it exec'd this.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "daemon/spawn.h"

extern char** environ;

namespace {

[[noreturn]] void Fail(int status_fd, ckprof::SpawnStage stage) {
  const ckprof::SpawnError e{stage, errno};
  if (status_fd >= 0) {
    ssize_t ignored = write(status_fd, &e, sizeof e);
    (void)ignored;
  }
  _exit(127);
}

bool ParseInt(const char* text, long long* out) {
  char* end = nullptr;
  errno = 0;
  *out = std::strtoll(text, &end, 10);
  return errno == 0 && end != text && *end == '\0';
}

}  // namespace

int main(int argc, char** argv) {
  long long status_fd = -1, uid = -1, exec_fd = -1;
  if (argc < 8 || std::strcmp(argv[6], "--") != 0 || !ParseInt(argv[1], &status_fd) ||
      !ParseInt(argv[2], &uid) || !ParseInt(argv[4], &exec_fd)) {
    static const char kUsage[] =
        "ckprofd-exec: started by ckprofd to run a profiler as its user; not for direct use\n";
    ssize_t ignored = write(2, kUsage, sizeof kUsage - 1);
    (void)ignored;
    return 2;
  }
  const int status = static_cast<int>(status_fd);
  const char* cwd = argv[3];
  const char* path = argv[5];
  if (uid >= 0 &&
      setresuid(static_cast<uid_t>(uid), static_cast<uid_t>(uid), static_cast<uid_t>(uid)) != 0) {
    Fail(status, ckprof::SpawnStage::kUid);
  }
  if (cwd[0] != '\0' && chdir(cwd) != 0) Fail(status, ckprof::SpawnStage::kChdir);
  if (fcntl(status, F_SETFD, FD_CLOEXEC) != 0) Fail(status, ckprof::SpawnStage::kStdio);
  char** profiler_argv = argv + 7;
  if (exec_fd >= 0) {
    // The daemon opened the file with her filesystem rights (daemon/acting_as.h); opened
    // again through /proc as the user, so that she runs only what she may read (a script's
    // interpreter reads it through this descriptor, as /dev/fd/N). The same file, whatever
    // its path names now.
    char self_fd[64];
    std::snprintf(self_fd, sizeof self_fd, "/proc/self/fd/%lld", exec_fd);
    const int own = open(self_fd, O_RDONLY);
    if (own < 0) Fail(status, ckprof::SpawnStage::kExec);
    close(static_cast<int>(exec_fd));
    execveat(own, "", profiler_argv, environ, AT_EMPTY_PATH);
  } else {
    // The daemon could not open it with her rights (or it is no regular file): she runs only
    // what she may read here too.
    if (uid >= 0 && access(path, R_OK) != 0) Fail(status, ckprof::SpawnStage::kExec);
    execve(path, profiler_argv, environ);
  }
  Fail(status, ckprof::SpawnStage::kExec);
}

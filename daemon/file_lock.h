// FileLock: an exclusive advisory lock (flock) on a file, held until the FileLock is destroyed.
//
// ckprofd takes two kinds: one on its state dir for its whole life (two daemons on one state
// dir would take each other's running tasks for crash leftovers), and one per GPU on the host
// (lock_dir) while a profiler runs there, so that daemons with different state dirs — the
// system's and a user's `ckprof run --local` — never drive one GPU at once. Who holds a lock
// is read from the kernel's lock table (/proc/locks), never from the file: lock files hold no
// text, are made 0644 (a read-only descriptor can take a flock, so every user's daemon can
// still lock them) and are never handed to a profiler (a process that held the descriptor
// could release the lock with `flock -u`).
//
// Plain blocking calls that do not wait (LOCK_NB); any thread; a FileLock is a move-only value.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "common/result.h"

namespace ckprof {

// Who holds a lock, as the kernel's lock table says; pid 0 when it does not say.
struct LockHolder {
  pid_t pid = 0;
  int64_t uid = -1;  // the holder's real uid; -1 when unknown (it exited)
  // "ckprofd pid 4242 (alice)", "pid 4242 (alice, exited; a process it started holds it)" or
  // "another process".
  std::string Describe() const;
};

struct LockAttempt;

class FileLock {
 public:
  // Opens (creating it with `mode`, whatever the umask; a file of ours with more write bits
  // than `mode` gets `mode`) and tries to lock `path` without waiting. A file another user
  // created is opened without O_CREAT first, since the kernel's protected_regular refuses
  // O_CREAT on it in a sticky world-writable directory. Never follows a symlink.
  static LockAttempt TryAcquire(const std::string& path, mode_t mode = 0644);
  // Locks the directory `dir` itself (flock on a read-only descriptor of it), so that a lock
  // file removed from it under its holder does not free it for another. Busy says no holder.
  static LockAttempt TryAcquireDirectory(const std::string& dir);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

  // The locked descriptor (close-on-exec).
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  FileLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

// The outcome of FileLock::TryAcquire: the lock, or that another holds it (and who), or an error.
struct LockAttempt {
  std::optional<FileLock> lock;
  bool busy = false;
  LockHolder holder;  // when busy
  std::string error;  // neither: why the file could not be locked
};

// Makes `dir` (and missing parents) a directory every user's daemon can use for lock files:
// mode 1777 when we create it. Ok when it exists and we may create files in it.
Status PrepareLockDir(const std::string& dir);

}  // namespace ckprof

#include "daemon/file_lock.h"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "daemon/process_util.h"
#include "daemon/user_names.h"

namespace ckprof {
namespace {

LockHolder HolderOf(int fd) {
  LockHolder h;
  struct stat st {};
  if (fstat(fd, &st) != 0) return h;
  if (auto pid = FlockHolder(st.st_dev, st.st_ino); pid && *pid > 0) {
    h.pid = *pid;
    if (auto owner = ReadProcOwner(*pid)) h.uid = owner->uid;
  }
  return h;
}

// Opens the lock file read-only (enough for flock), creating it when missing. Our own file
// with write bits beyond `mode` (an older ckprofd made them 0666) is set to `mode`.
int OpenLockFile(const std::string& path, mode_t mode, std::string* error) {
  for (int tries = 0; tries < 3; ++tries) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd >= 0) {
      struct stat st {};
      if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        *error = "the lock file " + path + " is not a regular file";
        return -1;
      }
      if (st.st_uid == geteuid() && (st.st_mode & 0022 & ~mode) != 0) fchmod(fd, mode);
      return fd;
    }
    if (errno != ENOENT) break;
    fd = open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd >= 0) {
      fchmod(fd, mode);  // whatever the umask
      return fd;
    }
    if (errno != EEXIST) break;  // EEXIST: another made it meanwhile; open that one
  }
  *error = "cannot open the lock file " + path + ": " + std::strerror(errno);
  return -1;
}

}  // namespace

std::string LockHolder::Describe() const {
  if (pid <= 0) return "another process";
  std::string s = "pid " + std::to_string(pid);
  if (const std::string name = ProcessName(pid); !name.empty()) s = name + " " + s;
  std::vector<std::string> notes;
  if (uid >= 0) notes.push_back(UserNameOf(static_cast<uint32_t>(uid)));
  if (kill(pid, 0) != 0 && errno == ESRCH) notes.push_back("exited; a process it started holds it");
  for (size_t i = 0; i < notes.size(); ++i) s += (i ? ", " : " (") + notes[i];
  return notes.empty() ? s : s + ")";
}

LockAttempt FileLock::TryAcquire(const std::string& path, mode_t mode) {
  LockAttempt a;
  int fd = OpenLockFile(path, mode, &a.error);
  if (fd < 0) return a;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      a.busy = true;
      a.holder = HolderOf(fd);
    } else {
      a.error = "cannot lock " + path + ": " + std::strerror(errno);
    }
    close(fd);
    return a;
  }
  a.lock = FileLock(fd, path);
  return a;
}

LockAttempt FileLock::TryAcquireDirectory(const std::string& dir) {
  LockAttempt a;
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    a.error = "cannot open " + dir + ": " + std::strerror(errno);
    return a;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      a.busy = true;
      a.holder = HolderOf(fd);
    } else {
      a.error = "cannot lock " + dir + ": " + std::strerror(errno);
    }
    close(fd);
    return a;
  }
  a.lock = FileLock(fd, dir);
  return a;
}

FileLock::FileLock(FileLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) close(fd_);  // releases the lock unless a child shares the description
}

Status PrepareLockDir(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    const auto parent = std::filesystem::path(dir).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (mkdir(dir.c_str(), 01777) == 0) {
      chmod(dir.c_str(), 01777);  // whatever the umask: every user's daemon locks GPUs here
    } else if (errno != EEXIST) {
      return MakeError("cannot create the lock directory " + dir + ": " + std::strerror(errno));
    }
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return MakeError("cannot create lock files in " + dir + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace ckprof

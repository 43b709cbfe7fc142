#include "daemon/state_guard.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace ckprof {

Status StateGuard::Watch(const std::string& path, int fd, std::string consequence) {
  struct stat st {};
  if ((fd >= 0 ? fstat(fd, &st) : stat(path.c_str(), &st)) != 0) {
    return MakeError("state dir " + state_dir_ + ": cannot examine " + path + ": " +
                     std::strerror(errno));
  }
  files_.push_back({path, std::move(consequence), st.st_dev, st.st_ino});
  return Status::Ok();
}

Status StateGuard::Check(std::string* lost) const {
  for (const Watched& w : files_) {
    std::string what;
    struct stat st {};
    if (stat(w.path.c_str(), &st) != 0) {
      // Another error (EIO, ENOMEM) says nothing about which file the path names.
      if (errno != ENOENT && errno != ENOTDIR) continue;
      what = "was removed";
    } else if (st.st_dev != w.dev || st.st_ino != w.ino) {
      what = "was replaced by another file";
    }
    if (what.empty()) continue;
    if (lost) *lost = w.path;
    const auto slash = w.path.find_last_of('/');
    const std::string name = slash == std::string::npos ? w.path : w.path.substr(slash + 1);
    return MakeError("state dir " + state_dir_ + ": " + name + " " + what +
                     " under the running daemon; " + w.consequence);
  }
  return Status::Ok();
}

}  // namespace ckprof

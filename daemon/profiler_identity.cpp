#include "daemon/profiler_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace ckprof {

Result<uint64_t> HashFileContent(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return MakeError(path + ": cannot be read: " + std::strerror(errno));
  // Eight bytes at a time, multiplied and folded (as wyhash and xxHash mix words): a few GB/s,
  // so a 500 MB ckProfiler costs a fraction of a second, once per build.
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ULL;
  uint64_t h = 0xCBF29CE484222325ULL, total = 0;
  std::vector<unsigned char> buf(1 << 20);
  for (;;) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return MakeError(path + ": cannot be read: " + std::strerror(err));
    }
    if (n == 0) break;
    size_t len = static_cast<size_t>(n), i = 0;
    for (; i + 8 <= len; i += 8) {
      uint64_t w;
      std::memcpy(&w, buf.data() + i, 8);
      h = (h ^ w) * kMul;
      h ^= h >> 29;
    }
    for (; i < len; ++i) h = (h ^ buf[i]) * kMul;  // only at the file's end, in practice
    total += len;
  }
  close(fd);
  h ^= total;
  h *= kMul;
  h ^= h >> 32;
  return h;
}

Result<std::string> ProfilerIdentities::Of(const std::string& path) {
  char resolved[PATH_MAX];
  if (!realpath(path.c_str(), resolved)) {
    return MakeError(path + ": cannot be resolved: " + std::strerror(errno));
  }
  struct stat st {};
  if (stat(resolved, &st) != 0)
    return MakeError(std::string(resolved) + ": " + std::strerror(errno));
  auto ns = [](const timespec& t) {
    return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
  };
  const int64_t mtime_ns = ns(st.st_mtim), ctime_ns = ns(st.st_ctim);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(resolved);
    if (it != cache_.end() && it->second.size == st.st_size && it->second.mtime_ns == mtime_ns &&
        it->second.ctime_ns == ctime_ns && it->second.inode == st.st_ino) {
      return it->second.identity;
    }
  }
  // Hashed outside the lock: another thread's lookup of another build need not wait.
  auto hash = HashFileContent(resolved);
  if (!hash) return Error{hash.error()};
  char text[160];
  std::snprintf(text, sizeof text, " size=%lld mtime=%lld.%09lld hash=%016llx",
                static_cast<long long>(st.st_size), static_cast<long long>(st.st_mtim.tv_sec),
                static_cast<long long>(st.st_mtim.tv_nsec), static_cast<unsigned long long>(*hash));
  std::string identity = std::string(resolved) + text;
  std::lock_guard<std::mutex> lock(mu_);
  cache_[resolved] = Entry{st.st_size, mtime_ns, ctime_ns, st.st_ino, identity};
  return identity;
}

}  // namespace ckprof

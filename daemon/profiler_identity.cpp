#include "daemon/profiler_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace ckprof {

namespace {

int64_t Nanoseconds(const timespec& t) {
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

}  // namespace

bool WritableBy(const struct stat& st, uint32_t uid, uint32_t gid,
                const std::vector<uint32_t>& groups) {
  if (st.st_uid == uid) return true;  // its owner may chmod it
  if (st.st_mode & S_IWOTH) return true;
  if (st.st_mode & S_IWGRP) {
    if (st.st_gid == gid) return true;
    for (uint32_t g : groups) {
      if (g == st.st_gid) return true;
    }
  }
  return false;
}

bool ProfilerIdentities::Entry::Matches(const struct stat& st) const {
  return size == st.st_size && mtime_ns == Nanoseconds(st.st_mtim) &&
         ctime_ns == Nanoseconds(st.st_ctim) && inode == st.st_ino && device == st.st_dev;
}

Result<uint64_t> HashFileContent(const std::string& path) {
  // Non-blocking: a FIFO put where a profiler should be must not hang the open.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return MakeError(path + ": cannot be read: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return MakeError(path + ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxIdentifiedBytes) {
    close(fd);
    return MakeError(path + ": too large to identify (" + std::to_string(st.st_size) +
                     " bytes; at most " + std::to_string(kMaxIdentifiedBytes >> 30) +
                     " GiB are hashed): it runs, but its results are not reused or shared");
  }
  // Eight bytes at a time, multiplied and folded (as wyhash and xxHash mix words): a few GB/s,
  // so a 500 MB ckProfiler costs a fraction of a second, once per build.
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ULL;
  uint64_t h = 0xCBF29CE484222325ULL, total = 0;
  std::vector<unsigned char> buf(1 << 20);
  // At most the size it had when opened (a file that grows meanwhile is not read forever).
  const uint64_t limit = static_cast<uint64_t>(st.st_size);
  for (;;) {
    if (total >= limit) break;
    ssize_t n = read(fd, buf.data(), std::min<uint64_t>(buf.size(), limit - total));
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
  const int64_t mtime_ns = Nanoseconds(st.st_mtim), ctime_ns = Nanoseconds(st.st_ctim);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(resolved);
    if (it != cache_.end() && it->second.Matches(st)) return it->second.identity;
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
  cache_[resolved] = Entry{st.st_size, mtime_ns, ctime_ns, st.st_dev, st.st_ino, identity};
  return identity;
}

std::optional<std::string> ProfilerIdentities::Cached(const std::string& path) {
  char resolved[PATH_MAX];
  struct stat st {};
  if (!realpath(path.c_str(), resolved) || stat(resolved, &st) != 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(resolved);
  if (it == cache_.end() || !it->second.Matches(st)) return std::nullopt;
  return it->second.identity;
}

std::optional<std::string> ProfilerIdentities::OfOpenFile(int fd) {
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [path, entry] : cache_) {
    if (entry.Matches(st)) return entry.identity;
  }
  return std::nullopt;
}

}  // namespace ckprof

// ProfilerIdentities: which build of the CK profiler an executable is, for reuse (submit
// --reuse) and the tuning table. A build is its resolved path, size, modification time and a
// hash of its content; the hash is computed once per build (cached by path, size, mtime, ctime
// and inode: ctime changes with every write and cannot be set back, as mtime can) and again
// only when the file changes. Any thread may call Of (a mutex guards the
// cache); the first call for a build reads the whole file, so the daemon makes it on its
// conversion pool at submit, and the io thread's later calls find it cached.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/result.h"

namespace ckprof {

// A 64-bit hash of a file's bytes, stable across runs and builds of ckprofd (the Store keeps
// it). Not cryptographic: it tells builds apart, it does not authenticate them.
Result<uint64_t> HashFileContent(const std::string& path);

class ProfilerIdentities {
 public:
  // "/opt/rocm/bin/ckProfiler size=412345678 mtime=1764590000.123456789 hash=0123456789abcdef",
  // or why the file cannot be identified (then nothing is reused or recorded for it).
  Result<std::string> Of(const std::string& path);

 private:
  struct Entry {
    off_t size = 0;
    int64_t mtime_ns = 0, ctime_ns = 0;
    ino_t inode = 0;
    std::string identity;
  };
  std::mutex mu_;
  std::unordered_map<std::string, Entry> cache_;  // by resolved path
};

}  // namespace ckprof

// ProfilerIdentities: which build of the CK profiler an executable is, for reuse (submit
// --reuse) and the tuning table. A build is its resolved path, size, modification time and a
// hash of its content; the hash is computed once per build (cached by path, device, inode,
// size, mtime and ctime: ctime changes with every write and cannot be set back, as mtime can)
// and again only when the file changes. A file over kMaxIdentifiedBytes is not hashed: it
// runs, but is not identified, so its results are neither reused nor shared.
//
// Of reads the file and may take a while: only the daemon's conversion pool calls it (at
// submit). The io thread asks Cached and OfOpenFile, which never read a file: a build not
// hashed yet (or changed since) is then unknown. Any thread; a mutex guards the cache.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.h"

namespace ckprof {

// The largest profiler that is hashed (a ckProfiler with every instance is ~0.5 GB).
inline constexpr uint64_t kMaxIdentifiedBytes = uint64_t{2} << 30;

// A 64-bit hash of a file's bytes, stable across runs and builds of ckprofd (the Store keeps
// it). Not cryptographic: it tells builds apart, it does not authenticate them. Refuses a
// file over kMaxIdentifiedBytes, or one that is not a regular file.
Result<uint64_t> HashFileContent(const std::string& path);

// True when the user (uid, gid, groups) could change the file that `st` describes: they own
// it, or a write bit of its group (theirs) or of others is set. A file its user can change may
// hold anything by the time it runs again: its measurements are not shared.
bool WritableBy(const struct stat& st, uint32_t uid, uint32_t gid,
                const std::vector<uint32_t>& groups);

class ProfilerIdentities {
 public:
  // "/opt/rocm/bin/ckProfiler size=412345678 mtime=1764590000.123456789 hash=0123456789abcdef",
  // or why the file cannot be identified (then nothing is reused or recorded for it). Reads
  // the whole file the first time: never on the io thread.
  Result<std::string> Of(const std::string& path);
  // The identity of `path` when the file it resolves to was identified by Of and has not
  // changed since; never reads it.
  std::optional<std::string> Cached(const std::string& path);
  // The identity of the file open on `fd` (the executable a run executed) when Of identified
  // that very file (device, inode) and it has not changed since; never reads it.
  std::optional<std::string> OfOpenFile(int fd);

 private:
  struct Entry {
    off_t size = 0;
    int64_t mtime_ns = 0, ctime_ns = 0;
    dev_t device = 0;
    ino_t inode = 0;
    std::string identity;
    bool Matches(const struct stat& st) const;
  };
  std::mutex mu_;
  std::unordered_map<std::string, Entry> cache_;  // by resolved path
};

}  // namespace ckprof

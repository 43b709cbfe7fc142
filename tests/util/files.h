// Files for the tests: where the test data and the built programs are, a temporary directory
// per test, and reading and writing whole files. Test threads only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace ckprof::testing {

// Path of a file under tests/data.
std::string DataPath(const std::string& name);
// Path of a built binary under build/bin.
std::string BinPath(const std::string& name);
// The same binary (ckprof, ckprofd, ckprofiler-emu or status_probe) where every user may run it,
// for what tests run as other users: the build tree may sit under a directory they cannot enter (a
// clone in a 0700 home). A hard link (else a copy) in a world-readable temporary directory,
// made once per test process with its companions, removed at exit.
std::string SharedBinPath(const std::string& name);

// A whole file's content; throws when it cannot be read.
std::string ReadFile(const std::string& path);
// Replaces (or creates) a file with `content`; throws when it cannot be written.
void WriteFile(const std::string& path, const std::string& content);

// A fresh directory under $TMPDIR, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Waits until done() holds, asking again at each inotify event `mask` in `dir` (and every
// 100 ms should one be missed), for at most `timeout_s`; whether it held.
bool WaitInDir(const std::string& dir, uint32_t mask, const std::function<bool()>& done,
               double timeout_s);
// Waits until `path` is gone (a deletion in its parent directory), for at most `timeout_s`.
bool WaitForGone(const std::string& path, double timeout_s = 30);

}  // namespace ckprof::testing

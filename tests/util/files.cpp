#include "tests/util/files.h"

#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace ckprof::testing {

std::string DataPath(const std::string& name) {
  return std::string(CKPROF_TEST_DATA_DIR) + "/" + name;
}

std::string BinPath(const std::string& name) { return std::string(CKPROF_BIN_DIR) + "/" + name; }

namespace {

// The directory of SharedBinPath's links: made on first use, removed at exit.
class SharedBinDir {
 public:
  SharedBinDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/ckprof-test-bin-XXXXXX";
    if (!mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed for the shared binaries");
    path_ = templ;
    chmod(path_.c_str(), 0755);
    for (const char* name :
         {"ckprof", "ckprofd", "ckprofd-exec", "ckprofiler-emu", "status_probe", "ckprof-agent"}) {
      const std::string from = BinPath(name), to = path_ + "/" + name;
      std::error_code ec;
      // The emulator is copied: a hard link changes its inode's ctime, and a profiler build
      // whose ctime changed since its submit is not recorded for reuse (ProfilerIdentities),
      // so the tests running beside this one would lose their measurements.
      const bool copy = std::string(name) == "ckprofiler-emu";
      if (copy || link(from.c_str(), to.c_str()) != 0) {
        std::filesystem::copy_file(from, to, ec);
        chmod(to.c_str(), 0755);
      }
    }
  }
  ~SharedBinDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

std::string SharedBinPath(const std::string& name) {
  static SharedBinDir dir;
  return dir.path() + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << content;
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/ckprof-test-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

bool WaitInDir(const std::string& dir, uint32_t mask, const std::function<bool()>& done,
               double timeout_s) {
  const int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (fd >= 0) inotify_add_watch(fd, dir.empty() ? "." : dir.c_str(), mask);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  bool held = false;
  while (!(held = done())) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p = {fd, POLLIN, 0};
    poll(&p, fd >= 0 ? 1 : 0, static_cast<int>(std::min<int64_t>(left.count(), 100)));
    char events[4096];
    while (fd >= 0 && read(fd, events, sizeof events) > 0) {
    }
  }
  if (fd >= 0) close(fd);
  return held;
}

bool WaitForGone(const std::string& path, double timeout_s) {
  struct stat st {};
  return WaitInDir(
      std::filesystem::path(path).parent_path().string(), IN_DELETE | IN_MOVED_FROM,
      [&] { return lstat(path.c_str(), &st) != 0; }, timeout_s);
}

}  // namespace ckprof::testing

#include "daemon/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <sstream>
#include <string_view>
#include <vector>

#include "daemon/process_util.h"

namespace ckprof {
namespace {

// Writes `text` to a cgroup file; the errno text when it fails.
Status WriteFile(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return MakeError(path + ": " + std::strerror(errno));
  const ssize_t n = write(fd, text.data(), text.size());
  const int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(text.size())) return MakeError(path + ": " + std::strerror(err));
  return Status::Ok();
}

// "key value" lines read from an open cgroup file (cpu.stat, cgroup.events): the value of
// `key`; nullopt when absent or when the file cannot be read (its cgroup was removed).
std::optional<uint64_t> KeyValueAt(int fd, std::string_view key) {
  if (fd < 0) return std::nullopt;
  char buf[2048];
  ssize_t n;
  while ((n = pread(fd, buf, sizeof buf, 0)) < 0 && errno == EINTR) {
  }
  if (n <= 0) return std::nullopt;
  std::string_view text(buf, static_cast<size_t>(n));
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      uint64_t v = 0;
      const std::string_view digits = line.substr(key.size() + 1);
      if (std::from_chars(digits.data(), digits.data() + digits.size(), v).ec != std::errc()) {
        return std::nullopt;
      }
      return v;
    }
  }
  return std::nullopt;
}

// Idle cgroups kept for the next runs at most (one per GPU is what a daemon needs).
constexpr size_t kMaxPooled = 64;

// Names the runs' cgroups run-<pid>-<n>: one count for every TaskCgroups of this process, so
// that two (tests) never make the same.
std::atomic<uint64_t> g_cgroups_made{0};

bool HasController(const std::string& dir, const std::string& name) {
  std::istringstream in(ReadKernelFile(dir + "/cgroup.controllers"));
  std::string c;
  while (in >> c) {
    if (c == name) return true;
  }
  return false;
}

}  // namespace

std::string OwnCgroupDir() {
  std::string mount;
  std::istringstream mounts(ReadKernelFile("/proc/self/mountinfo"));
  for (std::string line; std::getline(mounts, line);) {
    // "... <mount point> <options> - <fstype> <source> <super options>"
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string f, point;
    for (int i = 0; i < 5 && fields >> f; ++i) point = f;
    mount = point;
    break;
  }
  if (mount.empty()) return "";
  std::string path = ProcessCgroupPath(getpid());
  if (path.empty()) return "";
  if (path == "/") path.clear();
  return mount + path;
}

Result<std::unique_ptr<TaskCgroups>> TaskCgroups::Open(uint64_t memory_max, std::string* note) {
  const std::string own = OwnCgroupDir();
  if (own.empty()) return MakeError("no cgroup v2 (unified) hierarchy is mounted");
  const std::string parent = own + "/ckprofd-runs";
  std::string runs_path = ProcessCgroupPath(getpid());
  if (runs_path == "/") runs_path.clear();
  runs_path += "/ckprofd-runs";
  if (mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
    return MakeError("cannot make " + parent + ": " + std::strerror(errno) +
                     " (run ckprofd as root, or under systemd with Delegate=yes)");
  }
  if (access((parent + "/cgroup.procs").c_str(), W_OK) != 0) {
    return MakeError(parent + " is not writable: " + std::strerror(errno));
  }
  // What a daemon that died left: its runs' cgroups (run-<daemon pid>-<run>) go once empty
  // (recovery stops what runs in them). Those of a live daemon sharing this cgroup are its own.
  if (DIR* d = opendir(parent.c_str())) {
    while (dirent* e = readdir(d)) {
      if (std::strncmp(e->d_name, "run-", 4) != 0) continue;
      const long owner = std::strtol(e->d_name + 4, nullptr, 10);
      if (owner > 0 && owner != getpid() &&
          (kill(static_cast<pid_t>(owner), 0) == 0 || errno == EPERM)) {
        continue;  // a live daemon's (EPERM: of another user)
      }
      rmdir((parent + "/" + e->d_name).c_str());
    }
    closedir(d);
  }
  uint64_t limit = 0;
  std::string memory = "no memory controller in " + own + ": runs are not limited";
  if (memory_max > 0 && HasController(own, "memory")) {
    // A cgroup that gives its children controllers holds no process itself: the daemon moves
    // into a leaf of its own first.
    Status enabled = WriteFile(own + "/cgroup.subtree_control", "+memory");
    if (!enabled) {
      const std::string leaf = own + "/ckprofd-daemon";
      if (mkdir(leaf.c_str(), 0755) == 0 || errno == EEXIST) {
        if (WriteFile(leaf + "/cgroup.procs", std::to_string(getpid()))) {
          enabled = WriteFile(own + "/cgroup.subtree_control", "+memory");
        }
      }
    }
    if (enabled) enabled = WriteFile(parent + "/cgroup.subtree_control", "+memory");
    if (enabled) {
      limit = memory_max;
      memory = "each run limited to " + std::to_string(memory_max >> 20) + " MiB";
    } else {
      memory =
          "the memory controller cannot be enabled (" + enabled.error() + "): runs are not limited";
    }
  } else if (memory_max == 0) {
    memory = "no memory limit (task_memory_max)";
  }
  *note = "each run in its own cgroup under " + parent + "; " + memory;
  return std::unique_ptr<TaskCgroups>(new TaskCgroups(parent, runs_path, limit));
}

bool RunCgroup::Kill() const {
  if (kill_.get() < 0) return false;
  return pwrite(kill_.get(), "1", 1, 0) == 1;
}

bool RunCgroup::Empty() const {
  const auto populated = KeyValueAt(events_.get(), "populated");
  return !populated || *populated == 0;
}

RunCgroup::Usage RunCgroup::Read() const {
  Usage u;
  if (auto usec = KeyValueAt(cpu_stat_.get(), "usage_usec")) {
    u.cpu_s = static_cast<double>(*usec >= cpu_base_usec_ ? *usec - cpu_base_usec_ : 0) / 1e6;
  }
  if (memory_peak_.get() >= 0) {
    char buf[32];
    const ssize_t n = pread(memory_peak_.get(), buf, sizeof buf - 1, 0);
    if (n > 0) {
      buf[n] = '\0';
      u.peak_memory_bytes = std::strtoull(buf, nullptr, 10);
    }
  }
  return u;
}

TaskCgroups::~TaskCgroups() {
  for (auto& cg : pool_) {
    const std::string dir = cg->dir();
    cg.reset();  // its files closed first
    rmdir(dir.c_str());
  }
  for (const auto& dir : retired_) rmdir(dir.c_str());
}

Result<std::unique_ptr<RunCgroup>> TaskCgroups::Make() {
  const std::string dir =
      parent_ + "/run-" + std::to_string(getpid()) + "-" + std::to_string(++g_cgroups_made);
  int made = mkdir(dir.c_str(), 0755);
  if (made != 0 && errno == ENOENT) {  // the parent was removed under us: made again
    mkdir(parent_.c_str(), 0755);
    made = mkdir(dir.c_str(), 0755);
  }
  if (made != 0 && errno == EEXIST && rmdir(dir.c_str()) == 0) {
    made = mkdir(dir.c_str(), 0755);  // a leftover's counts are not this run's
  }
  if (made != 0) return MakeError("cannot make " + dir + ": " + std::strerror(errno));
  std::unique_ptr<RunCgroup> cg(new RunCgroup(dir));
  const UniqueFd at(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  auto file = [&at](const char* name, int flags) {
    return UniqueFd(at.get() < 0 ? -1 : openat(at.get(), name, flags | O_CLOEXEC));
  };
  if (memory_max_ > 0) {
    if (Status s = WriteFile(dir + "/memory.max", std::to_string(memory_max_)); !s) {
      rmdir(dir.c_str());
      return MakeError("cannot limit the run's memory: " + s.error());
    }
  }
  cg->procs_ = file("cgroup.procs", O_WRONLY);
  if (cg->procs_.get() < 0) {
    const std::string why = std::strerror(errno);
    cg.reset();
    rmdir(dir.c_str());
    return MakeError("cannot open " + dir + "/cgroup.procs: " + why);
  }
  cg->kill_ = file("cgroup.kill", O_WRONLY);  // none before Linux 5.14: process groups alone
  cg->events_ = file("cgroup.events", O_RDONLY);
  cg->cpu_stat_ = file("cpu.stat", O_RDONLY);
  cg->memory_peak_ = file("memory.peak", O_RDONLY);
  const bool memory_controller =
      cg->memory_peak_.get() >= 0 || faccessat(at.get(), "memory.current", F_OK, 0) == 0;
  cg->reusable_ = !memory_controller && cg->events_.get() >= 0;
  return cg;
}

Result<std::unique_ptr<RunCgroup>> TaskCgroups::Acquire() {
  if (!retired_.empty()) RemoveRetired();
  while (!pool_.empty()) {
    std::unique_ptr<RunCgroup> cg = std::move(pool_.back());
    pool_.pop_back();
    // Nothing of ours puts a process into an idle cgroup; one found there anyway (or a cgroup
    // removed under us) is not used again.
    const auto populated = KeyValueAt(cg->events_.get(), "populated");
    if (populated && *populated == 0) {
      cg->cpu_base_usec_ = KeyValueAt(cg->cpu_stat_.get(), "usage_usec").value_or(0);
      return cg;
    }
    if (populated) {
      cg->Kill();
      retired_.push_back(cg->dir());
    }
  }
  return Make();
}

void TaskCgroups::Release(std::unique_ptr<RunCgroup> cg) {
  if (!cg) return;
  const bool empty = cg->Empty();
  if (cg->reusable_ && empty && pool_.size() < kMaxPooled) {
    pool_.push_back(std::move(cg));
    return;
  }
  if (!empty) cg->Kill();  // still dying: removed once it is empty
  const std::string dir = cg->dir();
  cg.reset();
  if (rmdir(dir.c_str()) != 0 && errno != ENOENT) {
    if (errno != EBUSY)
      spdlog::warn("cannot remove the run's cgroup {}: {}", dir, std::strerror(errno));
    retired_.push_back(dir);
  }
}

void TaskCgroups::RemoveRetired() {
  std::erase_if(retired_,
                [](const std::string& dir) { return rmdir(dir.c_str()) == 0 || errno == ENOENT; });
}

}  // namespace ckprof

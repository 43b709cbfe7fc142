#include "daemon/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
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

// "key value" lines (cpu.stat, cgroup.events): the value of `key`, or nullopt.
std::optional<uint64_t> KeyValue(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return std::nullopt;
}

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
  std::istringstream groups(ReadKernelFile("/proc/self/cgroup"));
  for (std::string line; std::getline(groups, line);) {
    if (line.rfind("0::", 0) == 0) {
      std::string path = line.substr(3);
      if (path == "/") path.clear();
      return mount + path;
    }
  }
  return "";
}

Result<std::unique_ptr<TaskCgroups>> TaskCgroups::Open(uint64_t memory_max, std::string* note) {
  const std::string own = OwnCgroupDir();
  if (own.empty()) return MakeError("no cgroup v2 (unified) hierarchy is mounted");
  const std::string parent = own + "/ckprofd-runs";
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
  return std::unique_ptr<TaskCgroups>(new TaskCgroups(parent, limit));
}

Result<std::string> TaskCgroups::Create(const std::string& name) {
  const std::string dir = parent_ + "/" + name;
  int made = mkdir(dir.c_str(), 0755);
  if (made != 0 && errno == ENOENT) {  // the parent was removed under us: made again
    mkdir(parent_.c_str(), 0755);
    made = mkdir(dir.c_str(), 0755);
  }
  if (made != 0 && errno == EEXIST && rmdir(dir.c_str()) == 0) {
    made = mkdir(dir.c_str(), 0755);  // a leftover's counts are not this run's
  }
  if (made != 0) return MakeError("cannot make " + dir + ": " + std::strerror(errno));
  if (memory_max_ > 0) {
    if (Status s = WriteFile(dir + "/memory.max", std::to_string(memory_max_)); !s) {
      rmdir(dir.c_str());
      return MakeError("cannot limit the run's memory: " + s.error());
    }
  }
  return dir;
}

bool TaskCgroups::Kill(const std::string& dir) const {
  return WriteFile(dir + "/cgroup.kill", "1").ok();
}

bool TaskCgroups::Empty(const std::string& dir) const {
  const auto populated = KeyValue(ReadKernelFile(dir + "/cgroup.events"), "populated");
  return !populated || *populated == 0;
}

TaskCgroups::Usage TaskCgroups::Read(const std::string& dir) const {
  Usage u;
  if (auto usec = KeyValue(ReadKernelFile(dir + "/cpu.stat"), "usage_usec")) {
    u.cpu_s = static_cast<double>(*usec) / 1e6;
  }
  const std::string peak = ReadKernelFile(dir + "/memory.peak");
  if (!peak.empty()) u.peak_memory_bytes = std::strtoull(peak.c_str(), nullptr, 10);
  return u;
}

bool TaskCgroups::Remove(const std::string& dir) const { return rmdir(dir.c_str()) == 0; }

}  // namespace ckprof

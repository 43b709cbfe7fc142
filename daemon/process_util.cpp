#include "daemon/process_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>

namespace ckprof {
namespace {

// Calls `visit` with each process id under /proc; false when /proc cannot be read.
template <typename Visit>
bool ForEachProcess(Visit&& visit) {
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return false;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    visit(static_cast<pid_t>(pid));
  }
  closedir(dir);
  return true;
}

}  // namespace

// Plain read(2): a process that exits mid-read makes the read fail with ESRCH, which a stream
// would turn into an exception.
std::string ReadKernelFile(const std::string& path) {
  std::string out;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  const std::string text = ReadKernelFile("/proc/" + std::to_string(pid) + "/stat");
  // "pid (comm) S ppid pgrp ...": comm may hold spaces and parentheses; use the last ')'.
  const auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return std::nullopt;
  std::istringstream fields(text.substr(close + 2));
  ProcStat st;
  fields >> st.state >> st.ppid >> st.pgrp;
  if (!fields) return std::nullopt;
  // Fields 6 to 17 (1-based, of the whole line): session ... cstime; 14-17 are CPU ticks.
  std::string f;
  double ticks[4] = {0, 0, 0, 0};
  for (int i = 6; i <= 17 && fields >> f; ++i) {
    if (i >= 14) ticks[i - 14] = std::atof(f.c_str());
  }
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  st.utime_s = ticks[0] / hz;
  st.stime_s = ticks[1] / hz;
  st.cutime_s = ticks[2] / hz;
  st.cstime_s = ticks[3] / hz;
  return st;
}

bool ProcessIsLive(pid_t pid) {
  auto st = ReadProcStat(pid);
  return st && st->state != 'Z' && st->state != 'X';
}

int64_t ProcStatusKiB(pid_t pid, const std::string& field) {
  std::istringstream in(ReadKernelFile("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0)
      return std::strtoll(line.c_str() + field.size() + 1, nullptr, 10);
  }
  return -1;
}

std::string ProcessCgroupPath(pid_t pid) {
  const std::string text = ReadKernelFile("/proc/" + std::to_string(pid) + "/cgroup");
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    if (text.compare(pos, 3, "0::") == 0) return text.substr(pos + 3, end - pos - 3);
    pos = end + 1;
  }
  return "";
}

bool ProcessHasEnv(pid_t pid, const std::string& entry) {
  const std::string env = ReadKernelFile("/proc/" + std::to_string(pid) + "/environ");
  const std::string needle = '\0' + entry + '\0';
  // The entry is whole: first in the block, or between two NULs.
  return env.find(needle) != std::string::npos ||
         env.compare(0, entry.size() + 1, needle, 1, entry.size() + 1) == 0;
}

std::vector<pid_t> ProcessesWithEnv(const std::string& entry) {
  std::vector<pid_t> out;
  const pid_t self = getpid();
  ForEachProcess([&](pid_t pid) {
    if (pid <= 1 || pid == self) return;
    if (ProcessHasEnv(pid, entry)) out.push_back(pid);
  });
  return out;
}

std::optional<pid_t> FlockHolder(dev_t device, ino_t inode) {
  // "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF"; a waiter's line has "->" after the
  // number. Device numbers are hex major:minor.
  const std::string table = ReadKernelFile("/proc/locks");
  size_t pos = 0;
  while (pos < table.size()) {
    size_t end = table.find('\n', pos);
    if (end == std::string::npos) end = table.size();
    const std::string line = table.substr(pos, end - pos);
    pos = end + 1;
    if (line.find("->") != std::string::npos || line.find("FLOCK") == std::string::npos) continue;
    char kind[16], mode[16], access[16];
    long long pid = 0;
    unsigned major = 0, minor = 0;
    unsigned long long ino = 0;
    if (std::sscanf(line.c_str(), "%*d: %15s %15s %15s %lld %x:%x:%llu", kind, mode, access, &pid,
                    &major, &minor, &ino) != 7) {
      continue;
    }
    if (ino == inode && makedev(major, minor) == device) return static_cast<pid_t>(pid);
  }
  return std::nullopt;
}

std::optional<ProcOwner> ReadProcOwner(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  const std::string status = ReadKernelFile(dir + "/status");
  const size_t at = status.find("\nUid:");
  if (at == std::string::npos) return std::nullopt;
  ProcOwner o;
  o.uid = static_cast<uint32_t>(std::strtoul(status.c_str() + at + 5, nullptr, 10));
  std::string cmdline = ReadKernelFile(dir + "/cmdline");
  while (!cmdline.empty() && cmdline.back() == '\0') cmdline.pop_back();
  for (char& c : cmdline) {
    if (c == '\0') c = ' ';
  }
  if (cmdline.empty()) cmdline = ProcessName(pid);
  o.command = std::move(cmdline);
  return o;
}

std::string ProcessName(pid_t pid) {
  std::string name = ReadKernelFile("/proc/" + std::to_string(pid) + "/comm");
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return name;
}

std::vector<pid_t> LiveProcessesInGroup(pid_t pgid) {
  std::vector<pid_t> out;
  if (pgid <= 0) return out;
  const bool read = ForEachProcess([&](pid_t pid) {
    auto st = ReadProcStat(pid);
    if (st && st->pgrp == pgid && st->state != 'Z' && st->state != 'X') out.push_back(pid);
  });
  if (!read && (kill(-pgid, 0) == 0 || errno == EPERM)) out.push_back(pgid);
  return out;
}

bool ProcessGroupAlive(pid_t pgid) { return !LiveProcessesInGroup(pgid).empty(); }

Status KillProcessGroupAndWait(pid_t pgid, std::chrono::milliseconds grace) {
  if (pgid <= 1) return MakeError("refusing to signal process group " + std::to_string(pgid));
  using Clock = std::chrono::steady_clock;
  auto wait_until_gone = [pgid](Clock::time_point deadline) {
    for (;;) {
      if (!ProcessGroupAlive(pgid)) return true;
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  if (!ProcessGroupAlive(pgid)) return Status::Ok();
  if (kill(-pgid, SIGTERM) != 0 && errno != ESRCH) {
    return MakeError("cannot signal process group " + std::to_string(pgid) + ": " +
                     std::strerror(errno));
  }
  if (grace.count() > 0 && wait_until_gone(Clock::now() + grace)) return Status::Ok();
  if (kill(-pgid, SIGKILL) != 0 && errno != ESRCH) {
    return MakeError("cannot kill process group " + std::to_string(pgid) + ": " +
                     std::strerror(errno));
  }
  if (wait_until_gone(Clock::now() + std::chrono::seconds(5))) return Status::Ok();
  std::string pids;
  for (pid_t p : LiveProcessesInGroup(pgid)) pids += " " + std::to_string(p);
  return MakeError("process group " + std::to_string(pgid) +
                   " still has live processes after SIGKILL:" + pids);
}

}  // namespace ckprof

#include "daemon/process_util.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

namespace ckprof {
namespace {

// Reads the state and process group of /proc/<pid>/stat. False when it cannot.
bool ReadStat(pid_t pid, char* state, pid_t* pgrp) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "re");
  if (f == nullptr) return false;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // "pid (comm) S ppid pgrp ...": comm may hold spaces and parentheses; use the last ')'.
  char* close = std::strrchr(buf, ')');
  if (close == nullptr) return false;
  int ppid = 0, group = 0;
  if (std::sscanf(close + 1, " %c %d %d", state, &ppid, &group) != 3) return false;
  *pgrp = group;
  return true;
}

}  // namespace

std::vector<pid_t> LiveProcessesInGroup(pid_t pgid) {
  std::vector<pid_t> out;
  if (pgid <= 0) return out;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) {
    if (kill(-pgid, 0) == 0 || errno == EPERM) out.push_back(pgid);
    return out;
  }
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    char state = 0;
    pid_t group = 0;
    if (!ReadStat(static_cast<pid_t>(pid), &state, &group)) continue;
    if (group == pgid && state != 'Z' && state != 'X') out.push_back(static_cast<pid_t>(pid));
  }
  closedir(dir);
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

// bench_spawn_limit: the machine's limit for running a list of profiler commands, J at a time.
//
// Reads command lines (one JSON array of argv strings per line), then runs them in file order
// with posix_spawn, at most J at once, refilling a slot as soon as waitpid reports an exit: no
// queue, no store, no output parsing. Each child gets stdin and stdout/stderr on /dev/null and
// HIP_VISIBLE_DEVICES set to its slot. What ckprofd does on top of this (pipes, parsing, SQLite,
// fairness) is its overhead; this loop is the yardstick the dispatch benchmark divides by.
//
// Prints one JSON object: {"tasks", "jobs", "seconds", "tasks_per_s", "failed", "gap_p50_ms",
// "gap_p99_ms", "cpu_s", "profiler_cpu_s"}; a gap is one slot's exit seen by waitpid to the
// spawn of its next command; cpu_s is this loop's own CPU time, profiler_cpu_s its children's.
//
//   bench_spawn_limit --commands FILE [--jobs 8] [--tasks N]
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  std::string commands_path;
  int jobs = 8;
  size_t tasks = 0;  // 0 = every line of the file
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--commands" && i + 1 < argc) {
      commands_path = argv[++i];
    } else if (a == "--jobs" && i + 1 < argc) {
      jobs = std::atoi(argv[++i]);
    } else if (a == "--tasks" && i + 1 < argc) {
      tasks = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: bench_spawn_limit --commands FILE [--jobs J] [--tasks N]\n");
      return 2;
    }
  }
  std::ifstream in(commands_path);
  if (!in || jobs < 1) {
    std::fprintf(stderr, "bench_spawn_limit: cannot read %s\n", commands_path.c_str());
    return 2;
  }
  std::vector<std::vector<std::string>> commands;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_array() || j.empty()) {
      std::fprintf(stderr, "bench_spawn_limit: line %zu is not an argv array\n",
                   commands.size() + 1);
      return 2;
    }
    commands.push_back(j.get<std::vector<std::string>>());
  }
  if (tasks == 0 || tasks > commands.size()) tasks = commands.size();

  // Per slot environment: ours, minus any pin variable, plus HIP_VISIBLE_DEVICES=slot.
  std::vector<std::string> base;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "HIP_VISIBLE_DEVICES=", 20) != 0) base.emplace_back(*e);
  }
  std::vector<std::vector<std::string>> slot_env(static_cast<size_t>(jobs), base);
  std::vector<std::vector<char*>> slot_envp(static_cast<size_t>(jobs));
  for (int s = 0; s < jobs; ++s) {
    slot_env[s].push_back("HIP_VISIBLE_DEVICES=" + std::to_string(s));
    for (auto& e : slot_env[s]) slot_envp[s].push_back(e.data());
    slot_envp[s].push_back(nullptr);
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);

  std::map<pid_t, int> running;  // pid -> slot
  std::vector<int> free_slots;
  for (int s = jobs - 1; s >= 0; --s) free_slots.push_back(s);
  std::vector<Clock::time_point> slot_freed(static_cast<size_t>(jobs));
  std::vector<bool> slot_used(static_cast<size_t>(jobs), false);
  std::vector<double> gaps_ms;
  size_t next = 0, failed = 0;
  const auto start = Clock::now();
  while (next < tasks || !running.empty()) {
    while (next < tasks && !free_slots.empty()) {
      const int slot = free_slots.back();
      free_slots.pop_back();
      std::vector<char*> cargv;
      for (auto& a : commands[next]) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      const auto now = Clock::now();
      if (slot_used[slot]) {
        gaps_ms.push_back(
            std::chrono::duration<double, std::milli>(now - slot_freed[slot]).count());
      }
      pid_t pid;
      int rc = posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), slot_envp[slot].data());
      ++next;
      slot_used[slot] = true;
      if (rc != 0) {
        ++failed;
        slot_freed[slot] = Clock::now();
        free_slots.push_back(slot);
        continue;
      }
      running[pid] = slot;
    }
    int status = 0;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    auto it = running.find(pid);
    if (it == running.end()) continue;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
    slot_freed[it->second] = Clock::now();
    free_slots.push_back(it->second);
    running.erase(it);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  auto cpu_seconds = [](int who) {
    rusage u{};
    getrusage(who, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
  };
  nlohmann::json out = {{"tasks", tasks},
                        {"jobs", jobs},
                        {"seconds", seconds},
                        {"tasks_per_s", seconds > 0 ? static_cast<double>(tasks) / seconds : 0},
                        {"failed", failed},
                        {"gap_p50_ms", Percentile(gaps_ms, 0.50)},
                        {"gap_p99_ms", Percentile(gaps_ms, 0.99)},
                        {"cpu_s", cpu_seconds(RUSAGE_SELF)},
                        {"profiler_cpu_s", cpu_seconds(RUSAGE_CHILDREN)}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

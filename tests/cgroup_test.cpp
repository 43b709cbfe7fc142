// Containment with real cgroups (v2): each run in a cgroup of its own, so that what left the
// run's process group (setsid, a double fork) is stopped with the run, the cgroup goes with
// it, and the run's CPU time is the kernel's count for all its processes. The same scripts
// without cgroups show what they fix. Skipped, with the reason, where no cgroup v2 can be
// written (not root, or a read-only /sys/fs/cgroup).
#include "daemon/cgroup.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include "daemon/process_util.h"
#include "daemon/runner.h"
#include "tests/util/files.h"

namespace ckprof {
namespace {

using namespace std::chrono_literals;

// A runner (with `cgroups`, or none) on its own io_context, driven by this thread.
class Harness {
 public:
  explicit Harness(TaskCgroups* cgroups)
      : work_(io_.get_executor()), runner_(io_.get_executor(), cgroups) {}

  RunResult Run(RunSpec spec) {
    std::optional<RunResult> result;
    runner_.Start(std::move(spec), [&](RunResult r) { result = std::move(r); });
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!result && std::chrono::steady_clock::now() < deadline) io_.run_one_for(100ms);
    EXPECT_TRUE(result.has_value()) << "timed out waiting for the runner";
    return result ? std::move(*result) : RunResult{};
  }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  ProcessRunner runner_;
};

RunSpec Shell(const std::string& script) {
  RunSpec s;
  s.argv = {"/bin/sh", "-c", script};
  s.grace = 200ms;
  s.drain = 200ms;
  return s;
}

// A leader that starts a helper leaving its process group (setsid, sleeping), waits until the
// helper has written its pid into `pid_file`, then runs `then`.
RunSpec WithEscapee(const std::string& pid_file, const std::string& then) {
  return Shell("setsid sh -c 'echo $$ > " + pid_file + ".new; mv " + pid_file + ".new " + pid_file +
               "; exec sleep 1000' & while [ ! -s " + pid_file + " ]; do sleep 0.01; done; " +
               then);
}

pid_t PidIn(const std::string& file) {
  return static_cast<pid_t>(std::atoi(testing::ReadFile(file).c_str()));
}

// Kills what a failed check left (only when it is still there: the pid may be reused).
void KillIfLive(pid_t pid) {
  if (pid > 0 && ProcessIsLive(pid)) kill(pid, SIGKILL);
}

bool GoneWithin(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (ProcessIsLive(pid)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// The run cgroups of this process under `parent` (they are named run-<our pid>-<n>); only
// those holding a process with `populated`.
int OwnRunCgroups(const std::string& parent, bool populated = false) {
  int n = 0;
  const std::string prefix = "run-" + std::to_string(getpid()) + "-";
  for (const auto& e : std::filesystem::directory_iterator(parent)) {
    if (e.path().filename().string().rfind(prefix, 0) != 0) continue;
    if (populated && testing::ReadFile(e.path().string() + "/cgroup.events").find("populated 1") ==
                         std::string::npos) {
      continue;
    }
    ++n;
  }
  return n;
}

// A script's first line: the cgroup it runs in (under the runs' parent), e.g. "run-123-4".
std::string CgroupLine() { return "sed -n 's|^0::.*/||p' /proc/self/cgroup; "; }

class CgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string note;
    auto opened = TaskCgroups::Open(0, &note);
    if (!opened) GTEST_SKIP() << "no writable cgroup v2 here: " << opened.error();
    cgroups_ = std::move(*opened);
    EXPECT_NE(note.find(cgroups_->parent()), std::string::npos) << note;
  }

  std::unique_ptr<TaskCgroups> cgroups_;
  testing::TempDir dir_;
};

// A profiler's helper that left the process group (setsid) and sleeps: a timeout stops it with
// the run, and the run's cgroup is gone afterwards.
TEST_F(CgroupTest, WhatLeftTheProcessGroupIsStoppedWithTheRun) {
  Harness h(cgroups_.get());
  const std::string pid_file = dir_.File("escapee");
  RunSpec spec = WithEscapee(pid_file, "echo ready; sleep 1000");
  spec.timeout = 1000ms;
  RunResult r = h.Run(spec);
  EXPECT_EQ(r.outcome.kind, Outcome::Kind::kTimedOut) << r.outcome.Summary();
  ASSERT_EQ(r.stdout_capture, "ready\n") << "the helper had not started at the timeout";
  const pid_t escaped = PidIn(pid_file);
  ASSERT_GT(escaped, 0);
  // The run ended only once its cgroup was empty: no wait needed.
  EXPECT_FALSE(ProcessIsLive(escaped)) << "pid " << escaped << " outlived its run";
  EXPECT_EQ(OwnRunCgroups(cgroups_->parent(), /*populated=*/true), 0);
  EXPECT_EQ(r.usage_from, "cgroup");
  ASSERT_TRUE(r.cpu_s.has_value());
  EXPECT_GE(*r.cpu_s, 0.0);
  ASSERT_TRUE(r.peak_memory_bytes.has_value());
  EXPECT_GT(*r.peak_memory_bytes, 0u);
  KillIfLive(escaped);
}

// The same with a leader that ends by itself: its escapee goes too.
TEST_F(CgroupTest, AnEscapeeOfALeaderThatExitedIsStoppedToo) {
  Harness h(cgroups_.get());
  const std::string pid_file = dir_.File("escapee");
  RunResult r = h.Run(WithEscapee(pid_file, "exit 3"));
  EXPECT_EQ(r.outcome.kind, Outcome::Kind::kFailed) << r.outcome.Summary();
  const pid_t escaped = PidIn(pid_file);
  ASSERT_GT(escaped, 0);
  EXPECT_FALSE(ProcessIsLive(escaped)) << "pid " << escaped << " outlived its run";
  EXPECT_EQ(OwnRunCgroups(cgroups_->parent(), /*populated=*/true), 0);
  KillIfLive(escaped);
}

// Without cgroups (process groups alone) that escapee outlives the run: what the cgroup fixes.
TEST_F(CgroupTest, WithoutACgroupTheEscapeeOutlivesTheRun) {
  Harness h(nullptr);
  const std::string pid_file = dir_.File("escapee");
  RunSpec spec = WithEscapee(pid_file, "echo ready; sleep 1000");
  spec.timeout = 1000ms;
  RunResult r = h.Run(spec);
  ASSERT_EQ(r.stdout_capture, "ready\n") << "the helper had not started at the timeout";
  const pid_t escaped = PidIn(pid_file);
  ASSERT_GT(escaped, 0);
  EXPECT_TRUE(ProcessIsLive(escaped));
  EXPECT_EQ(r.usage_from, "rusage");
  kill(escaped, SIGKILL);
  EXPECT_TRUE(GoneWithin(escaped, 5s));
}

// CPU time: the cgroup counts the work of a process the leader never waited for (a double
// fork's grandchild); the leader's own rusage does not. (Fixed work, not a time: the count does not
// depend on the machine's load.)
TEST_F(CgroupTest, CpuTimeCountsEveryProcessOfTheRun) {
  const std::string flag = dir_.File("done");
  const std::string script = "(sh -c 'i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done; echo > " +
                             flag + "' &); while [ ! -s " + flag + " ]; do sleep 0.2; done";
  Harness with(cgroups_.get());
  RunResult counted = with.Run(Shell(script));
  std::filesystem::remove(flag);
  Harness without(nullptr);
  RunResult leader_only = without.Run(Shell(script));
  std::filesystem::remove(flag);
  ASSERT_TRUE(counted.cpu_s && leader_only.cpu_s);
  EXPECT_EQ(counted.usage_from, "cgroup");
  EXPECT_EQ(leader_only.usage_from, "rusage");
  EXPECT_GT(*counted.cpu_s, 0.1) << "the loop's CPU time is counted";
  EXPECT_GT(*counted.cpu_s, 2 * *leader_only.cpu_s)
      << "cgroup " << *counted.cpu_s << " s, leader " << *leader_only.cpu_s << " s";
}

// The next run gets the cgroup of the one before (no mkdir, no rmdir), but nothing of it: the
// escapee of the first is gone before the second starts, and the second's CPU time is its own,
// not the cgroup's total. Once the cgroups are closed, none is left.
TEST_F(CgroupTest, AReusedCgroupCarriesNothingOfThePreviousRun) {
  Harness h(cgroups_.get());
  const std::string pid_file = dir_.File("escapee");
  const std::string busy = "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done; ";
  RunResult first = h.Run(WithEscapee(pid_file, CgroupLine() + busy + "exit 0"));
  ASSERT_NE(first.outcome.kind, Outcome::Kind::kSpawnFailed) << first.outcome.Summary();
  const pid_t escaped = PidIn(pid_file);
  ASSERT_GT(escaped, 0);
  EXPECT_FALSE(ProcessIsLive(escaped)) << "pid " << escaped << " outlived its run";
  EXPECT_EQ(cgroups_->pooled(), 1u);

  RunResult second = h.Run(Shell(CgroupLine() + "cat \"" + cgroups_->parent() +
                                 "/$(sed -n 's|^0::.*/||p' /proc/self/cgroup)/cgroup.procs\""));
  ASSERT_NE(second.outcome.kind, Outcome::Kind::kSpawnFailed) << second.outcome.Summary();
  const std::string name = first.stdout_capture.substr(0, first.stdout_capture.find('\n'));
  ASSERT_FALSE(name.empty());
  EXPECT_EQ(second.stdout_capture.substr(0, name.size() + 1), name + "\n")
      << "the second run did not get the first's cgroup: " << second.stdout_capture;
  EXPECT_EQ(second.stdout_capture.find("\n" + std::to_string(escaped) + "\n"), std::string::npos)
      << "the first run's escapee is in the second's cgroup: " << second.stdout_capture;
  ASSERT_TRUE(first.cpu_s && second.cpu_s);
  EXPECT_EQ(second.usage_from, "cgroup");
  EXPECT_GT(*first.cpu_s, 0.1) << "the loop's CPU time is counted";
  EXPECT_LT(*second.cpu_s, *first.cpu_s / 2)
      << "the second run's CPU time holds the first's: " << *second.cpu_s << " s";
  EXPECT_EQ(OwnRunCgroups(cgroups_->parent()), 1);
  const std::string parent = cgroups_->parent();
  cgroups_.reset();
  EXPECT_EQ(OwnRunCgroups(parent), 0) << "the pooled cgroup outlived the daemon's cgroups";
  KillIfLive(escaped);
}

// A process found in an idle cgroup (nothing of ckprofd's puts one there; root could) is
// killed and that cgroup never serves a run again.
TEST_F(CgroupTest, AnIdleCgroupHoldingAProcessIsKilledAndNotUsedAgain) {
  auto first = cgroups_->Acquire();
  ASSERT_TRUE(first.ok()) << first.error();
  const std::string dir = (*first)->dir();
  cgroups_->Release(std::move(*first));
  ASSERT_EQ(cgroups_->pooled(), 1u);
  const pid_t intruder = fork();
  ASSERT_GE(intruder, 0);
  if (intruder == 0) {
    execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
    _exit(127);
  }
  testing::WriteFile(dir + "/cgroup.procs", std::to_string(intruder));
  auto second = cgroups_->Acquire();
  ASSERT_TRUE(second.ok()) << second.error();
  EXPECT_NE((*second)->dir(), dir);
  EXPECT_TRUE(GoneWithin(intruder, 5s)) << "the process in the idle cgroup was not killed";
  KillIfLive(intruder);
  waitpid(intruder, nullptr, 0);
  cgroups_->Release(std::move(*second));
  EXPECT_EQ(cgroups_->pooled(), 1u);
}

// A cgroup left by a daemon that died goes at the next Open once empty; one of a live daemon
// sharing the parent stays.
TEST_F(CgroupTest, OpenSweepsEmptyLeftoversOfDeadDaemonsOnly) {
  const std::string parent = cgroups_->parent();
  // pid 2^22+1 is above any pid_max: no such process. Our parent (ctest, a shell) lives on.
  const std::string dead = parent + "/run-4194305-7";
  const std::string live = parent + "/run-" + std::to_string(getppid()) + "-7";
  ASSERT_TRUE(std::filesystem::create_directory(dead));
  ASSERT_TRUE(std::filesystem::create_directory(live));
  std::string note;
  auto again = TaskCgroups::Open(0, &note);
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(live));
  std::filesystem::remove(live);
}

}  // namespace
}  // namespace ckprof

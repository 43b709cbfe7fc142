// Tests of the process runner with real processes: exit codes, signals, timeouts (also of a
// child that ignores SIGTERM), cancellation, a grandchild left running, 100 MB of output with
// bounded memory, environment pinning, identity and working directory, spawn failures, many runs
// at once on one thread.
#include "daemon/runner.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <chrono>
#include <cstdlib>
#include <optional>

#include "tests/util/emulator.h"
#include "tests/util/files.h"

namespace ckprof {
namespace {

using namespace std::chrono_literals;
using testing::BinPath;

// A runner on its own io_context, driven by this thread.
class Harness {
 public:
  // `exec_helper`: the runner's ckprofd-exec ("" = the built one).
  explicit Harness(const std::string& exec_helper = "")
      : work_(io_.get_executor()), runner_(io_.get_executor(), nullptr, exec_helper) {}

  // Runs the io_context until `done` or 20 s pass (a failing test must not hang).
  template <typename Pred>
  void RunUntil(Pred done) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!done() && std::chrono::steady_clock::now() < deadline) io_.run_one_for(100ms);
    ASSERT_TRUE(done()) << "timed out waiting for the runner";
  }

  RunResult Run(RunSpec spec) {
    std::optional<RunResult> result;
    runner_.Start(std::move(spec), [&](RunResult r) { result = std::move(r); });
    RunUntil([&] { return result.has_value(); });
    return result ? std::move(*result) : RunResult{};
  }

  asio::io_context& io() { return io_; }
  ProcessRunner& runner() { return runner_; }

 private:
  asio::io_context io_;
  // Keeps run_one_for from returning at once once the context has run out of work.
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  ProcessRunner runner_;
};

std::vector<std::string> Emu(int n = 4) { return testing::EmulatorArgv(n); }

RunSpec Spec(std::vector<std::string> argv) {
  RunSpec s;
  s.argv = std::move(argv);
  s.set_env = {{"CKEMU_TIME_SCALE", "0"}};
  s.grace = 1000ms;
  return s;
}

RunSpec Shell(const std::string& script) { return Spec({"/bin/sh", "-c", script}); }

bool GroupGone(pid_t pgid) { return LiveProcessesInGroup(pgid).empty(); }

long MaxRssKb() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

TEST(ProcessRunner, HugeOutputKeepsMemoryBounded) {
  const long rss_before = MaxRssKb();
  Harness h;
  RunSpec spec = Spec(Emu());
  spec.set_env.push_back({"CKEMU_FAULT", "huge-output"});
  spec.set_env.push_back({"CKEMU_HUGE_BYTES", "100M"});
  RunResult r = h.Run(spec);
  EXPECT_EQ(r.outcome.kind, Outcome::Kind::kSucceeded) << r.outcome.Summary();
  EXPECT_GT(r.stdout_bytes, 100u << 20);
  EXPECT_LE(r.stdout_capture.size(), spec.capture_head + spec.capture_tail + 64);
  EXPECT_NE(r.stdout_capture.find(" bytes omitted ...]\n"), std::string::npos);
  EXPECT_GE(r.perf.truncated_lines, 100u);  // 1 MiB tensor-dump lines
  EXPECT_TRUE(r.perf.has_best);
  EXPECT_NE(r.stdout_capture.find("Best configuration parameters:"), std::string::npos);
  EXPECT_LT(MaxRssKb() - rss_before, 48 * 1024) << "resident memory grew with the output";

  // No newline at all: one 20 MB line.
  r = h.Run(Shell("head -c 20000000 /dev/zero"));
  EXPECT_EQ(r.stdout_bytes, 20000000u);
  EXPECT_EQ(r.outcome.kind, Outcome::Kind::kUnsupported);  // exit 0, no valid instance
  EXPECT_LE(r.stdout_capture.size(), 16384u * 2 + 64);
}

TEST(ProcessRunner, SucceedsAndParses) {
  Harness h;
  std::optional<RunResult> result;
  pid_t started = -1;
  RunSpec spec = Spec(Emu());
  spec.on_started = [&](pid_t p) {
    EXPECT_FALSE(result.has_value()) << "on_started after on_done";
    started = p;
  };
  auto id = h.runner().Start(spec, [&](RunResult r) { result = std::move(r); });
  EXPECT_EQ(h.runner().RunningPid(id), -1);  // spawned on the runner's own thread
  EXPECT_EQ(h.runner().running(), 1u);
  h.RunUntil([&] { return started > 0; });
  const pid_t pid = started;
  EXPECT_EQ(h.runner().RunningPid(id), pid);
  EXPECT_EQ(getpgid(pid), pid);  // its own process group, known once it exists
  h.RunUntil([&] { return result.has_value(); });
  EXPECT_EQ(h.runner().running(), 0u);
  EXPECT_EQ(h.runner().RunningPid(id), -1);
  EXPECT_EQ(result->outcome.kind, Outcome::Kind::kSucceeded) << result->outcome.Summary();
  EXPECT_EQ(result->pid, pid);
  EXPECT_TRUE(result->perf.has_best);
  EXPECT_GT(result->perf.valids, 0);
  EXPECT_EQ(result->stdout_capture.size(), result->stdout_bytes);
  EXPECT_EQ(result->stderr_bytes, 0u);
  EXPECT_GE(result->ended_at, result->started_at);
  EXPECT_GT(result->elapsed_s, 0);
}

// The pipes are read by the runner's poll while the profiler runs (a page or more at a poll:
// watched from then on) and drained at its exit: output spread over several polls, a burst
// larger than a pipe holds, and a stream closed long before the exit all arrive whole and in
// order.
TEST(ProcessRunner, OutputWrittenWhileRunningArrivesWholeAndInOrder) {
  Harness h;
  RunResult r =
      h.Run(Shell("for i in 1 2 3 4 5; do echo line$i; echo err$i >&2; sleep 0.03; done; "
                  "head -c 200000 /dev/zero | tr '\\000' x; echo; echo tail"));
  EXPECT_EQ(r.outcome.kind, Outcome::Kind::kUnsupported) << r.outcome.Summary();
  EXPECT_EQ(r.stdout_bytes, 5 * 6 + 200000 + 1 + 5u);
  EXPECT_EQ(r.stdout_capture.substr(0, 30), "line1\nline2\nline3\nline4\nline5\n");
  EXPECT_EQ(r.stdout_capture.substr(r.stdout_capture.size() - 6), "\ntail\n");
  EXPECT_EQ(r.stderr_capture, "err1\nerr2\nerr3\nerr4\nerr5\n");

  r = h.Run(Shell("echo before; exec 1>&-; sleep 0.12; echo after >&2"));
  EXPECT_EQ(r.stdout_capture, "before\n");
  EXPECT_EQ(r.stderr_capture, "after\n");
}

TEST(ProcessRunner, ExitCodesAndSignals) {
  Harness h;
  RunResult r = h.Run(Shell("echo warming up >&2; echo HIP error: no device >&2; exit 3"));
  EXPECT_EQ(r.outcome.kind, Outcome::Kind::kFailed);
  EXPECT_EQ(r.outcome.exit_code, 3);
  EXPECT_EQ(r.outcome.reason, "exit code 3: HIP error: no device");
  EXPECT_EQ(r.stderr_capture, "warming up\nHIP error: no device\n");

  r = h.Run(Shell("kill -SEGV $$"));
  EXPECT_EQ(r.outcome.kind, Outcome::Kind::kCrashed);
  EXPECT_EQ(r.outcome.signal, SIGSEGV);
  EXPECT_EQ(r.outcome.Summary(), "crashed (SIGSEGV)");

  r = h.Run(Spec(Emu(9007)));  // injected abort
  EXPECT_EQ(r.outcome.kind, Outcome::Kind::kCrashed);
  EXPECT_EQ(r.outcome.signal, SIGABRT);
  EXPECT_EQ(r.perf.instances_tried, 3);

  r = h.Run(Spec(Emu(9008)));  // verification failure
  EXPECT_EQ(r.outcome.Summary(),
            "failed (exit 1): verification failed (Error: Incorrect results!)");

  r = h.Run(Spec(Emu(9004)));  // no instance supports it
  EXPECT_EQ(r.outcome.kind, Outcome::Kind::kUnsupported);
}

TEST(ProcessRunner, ProfilersRunAtNormalPriorityUnderAFavouredDaemon) {
  // As under the systemd unit (Nice=-5): the runner's process is favoured, its children not.
  errno = 0;
  const int before = getpriority(PRIO_PROCESS, 0);
  if (setpriority(PRIO_PROCESS, 0, -3) != 0) GTEST_SKIP() << "needs CAP_SYS_NICE (root)";
  Harness h;
  RunResult r = h.Run(Shell("nice"));
  setpriority(PRIO_PROCESS, 0, before);
  EXPECT_EQ(r.stdout_capture, "0\n");
}

TEST(ProcessRunner, BoundedHeadAndTailCapture) {
  Harness h;
  RunSpec spec = Shell("seq 1 100000; echo tail-of-stderr >&2");
  spec.capture_head = 10;
  spec.capture_tail = 10;
  RunResult r = h.Run(spec);
  EXPECT_EQ(r.stdout_bytes, 588895u);
  EXPECT_EQ(r.stdout_capture, "1\n2\n3\n4\n5\n\n[... 588875 bytes omitted ...]\n99\n100000\n");
  EXPECT_EQ(r.stderr_capture,
            "tail-of-stderr\n");  // 15 bytes: 10 head + 5 of tail, nothing omitted
}

TEST(ProcessRunner, TimeoutKillsTheGroup) {
  Harness h;
  RunSpec spec = Spec(Emu(9001));  // hangs after a few instances
  spec.timeout = 200ms;
  spec.grace = 1h;  // were SIGTERM not enough, the test would fail by its signal (SIGKILL)
  RunResult r = h.Run(spec);
  EXPECT_EQ(r.outcome.kind, Outcome::Kind::kTimedOut);
  EXPECT_EQ(r.outcome.signal, SIGTERM);  // SIGTERM was enough: no grace period spent
  EXPECT_EQ(r.outcome.reason, "timed out after 0.2 s");
  EXPECT_GE(r.elapsed_s, 0.2);
  EXPECT_EQ(r.perf.instances_tried, 3);  // what it printed before hanging was parsed
  EXPECT_TRUE(GroupGone(r.pid));
}

TEST(ProcessRunner, ChildIgnoringSigtermIsKilledAfterGrace) {
  Harness h;
  RunSpec spec = Spec(Emu(9010));
  spec.timeout = 200ms;
  spec.grace = 200ms;
  RunResult r = h.Run(spec);
  EXPECT_EQ(r.outcome.kind, Outcome::Kind::kTimedOut);
  EXPECT_EQ(r.outcome.signal, SIGKILL);
  EXPECT_EQ(r.outcome.reason, "timed out after 0.2 s (still running 0.2 s after SIGTERM: killed)");
  EXPECT_GE(r.elapsed_s, 0.4);
  EXPECT_TRUE(GroupGone(r.pid));

  // A shell whose child inherits the ignored SIGTERM.
  spec = Shell("trap '' TERM; sleep 1h; echo not reached");
  spec.timeout = 100ms;
  spec.grace = 100ms;
  r = h.Run(spec);
  EXPECT_EQ(r.outcome.kind, Outcome::Kind::kTimedOut);
  EXPECT_EQ(r.outcome.signal, SIGKILL);
  EXPECT_EQ(r.stdout_capture, "");  // killed, not ended by itself
  EXPECT_TRUE(GroupGone(r.pid));
}

TEST(ProcessRunner, GrandchildLeftRunningIsKilled) {
  Harness h;
  // Not held open by the grandchild, nor ended by the drain timer: were it either, the run
  // would take an hour, and Harness fails a run that has not ended in 20 s.
  RunSpec spec = Spec(Emu(9009));  // forks a child that sleeps an hour on our pipes
  spec.drain = 1h;
  RunResult r = h.Run(spec);
  EXPECT_EQ(r.outcome.kind, Outcome::Kind::kSucceeded) << r.outcome.Summary();
  EXPECT_TRUE(GroupGone(r.pid));
  const auto pos = r.stderr_capture.find("background child pid ");
  ASSERT_NE(pos, std::string::npos) << r.stderr_capture;
  const pid_t grandchild = std::atoi(r.stderr_capture.c_str() + pos + 21);
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(LiveProcessesInGroup(r.pid).empty()) << grandchild;

  spec = Shell("sleep 1h & sleep 1h & echo started");
  spec.drain = 1h;
  r = h.Run(spec);
  EXPECT_EQ(r.stdout_capture, "started\n");
  EXPECT_TRUE(GroupGone(r.pid));
}

TEST(ProcessRunner, PipeHeldOutsideTheGroupDoesNotHoldTheRun) {
  Harness h;
  // A grandchild that leaves the group (setsid) keeps stdout open for an hour; it prints its
  // pid, then says so through a FIFO, on which the leader waits before it ends.
  RunSpec spec = Shell(
      "d=$(mktemp -d) && mkfifo $d/said && "
      "{ setsid sh -c \"echo \\$\\$; echo > $d/said; exec sleep 1h\" & } && "
      "read x < $d/said; rm -r $d; echo leader done");
  spec.drain = 200ms;
  RunResult r = h.Run(spec);
  // (Ended by the drain timer, not by the grandchild's exit an hour later.)
  EXPECT_EQ(r.outcome.kind, Outcome::Kind::kUnsupported);  // exit 0, no CK output
  const pid_t escaped = std::atoi(r.stdout_capture.c_str());
  ASSERT_GT(escaped, 0) << r.stdout_capture;
  EXPECT_NE(r.stdout_capture.find("leader done\n"), std::string::npos);
  kill(escaped, SIGKILL);  // not ours to track: it left the group
}

TEST(ProcessRunner, CancelAndInterrupt) {
  Harness h;
  std::optional<RunResult> cancelled, interrupted;
  RunSpec spec = Shell("sleep 30");
  spec.grace = 1h;  // were SIGTERM not enough, the cancel would end by SIGKILL
  auto a = h.runner().Start(spec, [&](RunResult r) { cancelled = std::move(r); });
  auto b = h.runner().Start(spec, [&](RunResult r) { interrupted = std::move(r); });
  EXPECT_EQ(h.runner().running(), 2u);
  EXPECT_TRUE(h.runner().Cancel(a));
  EXPECT_FALSE(h.runner().Cancel(a));  // already being stopped
  EXPECT_TRUE(h.runner().Interrupt(b));
  EXPECT_FALSE(h.runner().Cancel(12345));
  h.RunUntil([&] { return cancelled && interrupted; });
  EXPECT_EQ(cancelled->outcome.kind, Outcome::Kind::kCancelled);
  EXPECT_EQ(cancelled->outcome.signal, SIGTERM);
  EXPECT_EQ(cancelled->outcome.Summary(), "cancelled");
  EXPECT_EQ(interrupted->outcome.kind, Outcome::Kind::kInterrupted);
  EXPECT_TRUE(GroupGone(cancelled->pid));
  EXPECT_TRUE(GroupGone(interrupted->pid));
  EXPECT_FALSE(h.runner().Cancel(a));  // finished
  EXPECT_EQ(h.runner().running(), 0u);
}

TEST(ProcessRunner, EnvironmentIsBuiltOnPurpose) {
  setenv("HIP_VISIBLE_DEVICES", "7", 1);
  setenv("ROCR_VISIBLE_DEVICES", "7", 1);
  setenv("CUDA_VISIBLE_DEVICES", "7", 1);
  setenv("GPU_DEVICE_ORDINAL", "7", 1);
  setenv("CKPROF_RUNNER_TEST_KEEP", "kept", 1);
  Harness h;
  RunSpec spec = Spec({"/usr/bin/env"});
  spec.set_env = {{"HIP_VISIBLE_DEVICES", "3"}, {"CKPROF_RUNNER_TEST_KEEP", "replaced"}};
  RunResult r = h.Run(spec);
  RunResult emu = h.Run([] {
    RunSpec s = Spec(Emu());
    s.set_env.push_back({"ROCR_VISIBLE_DEVICES", "2"});
    return s;
  }());
  for (const char* name : {"HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES",
                           "GPU_DEVICE_ORDINAL", "CKPROF_RUNNER_TEST_KEEP"}) {
    unsetenv(name);
  }
  EXPECT_EQ(r.outcome.kind, Outcome::Kind::kUnsupported);
  const std::string env = "\n" + r.stdout_capture;
  EXPECT_NE(env.find("\nHIP_VISIBLE_DEVICES=3\n"), std::string::npos) << env;
  EXPECT_EQ(env.find("ROCR_VISIBLE_DEVICES"), std::string::npos);
  EXPECT_EQ(env.find("CUDA_VISIBLE_DEVICES"), std::string::npos);
  EXPECT_EQ(env.find("GPU_DEVICE_ORDINAL"), std::string::npos);
  EXPECT_NE(env.find("\nCKPROF_RUNNER_TEST_KEEP=replaced\n"), std::string::npos);
  EXPECT_EQ(env.find("=kept"), std::string::npos);
  EXPECT_NE(env.find("\nPATH="), std::string::npos);  // the rest is inherited

  // The emulator's header shows what a real run's log would: only the pin it was given.
  const std::string first = emu.stdout_capture.substr(0, emu.stdout_capture.find('\n'));
  EXPECT_EQ(first, "ckprofiler-emu: pid " + std::to_string(emu.pid) + " uid " +
                       std::to_string(getuid()) + " gid " + std::to_string(getgid()) +
                       " ROCR_VISIBLE_DEVICES=2");
}

TEST(ProcessRunner, BuildChildEnvironment) {
  EXPECT_EQ(
      BuildChildEnvironment({"A=1", "HIP_VISIBLE_DEVICES=0,1", "GPU_DEVICE_ORDINAL=1", "B=x=y",
                             "HIP_VISIBLE_DEVICESX=5"},
                            {{"B", "2"}, {"CUDA_VISIBLE_DEVICES", "4"}}),
      (std::vector<std::string>{"A=1", "HIP_VISIBLE_DEVICESX=5", "B=2", "CUDA_VISIBLE_DEVICES=4"}));
}

TEST(ProcessRunner, WorkingDirectoryAndIdentity) {
  Harness h;
  testing::TempDir dir;
  RunSpec spec = Spec({"/bin/pwd"});
  spec.cwd = dir.path();
  EXPECT_EQ(h.Run(spec).stdout_capture, dir.path() + "\n");

  spec = Shell("id -u; id -g; id -G");
  if (geteuid() == 0) {
    spec.uid = 65534;
    spec.gid = 65534;
    spec.groups = std::vector<gid_t>{65534, 100};
    RunResult r = h.Run(spec);
    EXPECT_EQ(r.stdout_capture, "65534\n65534\n65534 100\n") << r.stderr_capture;
  } else {
    spec.uid = getuid();
    RunResult r = h.Run(spec);
    EXPECT_EQ(r.stdout_capture.substr(0, r.stdout_capture.find('\n')), std::to_string(getuid()));
    spec.uid = 0;
    r = h.Run(spec);
    EXPECT_EQ(r.outcome.kind, Outcome::Kind::kSpawnFailed);
    EXPECT_EQ(r.outcome.reason, "cannot switch to uid 0: Operation not permitted");
  }
}

TEST(ProcessRunner, SpawnFailuresArePostedNotCalledInline) {
  Harness h;
  testing::TempDir dir;
  testing::WriteFile(dir.File("not-executable"), "#!/bin/sh\n");
  struct {
    RunSpec spec;
    std::string reason;
  } cases[] = {
      {Spec({dir.File("ckProfiler")}),
       "cannot execute " + dir.File("ckProfiler") + ": No such file or directory"},
      {Spec({dir.File("not-executable")}),
       "cannot execute " + dir.File("not-executable") + ": Permission denied"},
      {[&] {
         RunSpec s = Spec({"/bin/true"});
         s.cwd = dir.File("missing");
         return s;
       }(),
       "cannot change directory to " + dir.File("missing") + ": No such file or directory"},
      {Spec({}), "empty command"},
  };
  for (auto& c : cases) {
    std::optional<RunResult> result;
    c.spec.on_started = [&](pid_t) { ADD_FAILURE() << "on_started for a failed spawn"; };
    auto id = h.runner().Start(c.spec, [&](RunResult r) { result = std::move(r); });
    EXPECT_FALSE(result.has_value()) << "on_done called from inside Start";
    EXPECT_EQ(h.runner().RunningPid(id), -1);
    EXPECT_EQ(h.runner().running(), 1u);
    h.RunUntil([&] { return result.has_value(); });
    EXPECT_EQ(result->outcome.kind, Outcome::Kind::kSpawnFailed);
    EXPECT_EQ(result->outcome.reason, c.reason);
    EXPECT_EQ(h.runner().running(), 0u);
  }
}

// A run as another user starts through ckprofd-exec, which switches uid and directory: its
// failures come back through the status pipe with the same words as a direct start's.
TEST(ProcessRunner, AnotherUsersRunFailsThroughTheHelperWithItsReason) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  Harness h;
  testing::TempDir dir;
  chmod(dir.path().c_str(), 0755);  // nobody may look in it
  RunSpec spec = Spec({"/bin/true"});
  spec.uid = 65534;
  spec.gid = 65534;
  spec.cwd = dir.File("missing");
  RunResult r = h.Run(spec);
  EXPECT_EQ(r.outcome.kind, Outcome::Kind::kSpawnFailed);
  EXPECT_EQ(r.outcome.reason,
            "cannot change directory to " + dir.File("missing") + ": No such file or directory");
  spec.cwd = "";
  spec.argv = {dir.File("ckProfiler")};
  r = h.Run(spec);
  EXPECT_EQ(r.outcome.reason,
            "cannot execute " + dir.File("ckProfiler") + ": No such file or directory");
}

// A child stopped before it ran its profiler (its user's SIGSTOP between the uid switch and the
// exec, here a helper that stops itself) blocks nothing: other runs start and end meanwhile,
// and it is killed at its start deadline with a reason that says so.
TEST(ProcessRunner, AChildStoppedBeforeItsExecBlocksNothing) {
  testing::TempDir dir;
  const std::string helper = dir.File("stopping-helper");
  testing::WriteFile(helper, "#!/bin/sh\nkill -STOP $$\n");
  chmod(helper.c_str(), 0755);
  Harness h(helper);
  RunSpec stopped = Shell("echo never");
  stopped.uid = geteuid() + 1;  // another user: started through the helper
  stopped.start_timeout = 300ms;
  std::optional<RunResult> stopped_result;
  h.runner().Start(stopped, [&](RunResult r) { stopped_result = std::move(r); });
  RunResult other = h.Run(Shell("echo fine"));
  EXPECT_NE(other.outcome.kind, Outcome::Kind::kSpawnFailed) << other.outcome.reason;
  EXPECT_EQ(other.stdout_capture, "fine\n");
  h.RunUntil([&] { return stopped_result.has_value(); });
  EXPECT_EQ(stopped_result->outcome.kind, Outcome::Kind::kSpawnFailed);
  EXPECT_NE(stopped_result->outcome.reason.find("did not start within 0.3 s"), std::string::npos)
      << stopped_result->outcome.reason;
  EXPECT_TRUE(GroupGone(stopped_result->pid));
}

TEST(ProcessRunner, ManyRunsAtOnceOnOneThread) {
  Harness h;
  constexpr int kRuns = 40;
  int done = 0, succeeded = 0, crashed = 0, timed_out = 0;
  std::vector<pid_t> pids;
  for (int i = 0; i < kRuns; ++i) {
    RunSpec spec = Spec(Emu(i % 10 == 3 ? 9002 : i % 10 == 5 ? 9001 : 4 + i));
    spec.set_env = {{"CKEMU_TIME_SCALE", "0.5"}};
    // Only the hangs time out: 40 runs at once on 2 loaded cores (ASan) may take long.
    spec.timeout = i % 10 == 5 ? 300ms : 60s;
    spec.grace = 100ms;
    spec.on_started = [&](pid_t p) { pids.push_back(p); };
    h.runner().Start(spec, [&](RunResult r) {
      ++done;
      succeeded += r.outcome.kind == Outcome::Kind::kSucceeded;
      crashed += r.outcome.kind == Outcome::Kind::kCrashed;
      timed_out += r.outcome.kind == Outcome::Kind::kTimedOut;
    });
  }
  EXPECT_EQ(h.runner().running(), static_cast<size_t>(kRuns));
  h.RunUntil([&] { return done == kRuns; });
  EXPECT_EQ(succeeded, kRuns - 8);
  EXPECT_EQ(crashed, 4);
  EXPECT_EQ(timed_out, 4);
  EXPECT_EQ(pids.size(), static_cast<size_t>(kRuns));
  for (pid_t p : pids) EXPECT_TRUE(GroupGone(p)) << p;
}

TEST(ProcessRunner, DestructorKillsAndReaps) {
  pid_t pid = -1;
  bool called = false;
  {
    Harness h;
    RunSpec spec = Shell("sleep 30 & sleep 30");
    spec.on_started = [&](pid_t p) { pid = p; };
    h.runner().Start(spec, [&](RunResult) { called = true; });
    h.RunUntil([&] { return pid > 0; });
  }
  EXPECT_FALSE(called);
  EXPECT_EQ(waitpid(pid, nullptr, WNOHANG), -1);  // already reaped
  EXPECT_EQ(errno, ECHILD);
  // The background sleep got SIGKILL with the group; give it the moment it takes to die.
  for (int i = 0; i < 200 && !GroupGone(pid); ++i) usleep(5000);
  EXPECT_TRUE(GroupGone(pid));
}

// Destroyed while its spawn thread is still cloning (or has cloned without telling the io
// thread yet): whatever exists is killed and reaped, nothing else is started.
TEST(ProcessRunner, DestructorDuringSpawnsLeavesNoChild) {
  bool called = false;
  {
    Harness h;
    for (int i = 0; i < 8; ++i) {
      h.runner().Start(Shell("sleep 30"), [&](RunResult) { called = true; });
    }
  }
  EXPECT_FALSE(called);
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);  // no child of ours at all, not even a zombie
  EXPECT_EQ(errno, ECHILD);
}

TEST(KillProcessGroupAndWait, KillsAStrayGroup) {
  EXPECT_TRUE(KillProcessGroupAndWait(999999, 100ms).ok());  // no such group
  EXPECT_FALSE(KillProcessGroupAndWait(1, 100ms).ok());

  // A group as a dead daemon would leave it: the leader ignores SIGTERM.
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    execl("/bin/sh", "sh", "-c", "trap '' TERM; sleep 30 & sleep 30", static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);
  while (LiveProcessesInGroup(pid).size() < 2) usleep(1000);
  const auto t0 = std::chrono::steady_clock::now();
  Status s = KillProcessGroupAndWait(pid, 100ms);
  EXPECT_TRUE(s.ok()) << s.error();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 100ms);
  EXPECT_TRUE(GroupGone(pid));
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

}  // namespace
}  // namespace ckprof

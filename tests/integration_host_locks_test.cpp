// One profiler per GPU across daemons: a second ckprofd on a live daemon's state dir exits at
// once and disturbs nothing; two daemons on different state dirs (the system's and a user's
// `run --local`) share a lock directory and never run side by side on one GPU; a killed
// daemon's lock goes with it, and its restart stops what it left running. And what ckprofd checks
// before it touches its database: the socket's directory.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "tests/util/emulator.h"
#include "tests/util/files.h"
#include "tests/util/launched_daemon.h"
#include "tests/util/processes.h"
#include "tests/util/requests.h"

namespace ckprof {
namespace {

using testing::BinPath;
using testing::LaunchedDaemon;
using testing::TempDir;

class HostLocksTest : public ::testing::Test {
 protected:
  void SetUp() override { chmod(dir_.path().c_str(), 0755); }
  void TearDown() override {
    testing::KillMarkedProcesses("CKPROFD_STATE=" + dir_.File("a/state"));
    testing::KillMarkedProcesses("CKPROFD_STATE=" + dir_.File("b/state"));
  }

  // A daemon in dir_/NAME driving GPU 0 with the emulator, logging its runs to NAME.emu.log,
  // locking GPUs in dir_/locks.
  LaunchedDaemon::Options Options(const std::string& name) {
    std::filesystem::create_directories(dir_.File(name));
    LaunchedDaemon::Options o;
    o.dir = dir_.File(name);
    o.gpus = "0";
    o.env = {"CKEMU_LOG=" + EmuLog(name), "CKEMU_TIME_SCALE=0"};
    o.args = {"--profiler-path", BinPath("ckprofiler-emu"), "--lock-dir", dir_.File("locks")};
    return o;
  }
  std::string EmuLog(const std::string& name) { return dir_.File(name + ".emu.log"); }

  static void Start(LaunchedDaemon& d, const LaunchedDaemon::Options& o) {
    std::string error;
    ASSERT_TRUE(d.Start(o, &error)) << error;
  }

  // Waits (bounded) until `daemon`'s GPU 0 waits for a host lock; returns who holds it.
  static std::string WaitUntilGpuWaits(const LaunchedDaemon& daemon) {
    for (int i = 0; i < 3000; ++i) {
      GpusRequest r;
      auto a = testing::CallOnce(daemon.socket(), r);
      if (!a) return "error: " + a.error();
      for (const auto& g : a->value("gpus", nlohmann::json::array())) {
        auto gi = GpuInfoFromJson(g);
        if (gi && !gi->held_by.empty()) return gi->held_by;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return "";
  }

  TempDir dir_;
};

TEST_F(HostLocksTest, SecondDaemonOnALiveStateDirExitsAtOnceAndDisturbsNothing) {
  LaunchedDaemon a;
  Start(a, Options("a"));
  auto job = testing::SubmitContent(a.socket(), testing::FwdConfigsText(1, /*hang*/ 9001));
  ASSERT_TRUE(job.ok()) << job.error();
  auto running = testing::WatchUntil(a.socket(), *job,
                                     [](const JobSummary& s) { return s.counts.running() >= 1; });
  ASSERT_TRUE(running.ok()) << running.error();
  auto runs = testing::WaitForEmuRuns(EmuLog("a"), 1);
  ASSERT_EQ(runs.size(), 1u);

  LaunchedDaemon b;
  auto o = Options("b");
  o.state_dir = a.state_dir();
  const int status = b.RunToExit(o);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
  const std::string log = testing::ReadFile(b.log_path());
  EXPECT_NE(
      log.find("state dir " + a.state_dir() + " in use by ckprofd pid " + std::to_string(a.pid())),
      std::string::npos)
      << log;
  // The live daemon's profiler runs on, and no second one started.
  EXPECT_TRUE(testing::ProcessIsLive(runs[0].pid));
  EXPECT_EQ(testing::ReadEmuRuns(EmuLog("a")).size(), 1u);
  EXPECT_EQ(testing::ReadEmuRuns(EmuLog("b")).size(), 0u);
  StatusRequest st;
  st.job_id = *job;
  auto answer = testing::CallOnce(a.socket(), st);
  ASSERT_TRUE(answer.ok()) << answer.error();
  EXPECT_EQ((*answer)["job"].value("running", 0), 1) << answer->dump();
  EXPECT_EQ(a.StopGracefully(30), "");
}

TEST_F(HostLocksTest, TwoDaemonsOnOneGpuTakeTurns) {
  LaunchedDaemon a, b;
  Start(a, Options("a"));
  Start(b, Options("b"));
  auto hang = testing::SubmitContent(a.socket(), testing::FwdConfigsText(1, /*hang*/ 9001));
  ASSERT_TRUE(hang.ok()) << hang.error();
  ASSERT_TRUE(testing::WatchUntil(a.socket(), *hang, [](const JobSummary& s) {
                return s.counts.running() >= 1;
              }).ok());
  // Running means spawned; the emulator logs its start a moment later. Cancelled before
  // that, it would leave no line to check below.
  ASSERT_EQ(testing::WaitForEmuRuns(EmuLog("a"), 1).size(), 1u);

  auto job = testing::SubmitContent(b.socket(), testing::FwdConfigsText(3));
  ASSERT_TRUE(job.ok()) << job.error();
  const std::string holder = WaitUntilGpuWaits(b);
  EXPECT_NE(holder.find("pid " + std::to_string(a.pid())), std::string::npos) << holder;
  EXPECT_EQ(testing::ReadEmuRuns(EmuLog("b")).size(), 0u) << "ran beside the other daemon";

  // The other daemon's profiler ends (cancelled): this one takes the GPU by itself.
  CancelRequest cancel;
  cancel.job_id = *hang;
  ASSERT_TRUE(testing::CallOnce(a.socket(), cancel).ok());
  auto end = testing::WaitJobEnd(b.socket(), *job);
  ASSERT_TRUE(end.ok()) << end.error();
  EXPECT_EQ(end->counts.succeeded(), 3);
  const auto a_runs = testing::ReadEmuRuns(EmuLog("a"));
  ASSERT_EQ(a_runs.size(), 1u);
  EXPECT_FALSE(testing::ProcessIsLive(a_runs[0].pid));
  EXPECT_EQ(a.StopGracefully(30), "");
  EXPECT_EQ(b.StopGracefully(30), "");
}

// A profiler gets no descriptor of its GPU's host lock (one that held it could release the
// lock for everyone with `flock -u`): the lock goes with the daemon that took it, and what a
// killed daemon left running is stopped by its restart's recovery (and by systemd, which ends
// the unit's cgroup).
TEST_F(HostLocksTest, AKilledDaemonsLockGoesWithItAndItsRestartStopsTheLeftover) {
  LaunchedDaemon a, b;
  Start(a, Options("a"));
  Start(b, Options("b"));
  auto hang = testing::SubmitContent(a.socket(), testing::FwdConfigsText(1, /*hang*/ 9001));
  ASSERT_TRUE(hang.ok()) << hang.error();
  ASSERT_TRUE(testing::WatchUntil(a.socket(), *hang, [](const JobSummary& s) {
                return s.counts.running() >= 1;
              }).ok());
  const auto a_runs = testing::WaitForEmuRuns(EmuLog("a"), 1);
  ASSERT_EQ(a_runs.size(), 1u);
  a.KeepLeftovers();
  a.Stop(SIGKILL);
  ASSERT_TRUE(testing::ProcessIsLive(a_runs[0].pid));

  auto job = testing::SubmitContent(b.socket(), testing::FwdConfigsText(2));
  ASSERT_TRUE(job.ok()) << job.error();
  auto end = testing::WaitJobEnd(b.socket(), *job);
  ASSERT_TRUE(end.ok()) << end.error();
  EXPECT_EQ(end->counts.succeeded(), 2);

  Start(a, Options("a"));  // the same state dir: recovery stops the leftover first
  EXPECT_FALSE(testing::ProcessIsLive(a_runs[0].pid));
  EXPECT_EQ(a.StopGracefully(30), "");
  EXPECT_EQ(b.StopGracefully(30), "");
}

TEST_F(HostLocksTest, MissingSocketDirectoryIsRefusedBeforeTheDatabaseIsMade) {
  LaunchedDaemon d;
  auto o = Options("a");
  const std::string missing = dir_.File("no-such-dir");
  o.args.insert(o.args.end(), {"--socket", missing + "/x.sock"});
  const int status = d.RunToExit(o);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
  const std::string log = testing::ReadFile(d.log_path());
  EXPECT_NE(log.find("the socket's directory " + missing + " does not exist"), std::string::npos)
      << log;
  EXPECT_FALSE(std::filesystem::exists(missing));
  EXPECT_FALSE(std::filesystem::exists(d.state_dir() + "/ckprofd.db"));
}

}  // namespace
}  // namespace ckprof

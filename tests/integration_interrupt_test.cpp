// Ctrl-C and its kin on `ckprof run`: with --local the private ckprofd, its profilers and its
// temporary directory go, and the command exits 130; a client killed outright (SIGKILL) takes
// its private daemon with it; through the system daemon Ctrl-C cancels the submitted job.
// Every wait is on an event: a line of output, an emulator's logged start, a job's state.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/json_util.h"
#include "tests/util/commands.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"
#include "tests/util/launched_daemon.h"
#include "tests/util/processes.h"
#include "tests/util/requests.h"

namespace ckprof {
namespace {

using testing::BackgroundCommand;
using testing::BinPath;
using testing::CommandResult;
using testing::TempDir;

class InterruptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    chmod(dir_.path().c_str(), 0755);
    mkdir(Tmp().c_str(), 0700);
    testing::WriteFile(dir_.File("hang.json"), testing::FwdConfigsText(2, /*hang*/ 9001));
  }
  void TearDown() override { testing::KillMarkedProcesses("CKPROFD_STATE=" + Tmp()); }

  std::string Tmp() const { return dir_.File("tmp"); }  // the client's TMPDIR
  std::string EmuLog() const { return dir_.File("emu.log"); }

  std::vector<std::string> Env() const {
    return {"TMPDIR=" + Tmp(), "CKEMU_LOG=" + EmuLog(), "CKEMU_TIME_SCALE=0"};
  }
  std::vector<std::string> LocalRun(const std::string& configs) const {
    // Host locks of the test's own: the tests run side by side, each on "GPUs" 0 and 1.
    return {BinPath("ckprof"), "run",        configs,           "--local",
            "--gpus",          "0-1",        "--profiler-path", BinPath("ckprofiler-emu"),
            "--no-save",       "--lock-dir", dir_.File("locks")};
  }

  // The parent of the first logged run: the private ckprofd.
  pid_t DaemonOfFirstRun() {
    std::ifstream in(EmuLog());
    std::string line;
    std::getline(in, line);
    auto j = ParseJson(line);
    return j ? j->value("ppid", 0) : 0;
  }
  static bool GoneWithin(pid_t pid, double seconds) {
    for (int i = 0; i < seconds * 100; ++i) {
      if (!testing::ProcessIsLive(pid)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  bool TmpIsEmpty() const { return std::filesystem::is_empty(Tmp()); }

  // A ckprofd of the test's own on GPUs 0-1 with the emulator (a "system" daemon).
  void StartDaemon(testing::LaunchedDaemon& d) {
    testing::LaunchedDaemon::Options o;
    o.dir = dir_.path();
    o.gpus = "0-1";
    o.args = {"--profiler-path", BinPath("ckprofiler-emu")};
    o.env = {"CKEMU_TIME_SCALE=0"};
    std::string error;
    ASSERT_TRUE(d.Start(o, &error)) << error;
  }
  // `run` (of hang.json) has submitted job 1, and both of its profilers run.
  static void WaitUntilBothRun(const testing::LaunchedDaemon& d, BackgroundCommand& run) {
    ASSERT_TRUE(run.WaitForOutput("as job 1 on ckprofd"));
    ASSERT_TRUE(testing::WatchUntil(d.socket(), 1, [](const JobSummary& s) {
                  return s.counts.running() >= 2;
                }).ok());
  }

  TempDir dir_;
};

TEST_F(InterruptTest, CtrlCOnRunLocalStopsItsDaemonAndProfilersAndRemovesItsFiles) {
  BackgroundCommand run(LocalRun("hang.json"), Env(), dir_.path());
  ASSERT_TRUE(run.WaitForOutput("Running 2 config(s)")) << "no start";
  const auto runs = testing::WaitForEmuRuns(EmuLog(), 2);
  ASSERT_EQ(runs.size(), 2u);
  const pid_t daemon = DaemonOfFirstRun();
  ASSERT_GT(daemon, 0);
  EXPECT_FALSE(TmpIsEmpty());

  const auto sent = std::chrono::steady_clock::now();
  run.Signal(SIGINT);
  CommandResult r = run.Finish();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  EXPECT_EQ(r.exit_code, 130) << r.out << r.err;
  EXPECT_LT(took, 10.0);
  EXPECT_NE(r.err.find("interrupted: stopped the private ckprofd and its profilers"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("closed the connection"), std::string::npos)
      << "no spurious error: " << r.err;
  EXPECT_FALSE(testing::ProcessIsLive(daemon));
  for (const auto& e : runs) EXPECT_FALSE(testing::ProcessIsLive(e.pid)) << e.pid;
  EXPECT_TRUE(TmpIsEmpty());
}

TEST_F(InterruptTest, SigtermOnRunLocalExits143AndLeavesNothing) {
  BackgroundCommand run(LocalRun("hang.json"), Env(), dir_.path());
  ASSERT_EQ(testing::WaitForEmuRuns(EmuLog(), 2).size(), 2u);
  const pid_t daemon = DaemonOfFirstRun();
  run.Signal(SIGTERM);
  CommandResult r = run.Finish();
  EXPECT_EQ(r.exit_code, 143) << r.out << r.err;
  EXPECT_FALSE(testing::ProcessIsLive(daemon));
  EXPECT_TRUE(TmpIsEmpty());
}

TEST_F(InterruptTest, AKilledClientsPrivateDaemonStopsByItselfAndItsFilesGoNextTime) {
  BackgroundCommand run(LocalRun("hang.json"), Env(), dir_.path());
  const auto runs = testing::WaitForEmuRuns(EmuLog(), 2);
  ASSERT_EQ(runs.size(), 2u);
  const pid_t daemon = DaemonOfFirstRun();
  run.Signal(SIGKILL);
  EXPECT_EQ(run.Finish().term_signal, SIGKILL);
  EXPECT_TRUE(GoneWithin(daemon, 30)) << "the private ckprofd outlived its client";
  for (const auto& e : runs) EXPECT_TRUE(GoneWithin(e.pid, 30)) << e.pid;
  EXPECT_FALSE(TmpIsEmpty());  // nobody was left to remove it...

  testing::WriteFile(dir_.File("ok.json"), testing::FwdConfigsText(1));
  CommandResult next = testing::RunCommand(LocalRun("ok.json"), Env(), dir_.path());
  EXPECT_EQ(next.exit_code, 0) << next.out << next.err;
  EXPECT_TRUE(TmpIsEmpty());  // ...until the next run --local
}

TEST_F(InterruptTest, CtrlCOnRunThroughTheDaemonCancelsItsJob) {
  testing::LaunchedDaemon d;
  ASSERT_NO_FATAL_FAILURE(StartDaemon(d));
  BackgroundCommand run(
      {BinPath("ckprof"), "--socket", d.socket(), "run", "hang.json", "--no-save"}, {},
      dir_.path());
  ASSERT_NO_FATAL_FAILURE(WaitUntilBothRun(d, run));
  run.Signal(SIGINT);
  CommandResult r = run.Finish();
  EXPECT_EQ(r.exit_code, 130) << r.out << r.err;
  EXPECT_NE(r.err.find("interrupted: cancelled job 1"), std::string::npos) << r.err;
  auto end = testing::WaitJobEnd(d.socket(), 1);
  ASSERT_TRUE(end.ok()) << end.error();
  EXPECT_EQ(end->state, JobState::kCancelled);
  EXPECT_EQ(d.StopGracefully(30), "");
}

// The daemon dies under a `ckprof run`: that is "daemon unreachable" (exit 2), not a failed
// task (exit 1), and the message says the daemon went away.
TEST_F(InterruptTest, RunWhoseDaemonDiesExitsTwo) {
  testing::LaunchedDaemon d;
  ASSERT_NO_FATAL_FAILURE(StartDaemon(d));
  BackgroundCommand run(
      {BinPath("ckprof"), "--socket", d.socket(), "run", "hang.json", "--no-save"}, {},
      dir_.path());
  ASSERT_NO_FATAL_FAILURE(WaitUntilBothRun(d, run));
  d.Stop(SIGKILL);  // its profilers are killed as leftovers when `d` goes
  CommandResult r = run.Finish();
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("ckprofd"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ckprof

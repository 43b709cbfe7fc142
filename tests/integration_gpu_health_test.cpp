// Issue 19.4 end to end: a real ckprofd on two GPUs with the CK emulator as profiler, one GPU
// broken (CKEMU_BAD_GPUS: every run there is CK's uncaught "HIP runtime error", SIGABRT). The
// broken GPU is drained once the other shows that the profiler works, every task succeeds on
// the good one, and `ckprof gpus` says why; with every GPU failing, none is drained.
#include <gtest/gtest.h>
#include <signal.h>

#include <string>

#include "common/json_util.h"
#include "tests/util/commands.h"
#include "tests/util/daemon_fixture.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"
#include "tests/util/requests.h"

namespace ckprof {
namespace {

class GpuHealthTest : public testing::EmulatorDaemonTest {
 protected:
  void SetUp() override {
    EmulatorDaemonTest::SetUp();
    daemon_.ExpectCleanStop();
  }
  void StartWithBrokenGpus(const std::string& bad) {
    auto o = EmulatorOptions("0-1");
    o.env.push_back("CKEMU_BAD_GPUS=" + bad);
    o.env.push_back("CKEMU_TIME_SCALE=10");  // a good GPU's task takes a few milliseconds
    Start(o);
  }
  testing::CommandResult Ckprof(std::vector<std::string> args) {
    args.insert(args.begin(), {testing::BinPath("ckprof"), "--socket", daemon_.socket()});
    return testing::RunCommand(args, {}, dir_.path());
  }
  std::vector<TaskResult> RunToEnd(int n, int magic_n = 0, int every = 1) {
    auto job = testing::SubmitContent(daemon_.socket(), testing::FwdConfigsText(n, magic_n, every));
    EXPECT_TRUE(job.ok()) << job.error();
    if (!job.ok()) return {};
    auto end = testing::WaitJobEnd(daemon_.socket(), *job);
    EXPECT_TRUE(end.ok()) << end.error();
    auto results = testing::JobResults(daemon_.socket(), *job);
    EXPECT_TRUE(results.ok()) << results.error();
    return results.ok() ? *results : std::vector<TaskResult>{};
  }
  nlohmann::json Gpus() {
    auto r = Ckprof({"gpus", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto j = ParseJson(r.out);
    return j.ok() ? *j : nlohmann::json::array();
  }
};

TEST_F(GpuHealthTest, ABrokenGpuIsDrainedAndItsTasksRunOnTheOther) {
  StartWithBrokenGpus("0");
  const auto results = RunToEnd(12);
  ASSERT_EQ(results.size(), 12u);
  int retried = 0;
  for (const auto& r : results) {
    EXPECT_EQ(r.state, TaskState::kSucceeded) << "#" << r.position << ": " << r.error;
    EXPECT_EQ(r.gpu, 1) << "#" << r.position;
    retried += r.attempts > 1;
  }
  EXPECT_EQ(retried, 3) << "the broken GPU's three tasks ran again";
  // At most health_failures (3) device errors before GPU 0 took nothing more.
  int on_gpu0 = 0;
  for (const auto& run : testing::ReadEmuRuns(emu_log_)) on_gpu0 += run.gpu == "0";
  EXPECT_EQ(on_gpu0, 3);

  nlohmann::json gpus = Gpus();
  ASSERT_EQ(gpus.size(), 2u) << gpus.dump();
  EXPECT_TRUE(gpus[0]["drained"].get<bool>()) << gpus.dump();
  const std::string why = gpus[0].value("drain_reason", "");
  EXPECT_NE(why.find("3 device errors in a row"), std::string::npos) << why;
  EXPECT_NE(why.find("hipErrorNoDevice"), std::string::npos) << why;
  EXPECT_NE(why.find("ckprof resume 0"), std::string::npos) << why;
  EXPECT_FALSE(gpus[1]["drained"].get<bool>());
  const std::string table = Ckprof({"gpus"}).out;
  EXPECT_NE(table.find("device errors in a row"), std::string::npos) << table;
  EXPECT_NE(testing::ReadFile(daemon_.log_path()).find("GPU 0 drained: 3 device errors in a row"),
            std::string::npos)
      << testing::ReadFile(daemon_.log_path());

  // Its drain lasts across a restart, with who and when (issue 33.7).
  EXPECT_EQ(gpus[0].value("drained_by", ""), "ckprofd") << gpus.dump();
  const double since = gpus[0].value("drained_at", 0.0);
  EXPECT_GT(since, 0) << gpus.dump();
  daemon_.Stop(SIGTERM);
  StartWithBrokenGpus("0");
  gpus = Gpus();
  ASSERT_EQ(gpus.size(), 2u) << gpus.dump();
  EXPECT_TRUE(gpus[0]["drained"].get<bool>()) << gpus.dump();
  EXPECT_EQ(gpus[0].value("drain_reason", ""), why);
  EXPECT_EQ(gpus[0].value("drained_at", 0.0), since);

  // An admin (root here) brings it back: the reason goes with the drain.
  auto resumed = Ckprof({"resume", "0"});
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  gpus = Gpus();
  EXPECT_FALSE(gpus[0]["drained"].get<bool>());
  EXPECT_FALSE(gpus[0].contains("drain_reason")) << gpus.dump();
}

// Device errors on every GPU: the profiler or the driver, not a GPU. None is drained, and the
// tasks end crashed, each once.
TEST_F(GpuHealthTest, DeviceErrorsOnEveryGpuDrainNone) {
  StartWithBrokenGpus("0,1");
  const auto results = RunToEnd(8);
  ASSERT_EQ(results.size(), 8u);
  for (const auto& r : results) {
    EXPECT_EQ(r.state, TaskState::kCrashed) << "#" << r.position;
    EXPECT_EQ(r.attempts, 1) << "#" << r.position;
  }
  for (const auto& g : Gpus()) EXPECT_FALSE(g["drained"].get<bool>()) << g.dump();
  EXPECT_NE(testing::ReadFile(daemon_.log_path()).find("not one GPU"), std::string::npos)
      << testing::ReadFile(daemon_.log_path());
}

// Two configs that fail with a device error wherever they run (N=9011) on good GPUs: fewer
// than health_failures, so no GPU is held; they fail once each, like any failure.
TEST_F(GpuHealthTest, AConfigsOwnDeviceErrorsDrainNothing) {
  StartWithBrokenGpus("");
  const auto results = RunToEnd(8, 9011, 4);  // #4 and #8
  ASSERT_EQ(results.size(), 8u);
  for (const auto& r : results) {
    const bool bad = r.position % 4 == 0;
    EXPECT_EQ(r.state, bad ? TaskState::kCrashed : TaskState::kSucceeded) << "#" << r.position;
    EXPECT_EQ(r.attempts, 1) << "#" << r.position;
  }
  for (const auto& g : Gpus()) EXPECT_FALSE(g["drained"].get<bool>()) << g.dump();
}

}  // namespace
}  // namespace ckprof

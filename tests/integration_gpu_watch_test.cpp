// Issue 19.1-19.2 end to end: a real ckprofd watching a fake sysfs tree (its sysfs_root), a real
// process standing for a colleague's training job on one GPU, and the CK emulator as profiler.
#include <gtest/gtest.h>
#include <signal.h>

#include <string>

#include "common/json_util.h"
#include "tests/util/commands.h"
#include "tests/util/daemon_fixture.h"
#include "tests/util/emulator.h"
#include "tests/util/fake_sysfs.h"
#include "tests/util/files.h"
#include "tests/util/requests.h"

namespace ckprof {
namespace {

using testing::FakeSysfs;

class GpuWatchTest : public testing::EmulatorDaemonTest {
 protected:
  void SetUp() override {
    EmulatorDaemonTest::SetUp();
    daemon_.ExpectCleanStop();
  }
  // A daemon on GPUs 0-1 of the fake tree, with `policy` for foreign processes.
  void StartWatching(const std::string& policy) {
    auto o =
        EmulatorOptions("0-1", R"({"sysfs_root": ")" + sys_.root() + R"(", "foreign_gpu_use": ")" +
                                   policy + R"(", "foreign_poll_ms": 20})");
    o.env.push_back("CKEMU_TIME_SCALE=30");  // a few tens of milliseconds a task
    Start(o);
  }
  testing::CommandResult Ckprof(std::vector<std::string> args) {
    args.insert(args.begin(), {testing::BinPath("ckprof"), "--socket", daemon_.socket()});
    return testing::RunCommand(args, {}, dir_.path());
  }
  std::vector<TaskResult> Results(int64_t job) {
    auto end = testing::WaitJobEnd(daemon_.socket(), job);
    EXPECT_TRUE(end.ok()) << end.error();
    auto results = testing::JobResults(daemon_.socket(), job);
    EXPECT_TRUE(results.ok()) << results.error();
    return results.ok() ? *results : std::vector<TaskResult>{};
  }

  FakeSysfs sys_{dir_.File("sysfs"), 2};
};

// Under "wait", GPU 0 with a foreign process takes no task and `ckprof gpus` names the process;
// once it is gone the GPU takes work again by itself. Every result carries the GPU's state.
TEST_F(GpuWatchTest, AForeignProcessKeepsTasksOffItsGpuUntilItEnds) {
  testing::BackgroundCommand training({"sleep", "300"}, {}, dir_.path());
  sys_.UseGpu(training.pid(), 0);
  StartWatching("wait");
  const std::string text = Ckprof({"gpus"}).out;
  EXPECT_NE(text.find("foreign"), std::string::npos) << text;
  EXPECT_NE(text.find("busy: pid " + std::to_string(training.pid()) + " ("), std::string::npos)
      << text;
  auto job = testing::SubmitContent(daemon_.socket(), testing::FwdConfigsText(6));
  ASSERT_TRUE(job.ok()) << job.error();
  for (const auto& r : Results(*job)) {
    EXPECT_EQ(r.gpu, 1) << "#" << r.position << " ran beside the foreign process";
    EXPECT_TRUE(r.contended.empty());
    ASSERT_TRUE(r.gpu_state.has_value()) << "#" << r.position;
    EXPECT_EQ(r.gpu_state->name, "AMD Instinct MI300X");
    EXPECT_EQ(r.gpu_state->uuid, "serial-1");
    EXPECT_EQ(r.gpu_state->arch, "gfx942");
    ASSERT_TRUE(r.gpu_state->before.has_value());
    EXPECT_EQ(r.gpu_state->before->sclk_mhz, 2100.0);
    EXPECT_EQ(r.gpu_state->before->temperature_c, 45.0);
    EXPECT_EQ(r.gpu_state->before->power_w, 150.0);
  }
  // The training job ends (its KFD entry stays until the probe finds the pid gone).
  training.Signal(SIGKILL);
  training.Finish();
  auto next = testing::SubmitContent(daemon_.socket(), testing::FwdConfigsText(4));
  ASSERT_TRUE(next.ok()) << next.error();
  bool gpu0 = false;
  for (const auto& r : Results(*next)) gpu0 = gpu0 || r.gpu == 0;
  EXPECT_TRUE(gpu0) << "GPU 0 takes work again once the foreign process is gone";
  EXPECT_EQ(Ckprof({"gpus"}).out.find("busy:"), std::string::npos);
}

// Under "flag", tasks run beside the foreign process and say so, in results --format json and
// csv and the table; compare leaves them out unless asked. The training carries the daemon's
// own CKPROFD_STATE variable, as anyone may copy it from her profiler's environment: it is
// foreign all the same (ours are the processes in the daemon's runs' cgroups).
TEST_F(GpuWatchTest, FlaggedResultsSayTheyWereContended) {
  const std::string marker = "CKPROFD_STATE=" + dir_.File("state");
  testing::BackgroundCommand training({"sleep", "300"}, {marker}, dir_.path());
  sys_.UseGpu(training.pid(), 0);
  sys_.UseGpu(training.pid(), 1);
  StartWatching("flag");
  ASSERT_EQ("CKPROFD_STATE=" + daemon_.state_dir(), marker);
  auto job = testing::SubmitContent(daemon_.socket(), testing::FwdConfigsText(3));
  ASSERT_TRUE(job.ok()) << job.error();
  for (const auto& r : Results(*job)) {
    ASSERT_EQ(r.contended.size(), 1u) << "#" << r.position;
    EXPECT_EQ(r.contended[0].pid, training.pid());
    EXPECT_EQ(r.contended[0].command, "sleep 300");
  }
  const std::string id = std::to_string(*job);
  auto file = ParseJson(Ckprof({"results", id, "--format", "json"}).out);
  ASSERT_TRUE(file.ok());
  const auto& row = (*file)["results"][0];
  EXPECT_EQ(row["contended"], true) << row;
  EXPECT_EQ(row["contended_by"][0]["pid"], training.pid());
  EXPECT_EQ(row["gpu_state"]["arch"], "gfx942");
  EXPECT_NE(Ckprof({"results", id, "--format", "csv"}).out.find("sleep 300"), std::string::npos);
  const std::string table = Ckprof({"results", id, "--format", "table"}).out;
  EXPECT_NE(table.find("succeeded*"), std::string::npos) << table;
  EXPECT_NE(table.find("* contended"), std::string::npos) << table;
  testing::CommandResult compared = Ckprof({"compare", id, id, "--format", "json"});
  ASSERT_EQ(compared.exit_code, 0) << compared.err;
  auto cmp = ParseJson(compared.out);
  ASSERT_TRUE(cmp.ok());
  EXPECT_EQ((*cmp)["summary"]["compared"], 0) << (*cmp)["summary"];
  EXPECT_NE(compared.err.find("contended"), std::string::npos) << compared.err;
  auto all = ParseJson(Ckprof({"compare", id, id, "--format", "json", "--include-contended"}).out);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)["summary"]["compared"], 3) << (*all)["summary"];
}

}  // namespace
}  // namespace ckprof

// Issue 22 end to end: ckprofd with the executor "slurm" on a real one-node Slurm cluster
// (scripts/slurm-local.sh start: Debian's slurm-wlm, 8 fake GRES GPUs). A sweep of 40 configs
// runs every task once, each as its own Slurm job of the submitting user on exactly one granted
// GPU (HIP_VISIBLE_DEVICES as Slurm pinned); cancel is scancel; a timeout ends the run; a node
// failure (scontrol update state=down) requeues the tasks it killed; kill -9 of ckprofd
// mid-sweep and a restart run nothing twice. The emulator's log (CKEMU_LOG) says which runs
// happened where; squeue says whose jobs they were.
//
// Skipped, saying why, where no such cluster runs; CKPROF_SLURM_REQUIRED=1 (CI's Slurm stage)
// makes that a failure. The cases change the one cluster (a node down): run serially.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "common/json_util.h"
#include "tests/util/commands.h"
#include "tests/util/daemon_fixture.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"
#include "tests/util/users.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using testing::CommandResult;
using testing::RunCommand;
using testing::SystemUser;

constexpr int kClusterGpus = 8;

// Why the cluster cannot be used here; "" when it can.
std::string ClusterMissing() {
  // (Where the Slurm commands are installed but no slurmctld runs, sinfo retries for ~10 s.)
  CommandResult r = RunCommand({"/bin/sh", "-c", "timeout 3 sinfo -h -o '%G %T' 2>&1"});
  if (r.exit_code != 0 || r.out.find("gpu:") == std::string::npos) {
    return "no Slurm cluster with GPUs answers (sinfo: " + r.out +
           "); start the one-node cluster with CKPROF_SLURM_GPUS=8 scripts/slurm-local.sh start "
           "(as root)";
  }
  const size_t at = r.out.find("gpu:");
  if (std::atoi(r.out.c_str() + at + 4) < kClusterGpus) {
    return "the Slurm node has fewer than 8 GPUs (" + r.out +
           "): CKPROF_SLURM_GPUS=8 "
           "scripts/slurm-local.sh stop/start";
  }
  if (geteuid() != 0) return "the Slurm tests run as root (jobs are submitted for other users)";
  return "";
}

class SlurmTest : public testing::EmulatorDaemonTest {
 protected:
  void SetUp() override {
    EmulatorDaemonTest::SetUp();
    if (std::string why = ClusterMissing(); !why.empty()) {
      const char* required = std::getenv("CKPROF_SLURM_REQUIRED");
      if (required && std::string(required) == "1") FAIL() << why;
      GTEST_SKIP() << why;
    }
    work_ = dir_.File("work");
    mkdir(work_.c_str(), 0755);
    chmod(work_.c_str(), 0755);
  }
  void TearDown() override {
    // A node a case took down is up again for the next (ReturnToService=2 does it too).
    if (node_down_) RunCommand({"/bin/sh", "-c", "scontrol update nodename=ALL state=resume"});
  }

  std::string ConfigJson(const std::string& partition = "gpu") const {
    json exec = {{"kind", "slurm"},
                 {"partition", partition},
                 {"gres", "gpu:1"},
                 {"max_in_flight", kClusterGpus},
                 {"work_dir", work_},
                 {"poll_ms", 100},
                 // The daemon's environment (CKEMU_LOG, CKEMU_TIME_SCALE) reaches the emulator.
                 {"sbatch_args", {"--export=ALL"}}};
    return json{{"executor", exec}, {"socket_mode", "0666"}}.dump();
  }
  void StartSlurmDaemon(double time_scale = 0.5) {
    auto o = EmulatorOptions("0-3", ConfigJson());
    o.env.push_back("CKEMU_TIME_SCALE=" + std::to_string(time_scale));
    Start(o);
  }
  CommandResult Ckprof(std::vector<std::string> args, const SystemUser* user = nullptr) {
    std::vector<std::string> argv = user ? user->As() : std::vector<std::string>{};
    argv.insert(argv.end(), {testing::SharedBinPath("ckprof"), "--socket", daemon_.socket()});
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, {}, dir_.path());
  }
  std::string Submit(const std::string& text, std::vector<std::string> extra = {},
                     const SystemUser* user = nullptr) {
    const std::string file = dir_.File("configs-" + std::to_string(++files_) + ".json");
    testing::WriteFile(file, text);
    chmod(file.c_str(), 0644);
    extra.insert(extra.begin(), {"submit", file});
    auto r = Ckprof(extra, user);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  }
  json Results(const std::string& job) {
    auto r = Ckprof({"results", job, "--format", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto parsed = ParseJson(r.out);
    EXPECT_TRUE(parsed.ok()) << r.out;
    return parsed.ok() ? (*parsed)["results"] : json::array();
  }
  // Waits until the emulator logged `n` starts (profilers running in Slurm jobs).
  bool WaitForStarts(size_t n, double timeout_s = 60) {
    return testing::WaitForEmuRuns(emu_log_, n, timeout_s).size() >= n;
  }
  std::string SlurmField(int64_t slurm_job, const std::string& format) {
    auto r =
        RunCommand({"squeue", "-h", "-t", "all", "-j", std::to_string(slurm_job), "-o", format});
    std::string out = r.out;
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
  }

  void RestartMidSweep(int sig);

  std::string work_;
  int files_ = 0;
  bool node_down_ = false;
};

// 40 configs on 8 GPUs, submitted by an ordinary user: every task runs once, as its own Slurm
// job of that user, on one granted GPU that no other of our runs holds meanwhile.
TEST_F(SlurmTest, SweepRunsEveryTaskOnceOnOneGrantedGpu) {
  SystemUser alice("ckslurm-alice");
  ASSERT_TRUE(alice.ok());
  StartSlurmDaemon();
  const std::string job = Submit(testing::FwdConfigsText(40), {"--name", "sweep40"}, &alice);
  auto waited = Ckprof({"wait", job});
  ASSERT_EQ(waited.exit_code, 0) << waited.err;
  json results = Results(job);
  ASSERT_EQ(results.size(), 40u);
  std::set<int64_t> slurm_jobs;
  for (const auto& r : results) {
    EXPECT_EQ(r["status"], "succeeded") << r.dump();
    EXPECT_EQ(r["attempts"], 1) << r.dump();
    EXPECT_EQ(r["executor"], "slurm") << r.dump();
    ASSERT_TRUE(r["executor_job_id"].is_number()) << r.dump();
    ASSERT_TRUE(r["node"].is_string()) << r.dump();
    ASSERT_TRUE(r["gpu"].is_number()) << r.dump();
    EXPECT_GE(r["gpu"].get<int>(), 0);
    EXPECT_LT(r["gpu"].get<int>(), kClusterGpus);
    const int64_t id = r["executor_job_id"].get<int64_t>();
    slurm_jobs.insert(id);
    // Slurm's record: the job was the user's, named after the job, ended COMPLETED.
    EXPECT_EQ(SlurmField(id, "%u|%j|%T"), alice.name() + "|sweep40|COMPLETED");
  }
  EXPECT_EQ(slurm_jobs.size(), 40u) << "one Slurm job per task";
  // The emulator ran 40 times, once per config, as alice, each pinned to one GPU: the GPU Slurm
  // granted (CUDA_VISIBLE_DEVICES) is HIP_VISIBLE_DEVICES too.
  auto runs = testing::ReadEmuRuns(emu_log_);
  ASSERT_EQ(runs.size(), 40u);
  std::map<std::string, int> per_config;
  std::map<std::string, std::vector<std::pair<double, double>>> per_gpu;
  for (const auto& run : runs) {
    std::string key;
    for (const auto& a : run.argv) key += a + " ";
    ++per_config[key];
    EXPECT_EQ(run.uid, static_cast<int>(alice.uid()));
    EXPECT_EQ(run.outcome, "succeeded");
    ASSERT_EQ(run.gpu.find(','), std::string::npos) << "one GPU: " << run.gpu;
    ASSERT_FALSE(run.gpu.empty());
    EXPECT_EQ(run.env.count("CUDA_VISIBLE_DEVICES") ? run.env.at("CUDA_VISIBLE_DEVICES") : "",
              run.gpu);
    per_gpu[run.gpu].emplace_back(run.start, run.end);
  }
  EXPECT_EQ(per_config.size(), 40u);
  for (auto& [gpu, spans] : per_gpu) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) {
      EXPECT_GE(spans[i].first, spans[i - 1].second) << "two runs at once on GPU " << gpu;
    }
  }
  // `ckprof gpus` shows the cluster's node and its 8 GPUs.
  auto gpus = Ckprof({"gpus", "--json"});
  ASSERT_EQ(gpus.exit_code, 0) << gpus.err;
  auto g = ParseJson(gpus.out);
  ASSERT_TRUE(g.ok()) << gpus.out;
  EXPECT_EQ((*g)["executor"], "slurm");
  ASSERT_FALSE((*g)["cluster"].empty()) << gpus.out;
  EXPECT_NE((*g)["cluster"][0]["gres"].get<std::string>().find("gpu:"), std::string::npos);
}

// Cancel is scancel: the running tasks' Slurm jobs end CANCELLED, the job's tasks cancelled.
TEST_F(SlurmTest, CancelEndsTheSlurmJobs) {
  StartSlurmDaemon();
  const std::string job = Submit(testing::FwdConfigsText(3, /*magic_n=*/9001));  // hang
  ASSERT_TRUE(WaitForStarts(3)) << testing::ReadFile(daemon_.log_path());
  auto c = Ckprof({"cancel", job});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  Ckprof({"wait", job});  // (it says the job was cancelled)
  json results = Results(job);
  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) {
    EXPECT_EQ(r["status"], "cancelled") << r.dump();
    if (r["executor_job_id"].is_number()) {
      EXPECT_EQ(SlurmField(r["executor_job_id"].get<int64_t>(), "%T"), "CANCELLED");
    }
  }
}

// A task's timeout ends its run on the node (the batch script's own timer: Slurm counts whole
// minutes) and the task timed out.
TEST_F(SlurmTest, TimeoutEndsTheRun) {
  StartSlurmDaemon();
  const std::string job = Submit(testing::FwdConfigsText(1, /*magic_n=*/9001), {"--timeout", "2"});
  Ckprof({"wait", job});
  json results = Results(job);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0]["status"], "timed_out") << results[0].dump();
  EXPECT_NE(results[0]["error"].get<std::string>().find("timed out after 2 s"), std::string::npos)
      << results[0].dump();
}

// A node that fails under running tasks (scontrol update state=down: their jobs end
// NODE_FAIL) has them requeued and run again once it is back.
TEST_F(SlurmTest, NodeFailureRequeuesTheTasks) {
  StartSlurmDaemon();
  const std::string job = Submit(testing::FwdConfigsText(2, /*magic_n=*/9006));  // slow start
  ASSERT_TRUE(WaitForStarts(2)) << testing::ReadFile(daemon_.log_path());
  node_down_ = true;
  auto down = RunCommand({"/bin/sh", "-c",
                          "scontrol update nodename=$(sinfo -h -N -o %N | head -1) state=down "
                          "reason=ckprof-test"});
  ASSERT_EQ(down.exit_code, 0) << down.err;
  auto waited = Ckprof({"wait", job});
  ASSERT_EQ(waited.exit_code, 0) << waited.err << testing::ReadFile(daemon_.log_path());
  json results = Results(job);
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) {
    EXPECT_EQ(r["status"], "succeeded") << r.dump();
    EXPECT_EQ(r["attempts"], 2) << r.dump();
  }
  EXPECT_NE(testing::ReadFile(daemon_.log_path()).find("NODE_FAIL"), std::string::npos);
}

// A submission Slurm refuses (here: no such partition) ends the task spawn_failed with sbatch's
// own words; nothing waits for it.
TEST_F(SlurmTest, ASubmissionSlurmRefusesSaysWhy) {
  Start(EmulatorOptions("0-3", ConfigJson("no-such-partition")));
  const std::string job = Submit(testing::FwdConfigsText(2));
  Ckprof({"wait", job});
  json results = Results(job);
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) {
    EXPECT_EQ(r["status"], "spawn_failed") << r.dump();
    EXPECT_NE(r["error"].get<std::string>().find("sbatch refused it"), std::string::npos)
        << r.dump();
    EXPECT_NE(r["error"].get<std::string>().find("partition"), std::string::npos) << r.dump();
  }
  EXPECT_TRUE(testing::ReadEmuRuns(emu_log_).empty());
}

// A stop mid-sweep (kill -9, or SIGTERM: a stopping ckprofd leaves its jobs to Slurm), then a
// restart: the jobs in Slurm are followed again, the queued tasks submitted, and no task runs
// twice.
void SlurmTest::RestartMidSweep(int sig) {
  StartSlurmDaemon(/*time_scale=*/2);
  daemon_.KeepLeftovers();
  const std::string job = Submit(testing::FwdConfigsText(40));
  ASSERT_TRUE(WaitForStarts(10)) << testing::ReadFile(daemon_.log_path());
  daemon_.Stop(sig);
  auto o = EmulatorOptions("0-3", ConfigJson());
  o.env.push_back("CKEMU_TIME_SCALE=2");
  Start(o);
  auto waited = Ckprof({"wait", job});
  ASSERT_EQ(waited.exit_code, 0) << waited.err;
  json results = Results(job);
  ASSERT_EQ(results.size(), 40u);
  for (const auto& r : results) {
    EXPECT_EQ(r["status"], "succeeded") << r.dump();
    EXPECT_EQ(r["attempts"], 1) << r.dump();
  }
  auto runs = testing::ReadEmuRuns(emu_log_);
  std::map<std::string, int> per_config;
  for (const auto& run : runs) {
    std::string key;
    for (const auto& a : run.argv) key += a + " ";
    ++per_config[key];
  }
  EXPECT_EQ(runs.size(), 40u);
  for (const auto& [config, n] : per_config) EXPECT_EQ(n, 1) << config;
  EXPECT_NE(testing::ReadFile(daemon_.log_path()).find("followed again"), std::string::npos);
}

TEST_F(SlurmTest, KillNineMidSweepRunsNothingTwice) { RestartMidSweep(SIGKILL); }

TEST_F(SlurmTest, StopMidSweepLeavesTheJobsToSlurmAndFollowsThemAfter) { RestartMidSweep(SIGTERM); }

}  // namespace
}  // namespace ckprof

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
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>
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
    // What this case's daemon left in Slurm (its allocations wait for it a while) goes too:
    // the next case needs the GPUs. Its jobs' comments name its state dir.
    RunCommand({"/bin/sh", "-c",
                "squeue -h -t all -o '%i|%k' | grep -F '" + dir_.path() +
                    "/' | cut -d'|' -f1 | xargs -r scancel"});
  }

  // `more`: executor settings added or changed (the allocation mode's).
  std::string ConfigJson(const std::string& partition = "gpu", const json& more = {}) const {
    json exec = {{"kind", "slurm"},
                 {"partition", partition},
                 {"gres", "gpu:1"},
                 {"max_in_flight", kClusterGpus},
                 {"work_dir", work_},
                 {"poll_ms", 100},
                 // The daemon's environment (CKEMU_LOG, CKEMU_TIME_SCALE) reaches the emulator.
                 {"sbatch_args", {"--export=ALL"}}};
    if (more.is_object()) exec.update(more);
    return json{{"executor", exec}, {"socket_mode", "0666"}}.dump();
  }
  // The allocation mode: at most `max` allocations of one GPU each.
  static json Allocations(int max, const std::string& time = "2:00:00", double idle_s = 60) {
    return {{"mode", "allocations"},
            {"max_allocations", max},
            {"allocation_time", time},
            {"idle_release_s", idle_s},
            {"agent_listen", "127.0.0.1"},
            {"agent_host", "127.0.0.1"},
            {"agent_bin", testing::SharedBinPath("ckprof-agent")}};
  }
  void StartSlurmDaemon(double time_scale = 0.5, const json& more = {}) {
    auto o = EmulatorOptions("0-3", ConfigJson("gpu", more));
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

  // Every result succeeded at its first attempt, run by Slurm on a GPU: the Slurm jobs they ran
  // in.
  std::set<int64_t> SucceededInSlurm(const json& results) {
    std::set<int64_t> slurm_jobs;
    for (const auto& r : results) {
      EXPECT_EQ(r["status"], "succeeded") << r.dump();
      EXPECT_EQ(r["attempts"], 1) << r.dump();
      EXPECT_EQ(r["executor"], "slurm") << r.dump();
      EXPECT_TRUE(r["executor_job_id"].is_number()) << r.dump();
      EXPECT_TRUE(r["node"].is_string()) << r.dump();
      EXPECT_TRUE(r["gpu"].is_number()) << r.dump();
      if (r["gpu"].is_number()) {
        EXPECT_GE(r["gpu"].get<int>(), 0);
        EXPECT_LT(r["gpu"].get<int>(), kClusterGpus);
      }
      if (r["executor_job_id"].is_number()) slurm_jobs.insert(r["executor_job_id"].get<int64_t>());
    }
    return slurm_jobs;
  }
  void RestartMidSweep(int sig, const json& more = {});
  void EndAnAllocationUnderATask(const std::function<void(const json&)>& end,
                                 const std::string& says);
  // What the emulator ran: each config's number of runs; no two runs at once on one GPU.
  std::map<std::string, int> RunsPerConfig(int uid = -1) {
    std::map<std::string, int> per_config;
    std::map<std::string, std::vector<std::pair<double, double>>> per_gpu;
    for (const auto& run : testing::ReadEmuRuns(emu_log_)) {
      std::string key;
      for (const auto& a : run.argv) key += a + " ";
      ++per_config[key];
      if (uid >= 0) {
        EXPECT_EQ(run.uid, uid);
      }
      EXPECT_EQ(run.gpu.find(','), std::string::npos) << "one GPU: " << run.gpu;
      EXPECT_EQ(run.env.count("CUDA_VISIBLE_DEVICES") ? run.env.at("CUDA_VISIBLE_DEVICES") : "",
                run.gpu)
          << "pinned to a GPU Slurm did not grant";
      per_gpu[run.gpu].emplace_back(run.start, run.end);
    }
    for (auto& [gpu, spans] : per_gpu) {
      std::sort(spans.begin(), spans.end());
      for (size_t i = 1; i < spans.size(); ++i) {
        EXPECT_GE(spans[i].first, spans[i - 1].second) << "two runs at once on GPU " << gpu;
      }
    }
    return per_config;
  }

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
  const std::set<int64_t> slurm_jobs = SucceededInSlurm(results);
  // Slurm's record of each: the user's, named after the job, ended COMPLETED.
  for (int64_t id : slurm_jobs) {
    EXPECT_EQ(SlurmField(id, "%u|%j|%T"), alice.name() + "|sweep40|COMPLETED");
  }
  EXPECT_EQ(slurm_jobs.size(), 40u) << "one Slurm job per task";
  // The emulator ran 40 times, once per config, as alice, each pinned to one GPU: the GPU Slurm
  // granted (CUDA_VISIBLE_DEVICES) is HIP_VISIBLE_DEVICES too.
  auto runs = testing::ReadEmuRuns(emu_log_);
  ASSERT_EQ(runs.size(), 40u);
  for (const auto& run : runs) EXPECT_EQ(run.outcome, "succeeded");
  EXPECT_EQ(RunsPerConfig(static_cast<int>(alice.uid())).size(), 40u);
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

// `log J#N -f` of a task running in Slurm shows its output as it is written (read from its
// files in the work dir at each poll), not only once it ended.
TEST_F(SlurmTest, LogFollowsATaskRunningInSlurmLive) {
  StartSlurmDaemon();
  const std::string job = Submit(testing::FwdConfigsText(1, /*magic_n=*/9001), {"--timeout", "60"});
  ASSERT_TRUE(WaitForStarts(1)) << testing::ReadFile(daemon_.log_path());
  testing::BackgroundCommand follow(
      {testing::SharedBinPath("ckprof"), "--socket", daemon_.socket(), "log", job + "#1", "-f"});
  EXPECT_TRUE(follow.WaitForOutput("found 12 instances")) << "no live output";
  ASSERT_EQ(Ckprof({"cancel", job}).exit_code, 0);
  follow.Finish();
}

// `clean` of an ended job removes its files from the work dir (scripts, outputs), as their
// owner; another job's stay.
TEST_F(SlurmTest, CleanRemovesTheJobsFilesFromTheWorkDir) {
  SystemUser alice("ckslurm-alice");
  ASSERT_TRUE(alice.ok());
  StartSlurmDaemon();
  const std::string first = Submit(testing::FwdConfigsText(2), {}, &alice);
  const std::string second = Submit(testing::FwdConfigsText(1), {}, &alice);
  ASSERT_EQ(Ckprof({"wait", first, second}).exit_code, 0);
  const std::string first_dir = work_ + "/" + alice.name() + "/job-" + first;
  const std::string second_dir = work_ + "/" + alice.name() + "/job-" + second;
  struct stat st {};
  ASSERT_EQ(lstat(first_dir.c_str(), &st), 0) << first_dir;
  auto c = Ckprof({"clean", first}, &alice);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_TRUE(testing::WaitForGone(first_dir)) << testing::ReadFile(daemon_.log_path());
  EXPECT_EQ(lstat(second_dir.c_str(), &st), 0) << "another job's files went too";
}

// A stop mid-sweep (kill -9, or SIGTERM: a stopping ckprofd leaves its jobs to Slurm), then a
// restart: the jobs in Slurm are followed again, the queued tasks submitted, and no task runs
// twice.
void SlurmTest::RestartMidSweep(int sig, const json& more) {
  StartSlurmDaemon(/*time_scale=*/2, more);
  daemon_.KeepLeftovers();
  const std::string job = Submit(testing::FwdConfigsText(40));
  ASSERT_TRUE(WaitForStarts(10)) << testing::ReadFile(daemon_.log_path());
  daemon_.Stop(sig);
  auto o = EmulatorOptions("0-3", ConfigJson("gpu", more));
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
  EXPECT_EQ(testing::ReadEmuRuns(emu_log_).size(), 40u);
  for (const auto& [config, n] : RunsPerConfig()) EXPECT_EQ(n, 1) << config;
  EXPECT_NE(testing::ReadFile(daemon_.log_path()).find("followed again"), std::string::npos);
}

TEST_F(SlurmTest, KillNineMidSweepRunsNothingTwice) { RestartMidSweep(SIGKILL); }

TEST_F(SlurmTest, StopMidSweepLeavesTheJobsToSlurmAndFollowsThemAfter) { RestartMidSweep(SIGTERM); }

// Issue 35, the allocation mode: 40 configs of an ordinary user run in at most 4 allocations,
// each a Slurm job of that user whose agent runs the user's tasks one at a time on its GPU:
// every task once, pinned to the GPU Slurm granted, never two at once on a GPU; `gpus` lists
// the allocations.
TEST_F(SlurmTest, AllocationsRunASweepInAFewSlurmJobsOfItsUser) {
  SystemUser alice("ckslurm-alice");
  ASSERT_TRUE(alice.ok());
  StartSlurmDaemon(0.5, Allocations(4));
  const std::string job = Submit(testing::FwdConfigsText(40), {"--name", "alloc40"}, &alice);
  ASSERT_TRUE(WaitForStarts(1)) << testing::ReadFile(daemon_.log_path());
  auto gpus = Ckprof({"gpus", "--json"});
  ASSERT_EQ(gpus.exit_code, 0) << gpus.err;
  auto g = ParseJson(gpus.out);
  ASSERT_TRUE(g.ok()) << gpus.out;
  ASSERT_TRUE((*g)["allocations"].is_array()) << gpus.out;
  ASSERT_FALSE((*g)["allocations"].empty()) << gpus.out;
  EXPECT_EQ((*g)["allocations"][0]["user"], alice.name()) << gpus.out;
  auto waited = Ckprof({"wait", job});
  ASSERT_EQ(waited.exit_code, 0) << waited.err << testing::ReadFile(daemon_.log_path());
  json results = Results(job);
  ASSERT_EQ(results.size(), 40u);
  const std::set<int64_t> slurm_jobs = SucceededInSlurm(results);
  EXPECT_LE(slurm_jobs.size(), 4u) << "tasks run in allocations, not a Slurm job each";
  for (int64_t id : slurm_jobs) {
    EXPECT_EQ(SlurmField(id, "%u|%j"), alice.name() + "|ckprof-" + alice.name());
  }
  auto per_config = RunsPerConfig(static_cast<int>(alice.uid()));
  EXPECT_EQ(per_config.size(), 40u);
  for (const auto& [config, n] : per_config) EXPECT_EQ(n, 1) << config;
  auto shown = Ckprof({"gpus"});
  EXPECT_NE(shown.out.find("allocation(s) in Slurm"), std::string::npos) << shown.out;
}

// kill -9 of ckprofd mid-sweep in the allocation mode: the agents connect to the next one,
// which follows their runs; nothing runs twice, nothing is lost.
TEST_F(SlurmTest, AllocationsFollowAKillNineAndRunNothingTwice) {
  RestartMidSweep(SIGKILL, Allocations(4));
}

// An allocation with nothing to run is let go after idle_release_s: its Slurm job ends
// COMPLETED (the agent exits when released) and `gpus` lists it no more.
TEST_F(SlurmTest, AnIdleAllocationIsLetGo) {
  StartSlurmDaemon(0.5, Allocations(2, "2:00:00", /*idle_s=*/1));
  const std::string job = Submit(testing::FwdConfigsText(2));
  ASSERT_EQ(Ckprof({"wait", job}).exit_code, 0);
  json results = Results(job);
  ASSERT_EQ(results.size(), 2u);
  const int64_t slurm_job = results[0]["executor_job_id"].get<int64_t>();
  // Each allocation's secret goes with it, once Slurm says it ended. (The two tasks may have
  // run in one allocation or in two: every one of them is let go.)
  auto dirs = RunCommand({"/bin/sh", "-c", "ls -d " + work_ + "/*/alloc-*"});
  ASSERT_EQ(dirs.exit_code, 0) << dirs.err;
  std::istringstream listed(dirs.out);
  for (std::string dir; std::getline(listed, dir);) {
    EXPECT_TRUE(testing::WaitForGone(dir + "/secret")) << dir << " not let go\n"
                                                       << testing::ReadFile(daemon_.log_path());
  }
  EXPECT_EQ(SlurmField(slurm_job, "%T"), "COMPLETED");
  auto gpus = ParseJson(Ckprof({"gpus", "--json"}).out);
  ASSERT_TRUE(gpus.ok());
  EXPECT_FALSE(gpus->contains("allocations")) << gpus->dump();
  EXPECT_NE(testing::ReadFile(daemon_.log_path()).find(" task(s): idle for "), std::string::npos)
      << testing::ReadFile(daemon_.log_path());
}

// A task whose timeout cannot fit in an allocation's time is refused, saying so; one that fits
// runs.
TEST_F(SlurmTest, AnAllocationTakesNoTaskThatCannotFinishInItsTime) {
  StartSlurmDaemon(0.5, Allocations(2, "2"));  // two minutes
  const std::string too_long = Submit(testing::FwdConfigsText(1), {"--timeout", "300"});
  const std::string fits = Submit(testing::FwdConfigsText(1), {"--timeout", "30"});
  Ckprof({"wait", too_long});
  json refused = Results(too_long);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0]["status"], "spawn_failed") << refused[0].dump();
  EXPECT_NE(refused[0]["error"].get<std::string>().find("allocation_time 2"), std::string::npos)
      << refused[0].dump();
  auto waited = Ckprof({"wait", fits});
  ASSERT_EQ(waited.exit_code, 0) << waited.err;
  json ran = Results(fits);
  ASSERT_EQ(ran.size(), 1u);
  EXPECT_EQ(ran[0]["status"], "succeeded") << ran[0].dump();
}

// An allocation that ends under a running task has the task requeued with the reason and run
// again in a new allocation; cancel then stops the task, not its allocation. `end` ends the
// allocation (given as `gpus --json` lists it); the daemon's log must say `says`.
void SlurmTest::EndAnAllocationUnderATask(const std::function<void(const json&)>& end,
                                          const std::string& says) {
  StartSlurmDaemon(0.5, Allocations(2));
  const std::string job = Submit(testing::FwdConfigsText(1, /*magic_n=*/9001), {"--timeout", "60"});
  ASSERT_TRUE(WaitForStarts(1)) << testing::ReadFile(daemon_.log_path());
  auto gpus = ParseJson(Ckprof({"gpus", "--json"}).out);
  ASSERT_TRUE(gpus.ok());
  ASSERT_EQ((*gpus)["allocations"].size(), 1u) << gpus->dump();
  const json first = (*gpus)["allocations"][0];
  end(first);
  ASSERT_TRUE(WaitForStarts(2)) << "the task did not run again\n"
                                << testing::ReadFile(daemon_.log_path());
  ASSERT_EQ(Ckprof({"cancel", job}).exit_code, 0);
  Ckprof({"wait", job});
  json results = Results(job);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0]["status"], "cancelled") << results[0].dump();
  EXPECT_EQ(results[0]["attempts"], 2) << results[0].dump();
  auto after = ParseJson(Ckprof({"gpus", "--json"}).out);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ((*after)["allocations"].size(), 1u) << after->dump();
  EXPECT_NE((*after)["allocations"][0]["job_id"], first["job_id"]);
  EXPECT_EQ((*after)["allocations"][0]["state"], "ready") << after->dump();
  EXPECT_NE(testing::ReadFile(daemon_.log_path()).find(says), std::string::npos)
      << testing::ReadFile(daemon_.log_path());
}

TEST_F(SlurmTest, AnAllocationScancelledRequeuesItsTask) {
  EndAnAllocationUnderATask(
      [](const json& a) {
        ASSERT_EQ(RunCommand({"scancel", std::to_string(a["job_id"].get<int64_t>())}).exit_code, 0);
      },
      "ended: Slurm ended it CANCELLED");
}

// Anyone on the cluster can reach the agents' port: a connection that names a real allocation
// but cannot seal its lines with the allocation's secret is refused and closed, from another
// real user, and the allocation and its task go on undisturbed.
TEST_F(SlurmTest, AForgedAgentIsRefusedAndTheAllocationGoesOn) {
  SystemUser mallory("ckslurm-mallory");
  ASSERT_TRUE(mallory.ok());
  StartSlurmDaemon(0.5, Allocations(2));
  const std::string job = Submit(testing::FwdConfigsText(1, /*magic_n=*/9001), {"--timeout", "60"});
  ASSERT_TRUE(WaitForStarts(1)) << testing::ReadFile(daemon_.log_path());
  auto gpus = ParseJson(Ckprof({"gpus", "--json"}).out);
  ASSERT_TRUE(gpus.ok());
  ASSERT_EQ((*gpus)["allocations"].size(), 1u) << gpus->dump();
  const std::string name = (*gpus)["allocations"][0]["name"].get<std::string>();
  // The address the agents read, from the work dir (world-readable).
  auto address = RunCommand({"/bin/sh", "-c", "cat " + work_ + "/.*.agents"});
  ASSERT_EQ(address.exit_code, 0) << address.err;
  const std::string port = address.out.substr(address.out.rfind(':') + 1);
  // mallory: the opening line, the challenge back, then a 'ready' with a made-up seal; the
  // daemon must close the connection rather than answer.
  const std::string forge =
      "exec 3<>/dev/tcp/127.0.0.1/" + port.substr(0, port.find('\n')) +
      " || exit 9; printf 'ckprof-agent/1 hello " + name +
      " 00112233445566778899aabbccddeeff\\n' >&3; read -r challenge <&3 || exit 8; "
      "echo \"$challenge\"; printf '1 %064d {\"type\":\"ready\"}\\n' 0 >&3; "
      "if read -r -t 10 reply <&3; then echo \"answered: $reply\"; exit 7; fi; echo closed";
  std::vector<std::string> argv = mallory.As();
  argv.insert(argv.end(), {"/bin/bash", "-c", forge});
  auto r = RunCommand(argv);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ckprof-agent/1 challenge"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("closed"), std::string::npos) << r.out;
  EXPECT_NE(testing::ReadFile(daemon_.log_path()).find("refused: refused a message"),
            std::string::npos)
      << testing::ReadFile(daemon_.log_path());
  // The real agent still serves its task.
  auto after = ParseJson(Ckprof({"gpus", "--json"}).out);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ((*after)["allocations"].size(), 1u) << after->dump();
  EXPECT_EQ((*after)["allocations"][0]["state"], "ready") << after->dump();
  EXPECT_EQ((*after)["allocations"][0]["running"], 1) << after->dump();
  ASSERT_EQ(Ckprof({"cancel", job}).exit_code, 0);
  Ckprof({"wait", job});
  json results = Results(job);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0]["status"], "cancelled") << results[0].dump();
  EXPECT_EQ(results[0]["attempts"], 1) << results[0].dump();
}

// The agent killed (kill -9): its allocation's job ends, and the task runs again.
TEST_F(SlurmTest, AKilledAgentsTaskRunsAgain) {
  EndAnAllocationUnderATask(
      [](const json& a) {
        // The agent of that allocation, by its command line (/proc: no procps needed).
        const std::string name = a["name"].get<std::string>();
        pid_t agent = 0;
        for (const auto& e : std::filesystem::directory_iterator("/proc")) {
          const std::string pid = e.path().filename().string();
          if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
          const std::string cmd = testing::ReadFile(e.path().string() + "/cmdline");
          if (cmd.find("ckprof-agent") != std::string::npos &&
              cmd.find(std::string("--allocation\0", 13) + name + '\0') != std::string::npos) {
            agent = static_cast<pid_t>(std::stol(pid));
          }
        }
        ASSERT_GT(agent, 0) << "no agent of allocation " << name;
        ASSERT_EQ(kill(agent, SIGKILL), 0);
      },
      "ended: Slurm ended it");
}

// An allocation nearing its time limit takes no task that could not finish in it: it is let go
// and a new one takes over, and no task is cut off. (One allocation of one minute at a time;
// 16 tasks of 3 s with a 20 s timeout need more than one.)
TEST_F(SlurmTest, AnAllocationNearItsTimeLimitIsLetGoAndNoTaskIsCutOff) {
  auto o = EmulatorOptions("0-3", ConfigJson("gpu", Allocations(1, "1")));
  o.env.push_back("CKEMU_SLOW_START_MS=3000");
  Start(o);
  const std::string job =
      Submit(testing::FwdConfigsText(16, /*magic_n=*/9006), {"--timeout", "20"});
  auto waited = Ckprof({"wait", job});
  ASSERT_EQ(waited.exit_code, 0) << waited.err << testing::ReadFile(daemon_.log_path());
  json results = Results(job);
  ASSERT_EQ(results.size(), 16u);
  const std::set<int64_t> slurm_jobs = SucceededInSlurm(results);
  EXPECT_GE(slurm_jobs.size(), 2u) << "one allocation of a minute cannot have run them all";
  for (int64_t id : slurm_jobs) {
    EXPECT_NE(SlurmField(id, "%T"), "TIMEOUT") << "allocation " << id << " reached its limit";
  }
}

}  // namespace
}  // namespace ckprof

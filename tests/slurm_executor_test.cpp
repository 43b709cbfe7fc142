// The Slurm executor's pure parts (daemon/slurm_executor.h): what squeue, sacct and sinfo print,
// how Slurm's states and the batch script's exit status become outcomes, the batch script
// itself, and the `executor` config key.
#include "daemon/slurm_executor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <fstream>

#include "daemon/daemon_config.h"
#include "daemon/slurm_allocations.h"
#include "tests/util/commands.h"
#include "tests/util/files.h"

namespace ckprof {
namespace {

using Kind = Outcome::Kind;

TEST(SlurmParse, SqueueRows) {
  auto rows = ParseSqueueRows(
      "12|RUNNING|vm|None\n13|PENDING||Resources\n10_[4-7]|PENDING||Resources\n"
      "14|CANCELLED by 0|vm|None\n\n");
  ASSERT_EQ(rows.size(), 3u);  // the pending rest of an array is not one of ours
  EXPECT_EQ(rows[0].id, 12);
  EXPECT_EQ(rows[0].state, "RUNNING");
  EXPECT_EQ(rows[0].node, "vm");
  EXPECT_EQ(rows[1].node, "");
  EXPECT_EQ(rows[1].reason, "Resources");
  EXPECT_EQ(rows[2].state, "CANCELLED");
}

TEST(SlurmParse, SacctRows) {
  auto rows = ParseSacctRows("4|COMPLETED|0:0|vm\n5|NODE_FAIL|0:0|None assigned\n7;c|x|\n");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].exit_code, "0:0");
  EXPECT_EQ(rows[1].state, "NODE_FAIL");
  EXPECT_EQ(rows[1].node, "");
  EXPECT_EQ(rows[2].id, 7);  // --parsable's "ID;CLUSTER"
}

TEST(SlurmParse, SinfoMergesPartitionsPerNode) {
  auto nodes = ParseSinfoNodes(
      "vm|mixed|gpu:8|gpu:2(IDX:0-1)|gpu*|\nvm|mixed|gpu:8|gpu:2(IDX:0-1)|debug|\n"
      "n2|down|gpu:mi300x:8|gpu:mi300x:0|gpu*|\n");
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].partitions, "gpu*,debug");
  EXPECT_EQ(nodes[0].gres_used, "gpu:2(IDX:0-1)");
  EXPECT_EQ(nodes[1].state, "down");
  EXPECT_EQ(nodes[1].gres, "gpu:mi300x:8");
}

TEST(SlurmStates, MapOntoOutcomes) {
  struct Case {
    const char* state;
    std::optional<Kind> kind;  // nullopt: by the output
  } cases[] = {{"COMPLETED", std::nullopt},       {"TIMEOUT", Kind::kTimedOut},
               {"CANCELLED", Kind::kCancelled},   {"FAILED", Kind::kFailed},
               {"OUT_OF_MEMORY", Kind::kFailed},  {"NODE_FAIL", Kind::kInterrupted},
               {"PREEMPTED", Kind::kInterrupted}, {"BOOT_FAIL", Kind::kInterrupted}};
  for (const auto& c : cases) {
    SlurmJobRow row{7, c.state, "vm", "", "1:0"};
    EXPECT_TRUE(SlurmStateFinal(c.state)) << c.state;
    auto o = SlurmEndOutcome(row);
    ASSERT_EQ(o.has_value(), c.kind.has_value()) << c.state;
    if (o) {
      EXPECT_EQ(o->kind, *c.kind) << c.state;
      EXPECT_NE(o->reason.find("job 7"), std::string::npos) << o->reason;
    }
  }
  for (const char* live : {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED"}) {
    EXPECT_FALSE(SlurmStateFinal(live)) << live;
  }
}

TEST(SlurmStates, ScriptStatus) {
  CkPerf none;
  EXPECT_EQ(OutcomeFromScriptStatus(124, true, 2, none, "").kind, Kind::kTimedOut);
  EXPECT_EQ(OutcomeFromScriptStatus(124, true, 2, none, "").reason, "timed out after 2 s");
  EXPECT_EQ(OutcomeFromScriptStatus(137, true, 2, none, "").kind, Kind::kTimedOut);
  EXPECT_EQ(OutcomeFromScriptStatus(124, false, 0, none, "").kind, Kind::kFailed);
  EXPECT_EQ(OutcomeFromScriptStatus(127, false, 0, none, "sh: 1: /x: not found").kind,
            Kind::kSpawnFailed);
  Outcome segv = OutcomeFromScriptStatus(128 + SIGSEGV, false, 0, none, "");
  EXPECT_EQ(segv.kind, Kind::kCrashed);
  EXPECT_EQ(segv.signal, SIGSEGV);
  EXPECT_EQ(OutcomeFromScriptStatus(3, false, 0, none, "boom").exit_code, 3);
  SlurmRunFiles f;
  ParseSlurmStartLine("node=vm gpus=3 start=1796240344.5\n", &f);
  ParseSlurmEndLine("rc=0 end=1796240345.25\n", &f);
  EXPECT_EQ(f.node, "vm");
  EXPECT_EQ(f.gpus, "3");
  EXPECT_DOUBLE_EQ(f.end - f.start, 0.75);
  ASSERT_TRUE(f.rc.has_value());
  EXPECT_EQ(*f.rc, 0);
}

TEST(SlurmScript, TimeLimitCoversTimeoutAndGrace) {
  EXPECT_EQ(SlurmTimeLimitMinutes(0, 5), 0);
  EXPECT_EQ(SlurmTimeLimitMinutes(2, 5), 2);
  EXPECT_EQ(SlurmTimeLimitMinutes(55, 5), 2);
  EXPECT_EQ(SlurmTimeLimitMinutes(56, 5), 3);
}

// The script run by sh with a fake Slurm environment: the profiler gets Slurm's pin as
// HIP_VISIBLE_DEVICES, every argument intact (quotes, spaces), and the files are written.
TEST(SlurmScript, RunsTheProfilerWithSlurmsPin) {
  testing::TempDir dir;
  const std::string prof = dir.File("prof.sh");
  testing::WriteFile(prof,
                     "#!/bin/sh\necho \"hip=$HIP_VISIBLE_DEVICES args=$#:$1|$2\"\n"
                     "echo oops >&2\nexit 3\n");
  chmod(prof.c_str(), 0755);
  RunSpec spec;
  spec.argv = {prof, "it's", "a b"};
  spec.set_env = {{"CKPROFD_TASK", "5:1"}};
  spec.comment = "ckprof job 1 #1 task 5 attempt 1 from test";
  const std::string stem = dir.File("t5.a1");
  testing::WriteFile(stem + ".sh", SlurmBatchScript(spec, stem, {"HIP_VISIBLE_DEVICES"}));
  auto r = testing::RunCommand({"/usr/bin/env", "-i", "PATH=/usr/bin:/bin", "SLURM_JOB_GPUS=6",
                                "CUDA_VISIBLE_DEVICES=6", "SLURMD_NODENAME=n1", "/bin/sh",
                                stem + ".sh"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::ReadFile(stem + ".out"), "hip=6 args=2:it's|a b\n");
  EXPECT_EQ(testing::ReadFile(stem + ".err"), "oops\n");
  SlurmRunFiles f;
  ParseSlurmStartLine(testing::ReadFile(stem + ".start"), &f);
  ParseSlurmEndLine(testing::ReadFile(stem + ".end"), &f);
  EXPECT_EQ(f.node, "n1");
  EXPECT_EQ(f.gpus, "6");
  ASSERT_TRUE(f.rc.has_value());
  EXPECT_EQ(*f.rc, 3);
  EXPECT_GE(f.end, f.start);
}

TEST(SlurmConfig, ExecutorKey) {
  testing::TempDir dir;
  auto load = [&](const std::string& text) {
    const std::string path = dir.File("c.json");
    testing::WriteFile(path, text);
    return LoadDaemonConfigFile(path, DaemonConfig{});
  };
  auto ok = load(R"({"executor": {"kind": "slurm", "partition": "gpu", "gres": "gpu:1",
                    "max_in_flight": 16, "sbatch_args": ["--account=lab"],
                    "work_dir": "/shared/ckprofd", "poll_ms": 500}})");
  ASSERT_TRUE(ok.ok()) << ok.error();
  EXPECT_EQ(ok->executor.kind, "slurm");
  EXPECT_EQ(ok->executor.slurm.max_in_flight, 16);
  EXPECT_EQ(ok->executor.slurm.sbatch_args, std::vector<std::string>{"--account=lab"});
  EXPECT_EQ(load(R"({"executor": "local"})")->executor.kind, "local");
  struct Bad {
    const char* text;
    const char* says;
  } bad[] = {
      {R"({"executor": "slurm"})", "must be \"local\" or an object"},
      {R"({"executor": {"partition": "gpu"}})", "needs a field 'kind'"},
      {R"({"executor": {"kind": "pbs"}})", "must be \"slurm\" or \"local\""},
      {R"({"executor": {"kind": "slurm"}})", "needs 'work_dir'"},
      {R"({"executor": {"kind": "slurm", "work_dir": "rel"}})", "absolute path"},
      {R"({"executor": {"kind": "slurm", "work_dir": "/w", "max_in_flight": 0}})", "max_in_flight"},
      {R"({"executor": {"kind": "slurm", "work_dir": "/w", "gress": "gpu:1"}})",
       "no field 'gress'"},
      {R"({"executor": {"kind": "slurm", "work_dir": "/w", "sbatch_args": "-A x"}})",
       "list of strings"},
      {R"({"executor": {"kind": "slurm", "work_dir": "/w", "mode": "pool"}})",
       "must be \"tasks\" or \"allocations\""},
      {R"({"executor": {"kind": "slurm", "work_dir": "/w", "allocation_time": "forever"}})",
       "a Slurm time of a minute or more"},
      {R"({"executor": {"kind": "slurm", "work_dir": "/w", "allocation_time": "0:30"}})",
       "a Slurm time of a minute or more"},
      {R"({"executor": {"kind": "slurm", "work_dir": "/w", "max_allocations": 0}})",
       "max_allocations"},
      {R"({"executor": {"kind": "slurm", "work_dir": "/w", "agent_port": 70000}})", "agent_port"},
      {R"({"executor": {"kind": "slurm", "work_dir": "/w", "agent_bin": "ckprof-agent"}})",
       "agent_bin' must be an absolute path"},
  };
  for (const auto& b : bad) {
    auto r = load(b.text);
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_NE(r.error().find("key 'executor'"), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(b.says), std::string::npos) << r.error();
  }
}

// The allocation mode's settings: read, and its slots are allocations x GPUs each.
TEST(SlurmConfig, AllocationMode) {
  testing::TempDir dir;
  const std::string path = dir.File("c.json");
  testing::WriteFile(path, R"({"executor": {"kind": "slurm", "mode": "allocations",
      "gres": "gpu:mi300x:2", "max_allocations": 5, "allocation_time": "1-00:30:00",
      "idle_release_s": 30, "agent_port": 7777, "agent_host": "login1",
      "agent_bin": "/opt/ckprof/bin/ckprof-agent", "work_dir": "/shared/ckprofd"}})");
  auto c = LoadDaemonConfigFile(path, DaemonConfig{});
  ASSERT_TRUE(c.ok()) << c.error();
  const SlurmSettings& s = c->executor.slurm;
  EXPECT_TRUE(s.Allocations());
  EXPECT_EQ(s.max_allocations, 5);
  EXPECT_EQ(s.allocation_time_s, 86400 + 1800);
  EXPECT_EQ(s.idle_release_s, 30);
  EXPECT_EQ(s.agent_port, 7777);
  EXPECT_EQ(s.agent_host, "login1");
  EXPECT_EQ(s.GpusPerAllocation(), 2);
  EXPECT_EQ(c->executor.RemoteSlots(), 10);
}

TEST(SlurmParse, Times) {
  EXPECT_EQ(ParseSlurmTime("90"), 5400);  // minutes
  EXPECT_EQ(ParseSlurmTime("59:58"), 3598);
  EXPECT_EQ(ParseSlurmTime("2:00:00"), 7200);
  EXPECT_EQ(ParseSlurmTime("1-00"), 86400);
  EXPECT_EQ(ParseSlurmTime("1-2:30"), 86400 + 7200 + 1800);
  EXPECT_EQ(ParseSlurmTime("1-02:03:04"), 86400 + 7384);
  for (const char* bad : {"", "UNLIMITED", "INVALID", "NOT_SET", "1:2:3:4", "-5", "1:x", "1-"}) {
    EXPECT_FALSE(ParseSlurmTime(bad)) << bad;
  }
  SlurmSettings s;
  for (auto [gres, n] : std::vector<std::pair<std::string, int>>{{"gpu:1", 1},
                                                                 {"gpu:4", 4},
                                                                 {"gpu:a100:2", 2},
                                                                 {"gpu", 1},
                                                                 {"", 1},
                                                                 {"gpu:2,shard:1", 2}}) {
    s.gres = gres;
    EXPECT_EQ(s.GpusPerAllocation(), n) << gres;
  }
}

// An allocation's script runs the agent in the shell's place, every value quoted.
TEST(SlurmScript, AllocationRunsTheAgent) {
  const std::string script = AllocationScript(
      "/opt/ck prof/ckprof-agent", "/w/.h.agents", "a12", "/w/alice/alloc-a12/secret", 60,
      "ckprof allocation a12 uid 1000 user alice from h:/s");
  EXPECT_EQ(script.rfind("#!/bin/sh\n", 0), 0u);
  EXPECT_NE(script.find("exec '/opt/ck prof/ckprof-agent' --address-file '/w/.h.agents' "
                        "--allocation 'a12' --secret-file '/w/alice/alloc-a12/secret' "
                        "--reconnect-s 60"),
            std::string::npos)
      << script;
  testing::TempDir dir;
  const std::string path = dir.File("a.sh");
  testing::WriteFile(path, script);
  auto r = testing::RunCommand({"/bin/sh", "-n", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace ckprof

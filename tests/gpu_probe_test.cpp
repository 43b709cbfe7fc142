// The GPU probe (daemon/gpu_probe.h) against a fake sysfs tree and a fake nvidia-smi, with a
// real process as the GPU's foreign user.
#include "daemon/gpu_probe.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>

#include "daemon/cgroup.h"
#include "tests/util/commands.h"
#include "tests/util/fake_sysfs.h"
#include "tests/util/files.h"

namespace ckprof {
namespace {

using testing::FakeSysfs;
using testing::TempDir;

// Until `pid` runs `program` (between fork and exec it is still the test's own image).
void WaitExec(pid_t pid, const std::string& program) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    std::string cmdline;
    try {
      cmdline = testing::ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
    } catch (const std::exception&) {
    }
    if (cmdline.rfind(program + '\0', 0) == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  FAIL() << "pid " << pid << " did not exec " << program;
}

TEST(GpuProbe, NamesAndClocks) {
  EXPECT_EQ(GfxArchName(90402), "gfx942");
  EXPECT_EQ(GfxArchName(90010), "gfx90a");
  EXPECT_EQ(GfxArchName(110000), "gfx1100");
  EXPECT_EQ(GfxArchName(0), "");
  EXPECT_EQ(CurrentDpmClock("0: 500Mhz\n1: 2100Mhz *\n2: 2200Mhz\n"), 2100.0);
  EXPECT_EQ(CurrentDpmClock("0: 900MHz *\n"), 900.0);
  EXPECT_EQ(CurrentDpmClock("0: 500Mhz\n1: 2100Mhz\n"), std::nullopt);  // none is current
  EXPECT_EQ(CurrentDpmClock(""), std::nullopt);
}

TEST(GpuProbe, KfdSeesWhoUsesEachGpuAndHowEachGpuIs) {
  TempDir dir;
  FakeSysfs sys(dir.File("sys"), 2);
  EXPECT_EQ(CountKfdGpus(sys.root()), 2);
  // A real process (this one's child) uses GPU 1 through a queue; a dead pid's entry is stale.
  testing::BackgroundCommand foreign({"sleep", "60"}, {}, dir.path());
  WaitExec(foreign.pid(), "sleep");
  sys.UseGpu(foreign.pid(), 1, /*by_queue=*/true);
  sys.UseGpu(999999, 0);
  auto probe = MakeKfdProbe(sys.root(), "");
  EXPECT_TRUE(probe->cheap());
  auto procs = probe->Processes();
  ASSERT_TRUE(procs.ok()) << procs.error();
  EXPECT_EQ(procs->count(0), 0u) << "a pid that does not exist holds no GPU";
  ASSERT_EQ(procs->at(1).size(), 1u);
  const ProbedProcess& p = procs->at(1)[0];
  EXPECT_EQ(p.user.pid, foreign.pid());
  EXPECT_EQ(p.user.uid, getuid());
  EXPECT_EQ(p.user.command, "sleep 60");
  EXPECT_FALSE(p.ours);
  EXPECT_GT(p.pgid, 0);

  auto ids = probe->Identities();
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[1].name, "AMD Instinct MI300X");
  EXPECT_EQ(ids[1].uuid, "serial-1");
  EXPECT_EQ(ids[1].arch, "gfx942");
  EXPECT_EQ(ids[1].driver, "amdgpu 6.8.5");

  sys.SetReadings(0, 1900, -1, 61.5, -1);  // no mclk, no power
  auto r = probe->ReadingOf(0);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->sclk_mhz, 1900.0);
  EXPECT_EQ(r->mclk_mhz, std::nullopt);
  EXPECT_EQ(r->temperature_c, 61.5);
  EXPECT_EQ(r->power_w, std::nullopt);
  EXPECT_EQ(r->busy_percent, 42.0);  // gpu_busy_percent
  EXPECT_GT(r->at, 0);
  EXPECT_EQ(probe->Readings().at(1).power_w, 150.0);
  EXPECT_EQ(probe->ReadingOf(2), std::nullopt);

  sys.Forget(foreign.pid());
  EXPECT_TRUE(probe->Processes()->empty());
}

// Who a process is, learned at one look, serves the next looks of the same KFD entry; what it
// uses is read again at each look, and whether it still lives.
TEST(GpuProbe, KfdLooksAgainAtWhatAKnownProcessUsesAndWhetherItLives) {
  TempDir dir;
  FakeSysfs sys(dir.File("sys"), 2);
  auto foreign = std::make_unique<testing::BackgroundCommand>(
      std::vector<std::string>{"sleep", "60"}, std::vector<std::string>{}, dir.path());
  const pid_t pid = foreign->pid();
  WaitExec(pid, "sleep");
  sys.UseGpu(pid, 0);
  auto probe = MakeKfdProbe(sys.root(), "");
  auto first = probe->Processes();
  ASSERT_TRUE(first.ok()) << first.error();
  ASSERT_EQ(first->count(0), 1u);
  EXPECT_EQ(first->count(1), 0u);
  // It starts using the second GPU: seen on both at the next look.
  sys.UseGpu(pid, 1);
  auto both = probe->Processes();
  ASSERT_TRUE(both.ok());
  ASSERT_EQ(both->count(0), 1u);
  ASSERT_EQ(both->count(1), 1u);
  EXPECT_EQ(both->at(1)[0].user.command, "sleep 60");
  // It ends (reaped) while the KFD still lists it: it holds no GPU at the next look.
  foreign.reset();
  EXPECT_TRUE(probe->Processes()->empty());
  // A stale entry, then a live process under that pid's name as a new entry: probed anew.
  TempDir dir2;
  testing::BackgroundCommand next({"sleep", "61"}, {}, dir2.path());
  WaitExec(next.pid(), "sleep");
  sys.UseGpu(999998, 0);
  EXPECT_TRUE(probe->Processes()->empty()) << "a pid that does not exist holds no GPU";
  sys.Forget(999998);
  sys.UseGpu(next.pid(), 1);
  auto again = probe->Processes();
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->count(1), 1u);
  EXPECT_EQ(again->at(1)[0].user.command, "sleep 61");
}

// Ours are the processes in a cgroup of the daemon's runs, which only root can put them in;
// not those that carry the CKPROFD_STATE variable, which any user sees in her profiler's
// environment and may set on her own training to hide it.
TEST(GpuProbe, OursAreThoseInTheRunsCgroupsNotThoseThatCarryTheMarker) {
  std::string note;
  auto cgroups = TaskCgroups::Open(0, &note);
  if (!cgroups) GTEST_SKIP() << "no writable cgroup v2 here: " << cgroups.error();
  auto run = (*cgroups)->Acquire();
  ASSERT_TRUE(run.ok()) << run.error();
  TempDir dir;
  FakeSysfs sys(dir.File("sys"), 2);
  testing::BackgroundCommand ours({"sleep", "60"}, {}, dir.path());
  WaitExec(ours.pid(), "sleep");
  const std::string pid = std::to_string(ours.pid());
  ASSERT_EQ(write((*run)->procs_fd(), pid.data(), pid.size()), static_cast<ssize_t>(pid.size()));
  testing::BackgroundCommand hiding({"sleep", "61"}, {"CKPROFD_STATE=/var/lib/x"}, dir.path());
  WaitExec(hiding.pid(), "sleep");
  sys.UseGpu(ours.pid(), 0);
  sys.UseGpu(hiding.pid(), 1);
  auto probe = MakeKfdProbe(sys.root(), (*cgroups)->runs_path());
  auto procs = probe->Processes();
  ASSERT_TRUE(procs.ok()) << procs.error();
  ASSERT_EQ(procs->at(0).size(), 1u);
  EXPECT_TRUE(procs->at(0)[0].ours) << (*cgroups)->runs_path();
  ASSERT_EQ(procs->at(1).size(), 1u);
  EXPECT_FALSE(procs->at(1)[0].ours) << "the marker alone made a process ours";
  // A daemon without cgroups for its runs calls nothing ours (the board then goes by the
  // run's process group).
  auto bare = MakeKfdProbe(sys.root(), "")->Processes();
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(bare->at(0)[0].ours);
  ours.Signal(SIGKILL);
  ours.Finish();
  (*cgroups)->Release(std::move(*run));
}

// A stand-in for nvidia-smi: answers the probe's queries from files in its directory.
std::string FakeNvidiaSmi(const TempDir& dir, const std::string& apps) {
  const std::string path = dir.File("nvidia-smi");
  testing::WriteFile(dir.File("apps.csv"), apps);
  testing::WriteFile(path, R"(#!/bin/sh
d=$(dirname "$0")
case "$1" in
  --query-gpu=index,uuid,name,driver_version)
    printf '0, GPU-aaaa, NVIDIA H200, 580.65.06\n1, GPU-bbbb, NVIDIA H200, 580.65.06\n' ;;
  --query-gpu=index,compute_cap) printf '0, 9.0\n1, 9.0\n' ;;
  --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu)
    printf '0, 1980, 3201, 38, 121.55, 97\n1, [N/A], 3201, 40, [Not Supported], [N/A]\n' ;;
  --query-gpu=index) printf '0\n1\n' ;;
  --query-compute-apps=pid,gpu_uuid,used_memory) cat "$d/apps.csv" ;;
  *) echo "unknown query $1" >&2; exit 2 ;;
esac
)");
  chmod(path.c_str(), 0755);
  return path;
}

TEST(GpuProbe, NvidiaSmiSeesWhoUsesEachGpuAndHowEachGpuIs) {
  TempDir dir;
  testing::BackgroundCommand foreign({"sleep", "60"}, {}, dir.path());
  WaitExec(foreign.pid(), "sleep");
  const std::string smi =
      FakeNvidiaSmi(dir, std::to_string(foreign.pid()) + ", GPU-bbbb, 1024 MiB\n");
  auto probe = MakeNvidiaSmiProbe(smi, "");
  EXPECT_FALSE(probe->cheap());
  auto procs = probe->Processes();
  ASSERT_TRUE(procs.ok()) << procs.error();
  ASSERT_EQ(procs->size(), 1u);
  EXPECT_EQ(procs->at(1).at(0).user.pid, foreign.pid());

  auto ids = probe->Identities();
  EXPECT_EQ(ids[0].name, "NVIDIA H200");
  EXPECT_EQ(ids[0].uuid, "GPU-aaaa");
  EXPECT_EQ(ids[0].arch, "sm_90");
  EXPECT_EQ(ids[0].driver, "NVIDIA driver 580.65.06");
  auto readings = probe->Readings();
  EXPECT_EQ(readings[0].sclk_mhz, 1980.0);
  EXPECT_EQ(readings[0].power_w, 121.55);
  EXPECT_EQ(readings[1].sclk_mhz, std::nullopt);  // [N/A]
  EXPECT_EQ(readings[1].power_w, std::nullopt);   // [Not Supported]
  EXPECT_EQ(readings[1].temperature_c, 40.0);
  EXPECT_EQ(readings[0].busy_percent, 97.0);  // utilization.gpu
  EXPECT_EQ(readings[1].busy_percent, std::nullopt);

  std::string note;
  EXPECT_NE(MakeGpuProbe(dir.File("no-sys"), {"CUDA_VISIBLE_DEVICES"}, smi, "", &note), nullptr);
  EXPECT_EQ(note, smi);
  EXPECT_EQ(MakeGpuProbe(dir.File("no-sys"), {"HIP_VISIBLE_DEVICES"}, smi, "", &note), nullptr);
  EXPECT_NE(note.find("not watched"), std::string::npos) << note;
  EXPECT_EQ(MakeGpuProbe(dir.File("no-sys"), {"CUDA_VISIBLE_DEVICES"}, dir.File("none"), "", &note),
            nullptr);
  EXPECT_NE(note.find("cannot run"), std::string::npos) << note;
}

TEST(GpuProbe, RunAndCaptureSaysWhatWentWrong) {
  auto ok = RunAndCapture({"sh", "-c", "echo hello"}, 5);
  ASSERT_TRUE(ok.ok()) << ok.error();
  EXPECT_EQ(*ok, "hello\n");
  auto failed = RunAndCapture({"sh", "-c", "echo broken; exit 3"}, 5);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error(), "sh failed (exit 3): broken");
  auto slow = RunAndCapture({"sleep", "30"}, 0.2);
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.error(), "sleep did not answer within 0.2 s");
  EXPECT_FALSE(RunAndCapture({"/nonexistent/tool"}, 5).ok());
}

}  // namespace
}  // namespace ckprof

// Reliability: profilers that misbehave. A real ckprofd runs the CK emulator with injected
// faults (magic batch sizes 9001..9010, docs in `ckprofiler-emu --help`) and broken profiler
// paths; every test asserts what a user sees — the task's state and reason — and that the
// daemon goes on: the next task starts, no process of a finished run is left, memory stays
// bounded. Waits on watch streams and process exits, never on fixed sleeps.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "common/ck_config.h"
#include "tests/util/daemon_fixture.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"
#include "tests/util/launched_daemon.h"
#include "tests/util/processes.h"
#include "tests/util/requests.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using testing::BinPath;

// A configs file holding one config per entry of `magic` (0 = a normal problem); each is a
// distinct problem (K differs) so the emulator log tells the runs apart.
std::string FaultConfigs(const std::vector<int>& magic, ConvOp op = ConvOp::kFwd) {
  std::vector<CkConfig> configs;
  int i = 0;
  for (int m : magic) {
    ++i;
    CkConfig c = testing::Conv3x3(op, m ? m : 2, 8 + i, 8, 8);
    if (op != ConvOp::kFwd) c.split_k = "1";
    c.layout = EncodeLayout(op, Layout::kNchw);
    c.data_type = EncodeDataType(op, DataType::kFp16);
    c.metadata["priority_rank"] = i;
    configs.push_back(c);
  }
  return ConfigsToText(configs);
}

// Concatenates configs files (JSON arrays).
std::string JoinConfigs(const std::vector<std::string>& texts) {
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  int rank = 0;
  for (const auto& t : texts) {
    for (auto& c : nlohmann::ordered_json::parse(t)) {
      c["metadata"]["priority_rank"] = ++rank;
      all.push_back(c);
    }
  }
  return all.dump(2);
}

class ReliabilityFaultsTest : public testing::EmulatorDaemonTest {
 protected:
  // Starts ckprofd with the emulator as default profiler; `env` and `config_json` add to it.
  void StartDaemon(const std::string& gpus, const std::vector<std::string>& env = {},
                   const std::string& config_json = "") {
    auto o = EmulatorOptions(gpus, config_json);
    o.env.insert(o.env.end(), env.begin(), env.end());
    Start(o);
  }

  int64_t Submit(const std::string& content,
                 const std::function<void(SubmitOptions&)>& tweak = {}) {
    auto id = testing::SubmitContent(daemon_.socket(), content, tweak);
    EXPECT_TRUE(id.ok()) << id.error();
    return id.ok() ? *id : 0;
  }

  JobSummary WaitEnd(int64_t job) {
    auto s = testing::WaitJobEnd(daemon_.socket(), job);
    EXPECT_TRUE(s.ok()) << s.error();
    return s.ok() ? *s : JobSummary{};
  }

  std::vector<TaskResult> Results(int64_t job, bool with_output = false) {
    auto r = testing::JobResults(daemon_.socket(), job, with_output);
    EXPECT_TRUE(r.ok()) << r.error();
    return r.ok() ? *r : std::vector<TaskResult>{};
  }

  // No process of this daemon's runs is alive (they carry CKPROFD_STATE in their environment).
  void ExpectNoProfilerLeft() {
    EXPECT_TRUE(testing::ProcessesWithEnv("CKPROFD_STATE=" + daemon_.state_dir()).empty())
        << "a profiler process outlived its run";
  }

  // Runs a profiler that prints `bytes` (CKEMU_HUGE_BYTES) of tensor dump before its results;
  // the daemon's peak memory must not follow, and the results must still be parsed.
  void CheckHugeOutput(const std::string& bytes, int64_t expected_bytes);
};

TEST_F(ReliabilityFaultsTest, HangIsTimedOutItsGroupKilledAndTheNextTaskStarts) {
  // One GPU: the normal tasks can only run because each hang ended.
  StartDaemon("0", {}, R"({"kill_grace": 0.2})");
  int64_t job =
      Submit(FaultConfigs({9001, 0, 9010, 0}), [](SubmitOptions& o) { o.timeout_s = 0.3; });
  JobSummary end = WaitEnd(job);
  EXPECT_EQ(end.state, JobState::kFinished);
  auto results = Results(job);
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0].state, TaskState::kTimedOut);
  EXPECT_NE(results[0].error.find("timed out after 0.3 s"), std::string::npos) << results[0].error;
  EXPECT_EQ(results[1].state, TaskState::kSucceeded) << results[1].error;
  EXPECT_EQ(results[2].state, TaskState::kTimedOut);
  // The SIGTERM-ignoring hang needed SIGKILL after the grace period; the reason says so.
  EXPECT_NE(results[2].error.find("killed"), std::string::npos) << results[2].error;
  EXPECT_EQ(results[3].state, TaskState::kSucceeded) << results[3].error;
  // The runs' whole process groups are gone, and the runs went one after another on GPU 0.
  auto runs = testing::ReadEmuRuns(emu_log_);
  ASSERT_EQ(runs.size(), 4u);
  std::sort(runs.begin(), runs.end(), [](auto& a, auto& b) { return a.start < b.start; });
  for (const auto& r : runs) {
    EXPECT_GT(r.pgid, 1);
    EXPECT_FALSE(testing::GroupHasLiveProcess(r.pgid)) << "group " << r.pgid << " still alive";
  }
  EXPECT_EQ(runs[1].outcome, "succeeded");
  ExpectNoProfilerLeft();
  EXPECT_TRUE(testing::Ping(daemon_.socket()));
}

TEST_F(ReliabilityFaultsTest, CrashesExitCodesAbortsAndNoValidInstanceAreRecorded) {
  StartDaemon("0-1", {"CKEMU_FAIL_CODE=3"});
  int64_t job = Submit(FaultConfigs({9002, 9003, 9007, 9004, 9008, 0}));
  WaitEnd(job);
  auto results = Results(job);
  ASSERT_EQ(results.size(), 6u);
  struct {
    TaskState state;
    int returncode;
    const char* error_part;
  } expected[] = {
      {TaskState::kCrashed, -SIGSEGV, "SIGSEGV"},     {TaskState::kFailed, 3, "exit 3"},
      {TaskState::kCrashed, -SIGABRT, "SIGABRT"},     {TaskState::kUnsupported, 0, "unsupported"},
      {TaskState::kFailed, 1, "verification failed"}, {TaskState::kSucceeded, 0, ""},
  };
  for (size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE("task #" + std::to_string(i + 1));
    EXPECT_EQ(results[i].state, expected[i].state) << results[i].error;
    EXPECT_EQ(results[i].returncode, expected[i].returncode);
    EXPECT_NE(results[i].error.find(expected[i].error_part), std::string::npos) << results[i].error;
  }
  EXPECT_FALSE(results[5].best_name.empty());
  EXPECT_TRUE(results[3].best_name.empty()) << "no valid instance is never a best instance";
  ExpectNoProfilerLeft();
}

void ReliabilityFaultsTest::CheckHugeOutput(const std::string& bytes, int64_t expected_bytes) {
  StartDaemon("0", {"CKEMU_HUGE_BYTES=" + bytes}, R"({"capture_bytes": 4096})");
  // A first ordinary job warms the daemon up, so that the peak below is the output's doing.
  WaitEnd(Submit(FaultConfigs({0, 0})));
  const int64_t before = daemon_.PeakRssBytes();
  ASSERT_GT(before, 0);
  auto t0 = std::chrono::steady_clock::now();
  int64_t job = Submit(FaultConfigs({9005, 0}));
  WaitEnd(job);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t after = daemon_.PeakRssBytes();
  RecordProperty("huge_output_seconds", std::to_string(seconds));
  RecordProperty("daemon_peak_rss_growth_bytes", std::to_string(after - before));
  std::cerr << "[ info ] " << bytes << " of output in " << seconds << " s; daemon VmHWM "
            << before / 1048576 << " MiB -> " << after / 1048576 << " MiB\n";
  if (testing::kMemoryIsMeasurable) {
    EXPECT_LT(after - before, int64_t{48} << 20) << "the daemon's memory followed the output";
  }
  auto results = Results(job, /*with_output=*/true);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].state, TaskState::kSucceeded) << results[0].error;
  EXPECT_FALSE(results[0].best_name.empty()) << "the results after the dump were parsed";
  // Only head and tail are kept, and the capture says how much was left out.
  EXPECT_LT(results[0].stdout_text.size(), 3u * 4096 + 200);
  auto omitted = results[0].stdout_text.find(" bytes omitted ...]");
  ASSERT_NE(omitted, std::string::npos);
  auto start = results[0].stdout_text.rfind("[... ", omitted);
  ASSERT_NE(start, std::string::npos);
  int64_t n = std::stoll(results[0].stdout_text.substr(start + 5, omitted - start - 5));
  EXPECT_GT(n, expected_bytes - (int64_t{1} << 20));
  EXPECT_EQ(results[1].state, TaskState::kSucceeded);
}

// 1 GB of output streams through the daemon quickly enough to be part of the regular suite.
TEST_F(ReliabilityFaultsTest, OneGigabyteOfOutputKeepsDaemonMemoryBounded) {
  CheckHugeOutput("1G", int64_t{1} << 30);
}

// 8 GB, for the patient: CKPROF_SLOW_TESTS=1.
TEST_F(ReliabilityFaultsTest, SlowEightGigabytesOfOutputKeepDaemonMemoryBounded) {
  const char* slow = std::getenv("CKPROF_SLOW_TESTS");
  if (!slow || std::string(slow) != "1") GTEST_SKIP() << "set CKPROF_SLOW_TESTS=1 to run";
  CheckHugeOutput("8G", int64_t{8} << 30);
}

TEST_F(ReliabilityFaultsTest, ForkedBackgroundChildIsKilledWithItsGroup) {
  StartDaemon("0");
  auto t0 = std::chrono::steady_clock::now();
  int64_t job = Submit(FaultConfigs({9009, 0}));
  WaitEnd(job);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 10) << "the run waited for the hour-long background child";
  auto results = Results(job, /*with_output=*/true);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].state, TaskState::kSucceeded) << results[0].error;
  EXPECT_EQ(results[1].state, TaskState::kSucceeded) << results[1].error;
  // The emulator names its child on stderr: it must be gone.
  auto at = results[0].stderr_text.find("background child pid ");
  ASSERT_NE(at, std::string::npos) << results[0].stderr_text;
  const pid_t child = std::atoi(results[0].stderr_text.c_str() + at + 21);
  ASSERT_GT(child, 1);
  EXPECT_FALSE(testing::ProcessIsLive(child)) << "background child " << child << " lives";
  for (const auto& r : testing::ReadEmuRuns(emu_log_)) {
    EXPECT_FALSE(testing::GroupHasLiveProcess(r.pgid));
  }
  ExpectNoProfilerLeft();
}

TEST_F(ReliabilityFaultsTest, MissingOrNonExecutableProfilerIsSpawnFailedWithTheReason) {
  StartDaemon("0-1");
  const std::string missing = dir_.File("nowhere/ckProfiler");
  const std::string not_exec = dir_.File("plain/ckProfiler");
  const std::string bad_interp = dir_.File("script/ckProfiler");
  std::filesystem::create_directories(dir_.File("plain"));
  std::filesystem::create_directories(dir_.File("script"));
  testing::WriteFile(not_exec, "#!/bin/sh\nexit 0\n");
  chmod(not_exec.c_str(), 0644);
  testing::WriteFile(bad_interp, "#!/nonexistent/interpreter\n");
  chmod(bad_interp.c_str(), 0755);
  // What can be seen at submit is refused there, naming the path and the reason.
  for (const auto& [path, reason] : {std::pair<std::string, std::string>{missing, "No such file"},
                                     {not_exec, "not executable"}}) {
    auto refused = testing::SubmitContent(daemon_.socket(), FaultConfigs({0}),
                                          [&](SubmitOptions& o) { o.profiler_path = path; });
    ASSERT_FALSE(refused.ok()) << path;
    EXPECT_NE(refused.error().find(path), std::string::npos) << refused.error();
    EXPECT_NE(refused.error().find(reason), std::string::npos) << refused.error();
  }
  // What only the start shows (a broken interpreter) is a spawn failure with the reason.
  struct Case {
    std::string path;
    std::string reason;
  } cases[] = {
      {bad_interp, "cannot execute " + bad_interp + ": No such file or directory"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.path);
    int64_t job =
        Submit(FaultConfigs({0, 0, 0}), [&](SubmitOptions& o) { o.profiler_path = c.path; });
    JobSummary end = WaitEnd(job);
    EXPECT_EQ(end.state, JobState::kFinished)
        << "the job does not hang on a profiler it cannot run";
    for (const auto& r : Results(job)) {
      EXPECT_EQ(r.state, TaskState::kSpawnFailed);
      EXPECT_NE(r.error.find(c.reason), std::string::npos) << r.error;
      EXPECT_NE(r.error.find(c.path), std::string::npos) << "the reason names the path";
    }
  }
  // A directory with only the forward executable: forward tasks run, the backward one fails
  // to start with a reason, and the job goes on to its end.
  const std::string perop = dir_.File("perop");
  std::filesystem::create_directories(perop);
  std::filesystem::create_symlink(BinPath("ckprofiler-emu"), perop + "/profile_grouped_conv_fwd");
  int64_t job = Submit(
      JoinConfigs({FaultConfigs({0}), FaultConfigs({0}, ConvOp::kBwdData), FaultConfigs({0, 0})}),
      [&](SubmitOptions& o) { o.profiler_path = perop; });
  WaitEnd(job);
  auto results = Results(job);
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0].state, TaskState::kSucceeded) << results[0].error;
  EXPECT_EQ(results[1].state, TaskState::kSpawnFailed);
  EXPECT_NE(results[1].error.find("profile_grouped_conv_bwd_data"), std::string::npos)
      << results[1].error;
  EXPECT_EQ(results[2].state, TaskState::kSucceeded) << results[2].error;
  EXPECT_EQ(results[3].state, TaskState::kSucceeded) << results[3].error;
  // And the daemon serves the next job normally.
  int64_t ok_job = Submit(FaultConfigs({0}));
  EXPECT_EQ(WaitEnd(ok_job).counts.succeeded(), 1);
}

// A profiler that prints binary garbage (random bytes, NULs, invalid UTF-8) on both streams:
// the run is classified, its captures are stored and served as valid JSON text.
TEST_F(ReliabilityFaultsTest, BinaryGarbageOutputIsCapturedAsValidText) {
  StartDaemon("0");
  const std::string prof = dir_.File("garbage/ckProfiler");
  std::filesystem::create_directories(dir_.File("garbage"));
  testing::WriteFile(prof,
                     "#!/bin/sh\nhead -c 200000 /dev/urandom\nhead -c 50000 /dev/urandom >&2\n");
  chmod(prof.c_str(), 0755);
  int64_t job = Submit(FaultConfigs({0, 0}), [&](SubmitOptions& o) { o.profiler_path = prof; });
  JobSummary end = WaitEnd(job);
  EXPECT_EQ(end.state, JobState::kFinished);
  auto results = Results(job, /*with_output=*/true);
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) {
    EXPECT_EQ(r.state, TaskState::kUnsupported) << r.error;  // exit 0 and no valid instance
    EXPECT_FALSE(r.stdout_text.empty());
    EXPECT_FALSE(r.stderr_text.empty());
    // Head and tail of 16 KiB each; an invalid byte comes back as U+FFFD (3 bytes).
    EXPECT_LT(r.stdout_text.size(), 3u * 2 * 16384 + 200);
  }
  EXPECT_TRUE(testing::Ping(daemon_.socket()));
}

TEST_F(ReliabilityFaultsTest, ProfilerDeletedMidSweepFailsTheRestClearlyAndRetryRecovers) {
  // Each run takes ~20 ms (slow-start), one GPU: the sweep is still going when we delete.
  StartDaemon("0", {"CKEMU_SLOW_START_MS=20"});
  const std::string prof_dir = dir_.File("ck/bin");
  std::filesystem::create_directories(prof_dir);
  const std::string prof = prof_dir + "/ckProfiler";
  std::filesystem::copy_file(BinPath("ckprofiler-emu"), prof);
  chmod(prof.c_str(), 0755);
  const int total = 40;
  int64_t job = Submit(testing::FwdConfigsText(total, 9006),
                       [&](SubmitOptions& o) { o.profiler_path = prof; });
  auto seen = testing::WatchUntil(daemon_.socket(), job,
                                  [](const JobSummary& s) { return s.done() >= 10; });
  ASSERT_TRUE(seen.ok()) << seen.error();
  ASSERT_LT(seen->done(), total) << "the sweep ended before the profiler could be deleted";
  std::filesystem::remove(prof);
  JobSummary end = WaitEnd(job);
  EXPECT_EQ(end.state, JobState::kFinished);
  auto results = Results(job);
  ASSERT_EQ(results.size(), static_cast<size_t>(total));
  int succeeded = 0, spawn_failed = 0;
  for (const auto& r : results) {
    if (r.state == TaskState::kSucceeded) {
      ++succeeded;
    } else {
      EXPECT_EQ(r.state, TaskState::kSpawnFailed) << r.error;
      EXPECT_NE(r.error.find(prof), std::string::npos) << r.error;
      EXPECT_NE(r.error.find("No such file or directory"), std::string::npos) << r.error;
      ++spawn_failed;
    }
  }
  EXPECT_GE(succeeded, 10);
  EXPECT_GE(spawn_failed, 1);
  EXPECT_EQ(succeeded + spawn_failed, total);
  // The profiler comes back: retry requeues exactly the failed tasks and they succeed.
  std::filesystem::copy_file(BinPath("ckprofiler-emu"), prof);
  chmod(prof.c_str(), 0755);
  RetryRequest retry;
  retry.job_id = job;
  auto a = testing::CallOnce(daemon_.socket(), retry);
  ASSERT_TRUE(a.ok()) << a.error();
  EXPECT_EQ(a->value("requeued", 0), spawn_failed);
  EXPECT_EQ(WaitEnd(job).counts.succeeded(), total);
  ExpectNoProfilerLeft();
}

}  // namespace
}  // namespace ckprof

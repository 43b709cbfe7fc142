// Reliability: the daemon itself fails. kill -9 at random moments of a 500-task sweep (20 times
// in a row), a full or read-only state directory, a corrupt database, SIGTERM in the middle of
// a submit. Every test restarts a real ckprofd and checks what survived: each task has exactly
// one final result, the database passes PRAGMA integrity_check, acknowledged jobs exist whole.
// The "random moments" come from a seeded RNG over the number of finished tasks seen on the
// job's watch stream; nothing waits on a fixed sleep.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "tests/util/daemon_fixture.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"
#include "tests/util/launched_daemon.h"
#include "tests/util/processes.h"
#include "tests/util/raw_client.h"
#include "tests/util/requests.h"
#include "tests/util/sql.h"
#include "tests/util/users.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using testing::LaunchedDaemon;
using testing::SqlQuery;

class ReliabilityCrashTest : public testing::EmulatorDaemonTest {
 protected:
  void TearDown() override {
    // Gracefully (the daemon stops its profilers), then whatever a killed daemon left behind.
    if (daemon_.running()) {
      kill(daemon_.pid(), SIGTERM);
      if (!daemon_.WaitExit(10)) daemon_.Stop(SIGKILL);
    }
    testing::KillMarkedProcesses("CKPROFD_STATE=" + daemon_.state_dir());
    for (const auto& m : mounts_) umount2(m.c_str(), MNT_DETACH);
  }

  // Mounts a tmpfs of `size` at `dir` (root only); false when this system does not allow it.
  bool MountTmpfs(const std::string& dir, const std::string& size) {
    std::filesystem::create_directories(dir);
    if (mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size + ",mode=0755").c_str()) != 0) {
      return false;
    }
    mounts_.push_back(dir);
    return true;
  }
  bool Remount(const std::string& dir, unsigned long flags, const std::string& data) {
    return mount("tmpfs", dir.c_str(), "tmpfs", MS_REMOUNT | flags, data.c_str()) == 0;
  }

  std::string Db() const { return daemon_.state_dir() + "/ckprofd.db"; }

  // Fills a small state dir while jobs run, then makes room (see the tests below).
  void DiskFull(bool check_results_live);

  std::string IntegrityCheck(const std::string& db) {
    auto rows = SqlQuery(db, "PRAGMA integrity_check");
    return rows.empty() || rows[0].empty() ? "" : rows[0][0];
  }

  std::vector<std::string> mounts_;
};

TEST_F(ReliabilityCrashTest, TwentyKillNinesDuringA500TaskSweepLoseNothing) {
  constexpr int kTasks = 500, kKills = 20;
  // Plenty of attempts: a task may be caught running by several kills in a row. Each run takes
  // 20 ms (the emulator's slow start), so that kills find profilers running.
  auto o = EmulatorOptions("0-3", R"({"max_attempts": 100, "kill_grace": 0.5})");
  o.env.insert(o.env.end(), {"CKEMU_FAULT=slow-start", "CKEMU_SLOW_START_MS=20"});
  Start(o);
  auto job = testing::SubmitContent(daemon_.socket(), testing::FwdConfigsText(kTasks));
  ASSERT_TRUE(job.ok()) << job.error();
  // The moments: numbers of finished tasks after which to kill, drawn with a fixed seed.
  // Repeats and 0 are kept on purpose: they kill a daemon that has just recovered.
  std::mt19937 rng(20251130);
  std::uniform_int_distribution<int> at(0, kTasks - 100);
  std::vector<int> points(kKills);
  for (int& p : points) p = at(rng);
  std::sort(points.begin(), points.end());
  std::vector<int64_t> done_at_kill;
  for (int i = 0; i < kKills; ++i) {
    if (i > 0) Start(o);
    auto seen = testing::WatchUntil(daemon_.socket(), *job, [&](const JobSummary& s) {
      return s.done() >= points[static_cast<size_t>(i)];
    });
    ASSERT_TRUE(seen.ok()) << seen.error();
    ASSERT_LT(seen->done(), kTasks) << "the sweep ended before kill " << i + 1;
    int status = daemon_.Stop(SIGKILL);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    done_at_kill.push_back(seen->done());
  }
  Start(o);
  auto end = testing::WaitJobEnd(daemon_.socket(), *job);
  ASSERT_TRUE(end.ok()) << end.error();
  EXPECT_EQ(end->counts.succeeded(), kTasks);
  auto results = testing::JobResults(daemon_.socket(), *job);
  ASSERT_TRUE(results.ok()) << results.error();
  ASSERT_EQ(results->size(), static_cast<size_t>(kTasks));
  for (const auto& r : *results)
    EXPECT_EQ(r.state, TaskState::kSucceeded) << r.task_id << ": " << r.error;
  ASSERT_EQ(WEXITSTATUS(daemon_.Stop(SIGTERM)), 0);

  // The database: intact, every task final, exactly one attempt per task that was not cut
  // short by a kill, no attempt left "running".
  EXPECT_EQ(IntegrityCheck(Db()), "ok");
  EXPECT_EQ(SqlQuery(Db(), "SELECT COUNT(*) FROM tasks WHERE state != 'succeeded'")[0][0], "0");
  EXPECT_EQ(SqlQuery(Db(), "SELECT COUNT(*) FROM attempts WHERE outcome = 'running'")[0][0], "0");
  EXPECT_TRUE(SqlQuery(Db(),
                       "SELECT task_id FROM attempts WHERE outcome != 'interrupted' "
                       "GROUP BY task_id HAVING COUNT(*) != 1")
                  .empty())
      << "a task has more than one final result";
  EXPECT_EQ(SqlQuery(Db(),
                     "SELECT COUNT(DISTINCT task_id) FROM attempts "
                     "WHERE outcome = 'succeeded'")[0][0],
            std::to_string(kTasks));
  const int interrupted = std::stoi(
      SqlQuery(Db(), "SELECT COUNT(*) FROM attempts WHERE outcome = 'interrupted'")[0][0]);
  EXPECT_LE(interrupted, kKills * 4) << "only tasks running at a kill (4 GPUs) run again";

  // What really ran: every problem at least once, reruns only of interrupted attempts.
  std::map<std::vector<std::string>, int> runs, finished;
  for (const auto& r : testing::ReadEmuRuns(emu_log_)) {
    ++runs[r.argv];
    if (r.outcome == "succeeded") ++finished[r.argv];
  }
  EXPECT_EQ(runs.size(), static_cast<size_t>(kTasks));
  EXPECT_EQ(finished.size(), static_cast<size_t>(kTasks));
  int extra = 0;
  for (const auto& [argv, n] : runs) extra += n - 1;
  EXPECT_LE(extra, interrupted);
  EXPECT_TRUE(testing::ProcessesWithEnv("CKPROFD_STATE=" + daemon_.state_dir()).empty());
  std::string kills;
  for (auto d : done_at_kill) kills += std::to_string(d) + " ";
  RecordProperty("done_at_kills", kills);
  RecordProperty("interrupted_attempts", interrupted);
  std::cerr << "[ info ] killed at done = " << kills << "; " << interrupted
            << " attempts interrupted, " << extra << " profiler runs repeated\n";
}

// After a kill -9, recovery stops the process groups the store says were running. A group id
// is a pid: by the time the daemon restarts it may belong to an unrelated program (pid reuse).
// Recovery must only stop processes that are really this daemon's profilers.
// A clean stop (SIGTERM: an admin's restart, an upgrade) interrupts the running task and
// requeues it without using up an attempt: with max_attempts 1, the task is running again
// after two restarts, not failed.
TEST_F(ReliabilityCrashTest, CleanStopsUseUpNoAttempt) {
  auto o = EmulatorOptions("0", R"({"max_attempts": 1, "kill_grace": 0.5})");
  Start(o);
  auto job = testing::SubmitContent(daemon_.socket(), testing::FwdConfigsText(1, /*hang*/ 9001));
  ASSERT_TRUE(job.ok()) << job.error();
  auto running = [](const JobSummary& s) { return s.counts.running() >= 1; };
  for (int stop = 0; stop < 2; ++stop) {
    ASSERT_TRUE(testing::WatchUntil(daemon_.socket(), *job, running).ok()) << "stop " << stop;
    ASSERT_EQ(daemon_.StopGracefully(30), "");
    Start(o);
  }
  auto again = testing::WatchUntil(daemon_.socket(), *job, running);
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(again->counts.ended(), 0) << again->counts.Describe();
}

TEST_F(ReliabilityCrashTest, RecoveryDoesNotKillAnUnrelatedProcessThatReusedAStoredGroupId) {
  auto o = EmulatorOptions("0", R"({"kill_grace": 0.2})");
  Start(o);
  auto job = testing::SubmitContent(daemon_.socket(), testing::FwdConfigsText(1, 9001));
  ASSERT_TRUE(job.ok()) << job.error();
  ASSERT_TRUE(testing::WatchUntil(daemon_.socket(), *job, [](const JobSummary& s) {
                return s.counts.running() == 1;
              }).ok());
  // The daemon reports a run as started before its spawn thread clones the profiler, and the
  // emulator logs its start line once it runs: killed before that, the daemon would leave no
  // orphan behind, and the test would prove nothing.
  const auto runs = testing::WaitForEmuRuns(emu_log_, 1);
  ASSERT_EQ(runs.size(), 1u);
  daemon_.Stop(SIGKILL);
  // The orphaned hang: stop it ourselves, as if it had ended long ago.
  kill(-runs[0].pgid, SIGKILL);
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, runs[0].pid, 0));
  if (pidfd >= 0) {
    pollfd p = {pidfd, POLLIN, 0};
    poll(&p, 1, 10000);
    close(pidfd);
  }
  // An unrelated program, leader of its own group, takes the stored group id's place.
  pid_t victim = fork();
  if (victim == 0) {
    setsid();
    pause();
    _exit(0);
  }
  setpgid(victim, victim);
  SqlQuery(Db(),
           "UPDATE tasks SET handle = " + std::to_string(victim) + " WHERE state = 'running'");
  Start(o);
  int status = 0;
  EXPECT_EQ(waitpid(victim, &status, WNOHANG), 0) << "recovery killed an unrelated process";
  kill(victim, SIGKILL);
  waitpid(victim, &status, 0);
  // The task itself was requeued and runs (and hangs) again.
  EXPECT_TRUE(testing::Ping(daemon_.socket()));
}

void ReliabilityCrashTest::DiskFull(bool check_results_live) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to mount a small tmpfs";
  auto o = EmulatorOptions("0-1");
  o.state_dir = dir_.File("state");
  if (!MountTmpfs(o.state_dir, "600k")) GTEST_SKIP() << "cannot mount a tmpfs here";
  Start(o);
  std::vector<int64_t> accepted;
  std::string error;
  for (int i = 0; i < 200 && error.empty(); ++i) {
    auto job = testing::SubmitContent(daemon_.socket(), testing::FwdConfigsText(40));
    if (job.ok()) {
      accepted.push_back(*job);
    } else {
      error = job.error();
    }
  }
  ASSERT_FALSE(error.empty()) << "the 600 KiB state dir never filled up";
  EXPECT_NE(error.find("could not be stored"), std::string::npos) << error;
  EXPECT_NE(error.find("full"), std::string::npos) << error;
  ASSERT_FALSE(accepted.empty());
  EXPECT_TRUE(testing::Ping(daemon_.socket())) << "the daemon went down with its disk";
  // Room again: the daemon carries on without a restart.
  ASSERT_TRUE(Remount(o.state_dir, 0, "size=64m"));
  auto more = testing::SubmitContent(daemon_.socket(), testing::FwdConfigsText(40));
  ASSERT_TRUE(more.ok()) << more.error();
  accepted.push_back(*more);
  for (int64_t job : accepted) {
    auto end = testing::WaitJobEnd(daemon_.socket(), job);
    ASSERT_TRUE(end.ok()) << end.error();
    EXPECT_EQ(end->counts.succeeded(), 40) << "job " << job;
    if (check_results_live) {
      auto results = testing::JobResults(daemon_.socket(), job);
      ASSERT_TRUE(results.ok()) << results.error();
      for (const auto& r : *results) {
        EXPECT_EQ(r.state, TaskState::kSucceeded)
            << "job " << job << " task " << r.task_id
            << ": what the store says differs from the job's status";
      }
    }
  }
  ASSERT_EQ(WEXITSTATUS(daemon_.Stop(SIGTERM)), 0);
  EXPECT_EQ(IntegrityCheck(Db()), "ok");
  // Restarted, the daemon still has every accepted job, whole and finished.
  Start(o);
  for (int64_t job : accepted) {
    auto end = testing::WaitJobEnd(daemon_.socket(), job);
    ASSERT_TRUE(end.ok()) << end.error();
    EXPECT_EQ(end->total, 40);
    EXPECT_EQ(end->counts.succeeded(), 40) << "job " << job;
  }
  EXPECT_EQ(IntegrityCheck(Db()), "ok");
}

TEST_F(ReliabilityCrashTest, DiskFullGivesClearSubmitErrorsAndCorruptsNothing) {
  DiskFull(/*check_results_live=*/false);
}

// While the disk is full, tasks that end cannot be recorded. The daemon must not report a job
// as finished while `results` (read from the store) still says its tasks are running.
TEST_F(ReliabilityCrashTest, DiskFullWhileTasksEndKeepsResultsAndStatusInAgreement) {
  DiskFull(/*check_results_live=*/true);
}

TEST_F(ReliabilityCrashTest, ReadOnlyStateIsAClearStartupErrorNamingWhatIsReadOnly) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs read-only and create users";
  // At start: the daemon refuses, naming the directory and why.
  auto o = EmulatorOptions("0");
  o.state_dir = dir_.File("ro");
  if (!MountTmpfs(o.state_dir, "4m")) GTEST_SKIP() << "cannot mount a tmpfs here";
  ASSERT_TRUE(Remount(o.state_dir, MS_RDONLY, ""));
  LaunchedDaemon refused;
  int status = refused.RunToExit(o);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  std::string log = testing::ReadFile(refused.log_path());
  EXPECT_NE(log.find("state dir " + o.state_dir + " is not writable: Read-only file system"),
            std::string::npos)
      << log;

  // A database file the daemon may not write (a non-root daemon; root ignores modes): a clear
  // startup error too, naming the file. (A file system that turns read-only under a running
  // daemon cannot be staged here: remounting with files open for writing is refused with
  // EBUSY. Its writes fail like a full disk's, covered below.)
  testing::SystemUser svc("ckrsvc" + std::to_string(getpid() % 1000000));
  ASSERT_TRUE(svc.ok());
  const std::string home = dir_.File("svc");
  std::filesystem::create_directories(home + "/root-owned");
  chown(home.c_str(), svc.uid(), svc.gid());
  // (root is another user to this daemon: it may use the emulator once its root is allowed)
  const std::string bin_dir =
      std::filesystem::path(testing::SharedBinPath("ckprofiler-emu")).parent_path().string();
  auto as_svc = EmulatorOptions("0", R"({"allowed_profiler_roots": [")" + bin_dir + R"("]})");
  as_svc.dir = home;
  as_svc.uid = svc.uid();
  as_svc.gid = svc.gid();
  as_svc.state_dir = home + "/root-owned";
  LaunchedDaemon not_writable;
  status = not_writable.RunToExit(as_svc);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  log = testing::ReadFile(not_writable.log_path());
  EXPECT_NE(log.find("state dir " + as_svc.state_dir + " is not writable: Permission denied"),
            std::string::npos)
      << log;
  as_svc.state_dir = home + "/state";
  Start(as_svc);
  auto job = testing::SubmitContent(daemon_.socket(), testing::FwdConfigsText(2));
  ASSERT_TRUE(job.ok()) << job.error();
  ASSERT_EQ(WEXITSTATUS(daemon_.Stop(SIGTERM)), 0);
  const std::string db = as_svc.state_dir + "/ckprofd.db";
  chmod(db.c_str(), 0444);
  LaunchedDaemon read_only_db;
  status = read_only_db.RunToExit(as_svc);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  log = testing::ReadFile(read_only_db.log_path());
  EXPECT_NE(log.find(db), std::string::npos) << log;
  // How to make it writable, never to move it aside (that loses every job).
  EXPECT_NE(log.find("is not writable"), std::string::npos) << log;
  EXPECT_NE(log.find("chmod u+rw " + db + "*"), std::string::npos) << log;
  EXPECT_EQ(log.find("move it aside"), std::string::npos) << log;
  chmod(db.c_str(), 0644);
  EXPECT_EQ(IntegrityCheck(db), "ok");
  EXPECT_EQ(SqlQuery(db, "SELECT COUNT(*) FROM tasks")[0][0], "2") << "the state is intact";
}

TEST_F(ReliabilityCrashTest, CorruptDatabaseIsAStartupErrorAndIsLeftAsItWas) {
  auto o = EmulatorOptions("0");
  std::filesystem::create_directories(dir_.File("state"));
  std::string garbage(16384, '\0');
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>((i * 7919) % 251);
  testing::WriteFile(dir_.File("state/ckprofd.db"), garbage);
  LaunchedDaemon refused;
  int status = refused.RunToExit(o);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  std::string log = testing::ReadFile(refused.log_path());
  EXPECT_NE(log.find(dir_.File("state/ckprofd.db")), std::string::npos) << log;
  EXPECT_NE(log.find("move it aside"), std::string::npos) << log;
  EXPECT_EQ(testing::ReadFile(dir_.File("state/ckprofd.db")), garbage) << "never reset";
}

// CPU time (user + system) the process has used, in seconds.
double CpuSeconds(pid_t pid) {
  auto st = ReadProcStat(pid);
  return st ? st->utime_s + st->stime_s : 0;
}

TEST_F(ReliabilityCrashTest, NotBeforeAsLateAsTheProtocolAllowsWaitsWithoutSpinning) {
  Start(EmulatorOptions("0"));
  auto refused = testing::SubmitContent(daemon_.socket(), testing::FwdConfigsText(1),
                                        [](SubmitOptions& s) { s.not_before = 1.2e10; });
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("request field 'not_before' is out of range"), std::string::npos)
      << refused.error();
  auto job = testing::SubmitContent(daemon_.socket(), testing::FwdConfigsText(1),
                                    [](SubmitOptions& s) { s.not_before = 4102444799; });
  ASSERT_TRUE(job.ok()) << job.error();
  const double before = CpuSeconds(daemon_.pid());
  ASSERT_FALSE(daemon_.WaitExit(0.5).has_value());  // half a second of idling (or spinning)
  EXPECT_LT(CpuSeconds(daemon_.pid()) - before, 0.1) << "ckprofd spins while a job waits";
}

// A job waiting for a not_before far away must cost nothing while it waits. The fault here is
// a busy loop, so this test measures the daemon's CPU over half a second of wall time.
TEST_F(ReliabilityCrashTest, StoredNotBeforeBeyondTheTimerRangeDoesNotSpinAfterRestart) {
  auto o = EmulatorOptions("0");
  Start(o);
  auto job = testing::SubmitContent(daemon_.socket(), testing::FwdConfigsText(1),
                                    [](SubmitOptions& s) { s.not_before = 4e9; });
  ASSERT_TRUE(job.ok()) << job.error();
  ASSERT_EQ(WEXITSTATUS(daemon_.Stop(SIGTERM)), 0);
  // A row written before the protocol bounded not_before (or by hand): year 2350.
  SqlQuery(Db(), "UPDATE jobs SET not_before = 1.2e10");
  Start(o);
  const double before = CpuSeconds(daemon_.pid());
  auto exited = daemon_.WaitExit(0.5);  // half a second of the daemon idling (or spinning)
  ASSERT_FALSE(exited.has_value());
  const double used = CpuSeconds(daemon_.pid()) - before;
  EXPECT_LT(used, 0.1) << "ckprofd spins while a job waits for its not_before";
  EXPECT_TRUE(testing::Ping(daemon_.socket()));
}

TEST_F(ReliabilityCrashTest, SigtermDuringASubmitLeavesWholeJobsOrNone) {
  constexpr int kConfigs = 3000, kRounds = 8;
  auto o = EmulatorOptions("0");
  SubmitRequest submit;
  submit.submit.content = testing::FwdConfigsText(kConfigs);
  submit.submit.not_before = 4e9;  // (2096) nothing runs: the test is about the submit alone
  Request framed = std::move(submit);
  framed.id = 2;
  const std::string frame = Frame(RequestToJson(framed));
  // Where SIGTERM lands: after this many bytes of the frame (the whole frame for some rounds,
  // so that it hits the conversion or the store instead of the upload).
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> at(0, frame.size());
  std::set<int64_t> acknowledged;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Start(o);
    // Rounds 0, 2, 4, 6: SIGTERM mid-upload; 1, 5: right after the last byte (conversion or
    // store); 3, 7: right after the answer (the job must survive).
    const size_t split = round % 2 == 1 ? frame.size() : at(rng);
    const bool after_answer = round % 4 == 3;
    testing::RawClient client;
    ASSERT_TRUE(client.Connect(daemon_.socket()));
    ASSERT_TRUE(client.Hello());
    ASSERT_TRUE(client.Send(std::string_view(frame).substr(0, split)));
    if (!after_answer) kill(daemon_.pid(), SIGTERM);
    client.Send(std::string_view(frame).substr(split));  // may fail: the daemon is leaving
    std::optional<json> answer = client.ReadJson(30);
    if (after_answer) {
      ASSERT_TRUE(answer.has_value());
      kill(daemon_.pid(), SIGTERM);
    }
    if (answer) {
      if (answer->value("ok", false)) {
        acknowledged.insert(answer->value("job_id", int64_t{0}));
      } else {
        EXPECT_NE(answer->value("error", "").find("shutting down"), std::string::npos)
            << answer->dump();
      }
    }
    auto exit_status = daemon_.WaitExit(30);
    ASSERT_TRUE(exit_status.has_value()) << "ckprofd did not stop after SIGTERM";
    EXPECT_TRUE(WIFEXITED(*exit_status) && WEXITSTATUS(*exit_status) == 0)
        << "exit status " << *exit_status << ": " << testing::ReadFile(daemon_.log_path());
  }
  EXPECT_EQ(IntegrityCheck(Db()), "ok");
  // Every stored job is whole; every acknowledged job is stored.
  auto rows = SqlQuery(Db(),
                       "SELECT jobs.id, COUNT(tasks.id) FROM jobs LEFT JOIN tasks ON "
                       "tasks.job_id = jobs.id GROUP BY jobs.id");
  std::set<int64_t> stored;
  for (const auto& row : rows) {
    stored.insert(std::stoll(row[0]));
    EXPECT_EQ(row[1], std::to_string(kConfigs)) << "job " << row[0] << " is not whole";
  }
  for (int64_t id : acknowledged) EXPECT_TRUE(stored.count(id)) << "acknowledged job " << id;
  RecordProperty("acknowledged", static_cast<int>(acknowledged.size()));
  RecordProperty("stored", static_cast<int>(stored.size()));
  std::cerr << "[ info ] " << acknowledged.size() << " of " << kRounds
            << " submits acknowledged before SIGTERM, " << stored.size() << " stored\n";
  Start(o);
  EXPECT_TRUE(testing::Ping(daemon_.socket()));
}

// Sends SIGHUP after writing `config_text` over the daemon's config file; true when the daemon
// logged its verdict (one more "SIGHUP:" line) and is still running, false when it died.
bool ReliabilityCrashTestSighup(LaunchedDaemon& daemon, const std::string& config_path,
                                const std::string& config_text) {
  auto count = [&] {
    std::string log = testing::ReadFile(daemon.log_path());
    size_t n = 0;
    for (size_t at = log.find("SIGHUP:"); at != std::string::npos;
         at = log.find("SIGHUP:", at + 1)) {
      ++n;
    }
    return n;
  };
  testing::WriteFile(config_path, config_text);
  const size_t before = count();
  kill(daemon.pid(), SIGHUP);
  // Wait for the daemon's answer in its log, or its death (50 ms steps, at most 10 s).
  for (int i = 0; i < 200; ++i) {
    if (count() > before) return true;
    if (daemon.WaitExit(0.05)) return false;
  }
  return daemon.running();
}

TEST_F(ReliabilityCrashTest, SighupWithABrokenConfigKeepsTheDaemonAndItsSettings) {
  auto o = EmulatorOptions("0", R"({"client_timeout": 5})");
  Start(o);
  const std::string config = dir_.File("ckprofd.json");
  for (const char* text :
       {"{ not json", R"({"timeout": -4})", R"({"no_such_key": 1})", R"({"pin_env": 7})", "[]"}) {
    SCOPED_TRACE(text);
    ASSERT_TRUE(ReliabilityCrashTestSighup(daemon_, config, text))
        << "ckprofd died on SIGHUP: " << testing::ReadFile(daemon_.log_path());
    EXPECT_NE(testing::ReadFile(daemon_.log_path()).find("SIGHUP: keeping the current config"),
              std::string::npos);
    EXPECT_TRUE(testing::Ping(daemon_.socket()));
  }
  // A good config is taken.
  ASSERT_TRUE(ReliabilityCrashTestSighup(daemon_, config, R"({"timeout": 7})"));
  EXPECT_NE(testing::ReadFile(daemon_.log_path()).find("SIGHUP: re-read " + config),
            std::string::npos);
}

TEST_F(ReliabilityCrashTest, SighupWithAMalformedSocketModeKeepsTheDaemon) {
  auto o = EmulatorOptions("0", "{}");
  Start(o);
  const std::string config = dir_.File("ckprofd.json");
  for (const char* text :
       {R"({"socket_mode": "rw-rw----"})", R"({"socket_mode": "99999999999999999999"})"}) {
    SCOPED_TRACE(text);
    ASSERT_TRUE(ReliabilityCrashTestSighup(daemon_, config, text))
        << "ckprofd died on SIGHUP: " << testing::ReadFile(daemon_.log_path());
    EXPECT_TRUE(testing::Ping(daemon_.socket()));
  }
}

}  // namespace
}  // namespace ckprof

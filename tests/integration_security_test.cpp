// Security (docs/security.md): a hostile lab member against a root ckprofd, as real Linux
// users. Each test runs the attack as one user while another real user's `status` is measured
// (VictimProbe), and checks that the victim was served and nothing of theirs was lost or
// forged: a user stopping her profiler's start, holding or faking GPU host locks, swapping her
// profiler under a run to forge shared results, a profiler too large to identify, and the
// daemon's environment.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "tests/util/commands.h"
#include "tests/util/daemon_fixture.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"
#include "tests/util/launched_daemon.h"
#include "tests/util/multi_user.h"
#include "tests/util/requests.h"
#include "tests/util/users.h"
#include "tests/util/victim_probe.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using testing::CommandResult;
using testing::LaunchedDaemon;
using testing::SystemUser;
using testing::VictimFigures;
using testing::VictimProbe;

class SecurityTest : public testing::MultiUserDaemonTest {
 protected:
  void SetUp() override {
    MultiUserDaemonTest::SetUp();
    if (IsSkipped()) return;
    lab_ = std::make_unique<testing::SystemGroup>(testing::UniqueName("cks", "g"));
    ASSERT_TRUE(lab_->ok());
    eve_ = std::make_unique<SystemUser>(testing::UniqueName("cks", "e"),
                                        std::vector<std::string>{lab_->name()});
    bob_ = std::make_unique<SystemUser>(testing::UniqueName("cks", "b"),
                                        std::vector<std::string>{lab_->name()});
    ASSERT_TRUE(eve_->ok() && bob_->ok());
    // A directory of eve's own, as her home would be.
    eve_dir_ = dir_.File("eve");
    std::filesystem::create_directories(eve_dir_);
    ASSERT_EQ(chown(eve_dir_.c_str(), eve_->uid(), eve_->gid()), 0);
  }

  // A lab's daemon: its socket for the lab group (0660), with `keys` ("\"timeout\": 3") more.
  LaunchedDaemon::Options LabOptions(const std::string& gpus, const std::string& keys = "") {
    std::string json = R"({"socket_mode": "0660", "socket_group": ")" + lab_->name() + "\"";
    if (!keys.empty()) json += ", " + keys;
    return EmulatorOptions(gpus, json + "}");
  }

  // Writes an executable script owned by `user` (mode 0755).
  void Script(const std::string& path, const std::string& text, const SystemUser& user) {
    testing::WriteFile(path, text);
    chmod(path.c_str(), 0755);
    ASSERT_EQ(chown(path.c_str(), user.uid(), user.gid()), 0);
  }

  // Waits for `job`'s end: its results (empty, and a failure recorded, when it cannot).
  std::vector<TaskResult> ResultsAtEnd(int64_t job) {
    auto end = testing::WaitJobEnd(daemon_.socket(), job);
    EXPECT_TRUE(end.ok()) << end.error();
    auto results = testing::JobResults(daemon_.socket(), job, /*with_output=*/false);
    EXPECT_TRUE(results.ok()) << results.error();
    return results.ok() ? *results : std::vector<TaskResult>{};
  }

  // Eve submits one config through her symlink `link` (which names `at_submit` then: the
  // build identified) while her hanging task holds the only GPU; the link is re-pointed to
  // `at_start` before her job starts, then the GPU is freed. The job's id (0: refused).
  int64_t SubmitThroughALinkSwappedBeforeItsStart(const std::string& link,
                                                  const std::string& at_submit,
                                                  const std::string& at_start) {
    if (symlink(at_submit.c_str(), link.c_str()) != 0 ||
        lchown(link.c_str(), eve_->uid(), eve_->gid()) != 0) {
      ADD_FAILURE() << "cannot make " << link;
      return 0;
    }
    const int64_t hang =
        SubmitAs(eve_.get(), testing::FwdConfigsText(1, /*hang*/ 9001), {"--reuse", "never"});
    EXPECT_TRUE(testing::WatchUntil(daemon_.socket(), hang, [](const JobSummary& s) {
                  return s.counts.running() >= 1;
                }).ok());
    const int64_t job = SubmitAs(eve_.get(), testing::FwdConfigsText(1), {"--profiler-path", link},
                                 nullptr, eve_dir_);
    EXPECT_EQ(unlink(link.c_str()), 0);
    EXPECT_EQ(symlink(at_start.c_str(), link.c_str()), 0);
    EXPECT_EQ(Ckprof(eve_.get(), {"cancel", std::to_string(hang)}).exit_code, 0);
    return job;
  }

  std::unique_ptr<testing::SystemGroup> lab_;
  std::unique_ptr<SystemUser> eve_, bob_;
  std::string eve_dir_;
};

// Item 1: eve stops every process of hers as it appears (kill -STOP -1 in a loop), so any
// child of the daemon that switched to her uid before its exec would stop, and with a spawn
// thread waiting on it, every start, cancel and shutdown. Bob's job runs to its end meanwhile,
// eve's tasks end by themselves, and SIGTERM stops the daemon cleanly.
TEST_F(SecurityTest, AUserStoppingHerProfilersStartsStopsOnlyHerTasks) {
  auto o = LabOptions("0-1", R"("start_timeout": 1, "timeout": 3, "kill_grace": 0.2)");
  Start(o);
  daemon_.ExpectCleanStop();
  VictimProbe probe(*bob_, daemon_.socket());
  // Both GPUs busy while eve submits (her loop would stop her own client too), then freed.
  const int64_t hang = SubmitAs(bob_.get(), testing::FwdConfigsText(2, /*hang*/ 9001));
  ASSERT_TRUE(testing::WatchUntil(daemon_.socket(), hang, [](const JobSummary& s) {
                return s.counts.running() >= 2;
              }).ok());
  // Submitted from a deep directory of hers: the start's chdir, as her, takes a while (the
  // window in which the old spawn could be stopped).
  std::string deep = eve_dir_;
  for (int i = 0; i < 900; ++i) deep += "/d";
  std::filesystem::create_directories(deep);
  for (std::string d = deep; d != eve_dir_; d = d.substr(0, d.rfind('/'))) {
    ASSERT_EQ(chown(d.c_str(), eve_->uid(), eve_->gid()), 0);
  }
  const int64_t evil = SubmitAs(eve_.get(), testing::FwdConfigsText(4), {}, nullptr, deep);
  const int64_t job = SubmitAs(bob_.get(), testing::FwdConfigsText(6));
  ASSERT_GT(evil, 0);
  ASSERT_GT(job, 0);
  std::vector<std::string> loop = eve_->As();
  loop.insert(loop.end(),
              {"/bin/sh", "-c", "echo looping; exec 2>/dev/null; while :; do kill -STOP -1; done"});
  testing::BackgroundCommand stopper(loop);
  ASSERT_TRUE(stopper.WaitForOutput("looping", 30));
  // (On a loaded machine its tasks may have reached their 3 s timeout already: the GPUs are
  // free either way.)
  CommandResult freed = Ckprof(bob_.get(), {"cancel", std::to_string(hang)});
  EXPECT_TRUE(freed.exit_code == 0 ||
              (freed.out + freed.err).find("already finished: nothing to cancel") !=
                  std::string::npos)
      << freed.out << freed.err;
  auto end = testing::WaitJobEnd(daemon_.socket(), job);
  ASSERT_TRUE(end.ok()) << end.error();
  EXPECT_EQ(end->counts.succeeded(), 6);
  auto evil_end = testing::WaitJobEnd(daemon_.socket(), evil);
  ASSERT_TRUE(evil_end.ok()) << evil_end.error();
  stopper.Signal(SIGKILL);
  (void)stopper.Finish(10);
  testing::ExpectVictimServed(probe.Stop(), "stop_before_exec");
  // Her tasks ended: not started within the deadline, or stopped after their exec and timed
  // out; none is left running.
  auto results = testing::JobResults(daemon_.socket(), evil, /*with_output=*/false);
  ASSERT_TRUE(results.ok()) << results.error();
  int not_started = 0;
  for (const auto& t : *results) {
    EXPECT_NE(t.state, TaskState::kRunning);
    if (t.state == TaskState::kSpawnFailed) {
      EXPECT_NE(t.error.find("did not start within 1 s"), std::string::npos) << t.error;
      ++not_started;
    }
  }
  std::cout << not_started << " of eve's 4 tasks stopped before their exec\n";
  EXPECT_EQ(daemon_.StopGracefully(30), "");
}

// Item 6: lock files are 0644 with no text in them, a profiler holds no lock descriptor, and a
// lock that a plain user holds does not hold the root daemon back; the log names her, from the
// kernel's lock table, whatever she wrote in a file.
TEST_F(SecurityTest, HostLocksCannotBeFakedOrReleasedByUsers) {
  Start(LabOptions("0-1"));
  const std::string locks = dir_.File("locks");
  // Eve makes gpu1.lock first, writable by all, with "root's daemon" as its text, and holds it.
  std::vector<std::string> hold = eve_->As();
  hold.insert(hold.end(), {"/bin/sh", "-c",
                           "umask 0; echo '1 0' > " + locks + "/gpu1.lock; exec flock -n " + locks +
                               "/gpu1.lock sh -c 'echo held; exec sleep 600'"});
  testing::BackgroundCommand holder(hold);
  ASSERT_TRUE(holder.WaitForOutput("held", 30));
  VictimProbe probe(*bob_, daemon_.socket());
  // A hanging task on one GPU: its profiler's descriptors are looked at.
  const int64_t hang = SubmitAs(bob_.get(), testing::FwdConfigsText(1, /*hang*/ 9001));
  ASSERT_TRUE(testing::WatchUntil(daemon_.socket(), hang, [](const JobSummary& s) {
                return s.counts.running() >= 1;
              }).ok());
  const std::vector<testing::EmuRun> runs = testing::WaitForEmuRuns(emu_log_, 1);
  ASSERT_EQ(runs.size(), 1u);
  std::error_code ec;
  for (const auto& fd :
       std::filesystem::directory_iterator("/proc/" + std::to_string(runs[0].pid) + "/fd", ec)) {
    const std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
    EXPECT_EQ(target.find(".lock"), std::string::npos) << "the profiler holds " << target;
  }
  // Bob's job runs on both GPUs, also on the one whose lock eve holds.
  const int64_t job = SubmitAs(bob_.get(), testing::FwdConfigsText(4));
  auto end = testing::WaitJobEnd(daemon_.socket(), job);
  ASSERT_TRUE(end.ok()) << end.error();
  EXPECT_EQ(end->counts.succeeded(), 4);
  ASSERT_TRUE(Ckprof(nullptr, {"cancel", std::to_string(hang)}).exit_code == 0);
  testing::ExpectVictimServed(probe.Stop(), "held_lock");
  struct stat st {};
  ASSERT_EQ(stat((locks + "/gpu0.lock").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_EQ(st.st_size, 0) << "a lock file holds no text";
  const std::string log = testing::ReadFile(daemon_.log_path());
  EXPECT_NE(log.find("held by flock pid"), std::string::npos) << log;
  EXPECT_NE(log.find(eve_->name()), std::string::npos) << "the holder is named from the kernel";
  holder.Signal(SIGKILL);
}

// Item 5: eve's profiler path is a symlink she controls: the real build at submit and at the
// run's end, her fake (EVIL_ kernels) while it runs. The run executes what it opened at its
// start; her numbers stay in her job, never reach `best` or bob's job through reuse.
TEST_F(SecurityTest, ASwappedProfilerCannotForgeSharedResults) {
  auto o = LabOptions("0");
  o.reuse = true;
  Start(o);
  const std::string real = testing::SharedBinPath("ckprofiler-emu");
  const std::string link = eve_dir_ + "/ck";
  const std::string fake = eve_dir_ + "/fake.sh";
  // The fake puts the link back at once, then prints the real output with forged kernels.
  Script(fake,
         "#!/bin/sh\nln -sfn " + real + " " + link + "\n" + real +
             " \"$@\" | sed -e 's/Device/EVIL_Device/g' -e 's/ TFlops/9 TFlops/'\n",
         *eve_);
  VictimProbe probe(*bob_, daemon_.socket());
  // Identified at submit (the link names the real build), swapped before it starts. One
  // config: the fake puts the link back as it starts, so a second task of the job would run
  // (and be measured with) the real build, rightly.
  const int64_t forged = SubmitThroughALinkSwappedBeforeItsStart(link, real, fake);
  ASSERT_GT(forged, 0);
  auto end = testing::WaitJobEnd(daemon_.socket(), forged);
  ASSERT_TRUE(end.ok()) << end.error();
  auto forged_results = testing::JobResults(daemon_.socket(), forged, /*with_output=*/true);
  ASSERT_TRUE(forged_results.ok()) << forged_results.error();
  bool evil_ran = false;
  for (const auto& t : *forged_results) {
    if (t.stdout_text.find("EVIL_") != std::string::npos) evil_ran = true;
  }
  EXPECT_TRUE(evil_ran) << "the attack did not run as designed";

  // Bob runs the same problems with the real build: nothing of eve's is reused, `best` has
  // no forged kernel.
  const size_t runs_before = testing::ReadEmuRuns(emu_log_).size();
  const int64_t job = SubmitAs(bob_.get(), testing::FwdConfigsText(1), {"--profiler-path", real});
  auto bob_end = testing::WaitJobEnd(daemon_.socket(), job);
  ASSERT_TRUE(bob_end.ok()) << bob_end.error();
  EXPECT_EQ(bob_end->counts.succeeded(), 1);
  EXPECT_EQ(testing::ReadEmuRuns(emu_log_).size(), runs_before + 1) << "bob's run was reused";
  auto bob_results = testing::JobResults(daemon_.socket(), job, /*with_output=*/false);
  ASSERT_TRUE(bob_results.ok()) << bob_results.error();
  EXPECT_EQ(bob_results->at(0).best_name.find("EVIL_"), std::string::npos);
  CommandResult best = Ckprof(bob_.get(), {"best", "--format", "json"});
  EXPECT_EQ(best.exit_code, 0) << best.err;
  EXPECT_EQ(best.out.find("EVIL_"), std::string::npos) << best.out;
  testing::ExpectVictimServed(probe.Stop(), "swapped_profiler");
}

// Item 5, through the environment: the build is root's and unchanged, but eve's own variable
// (here the emulator's, as LD_PRELOAD or a HIP setting would on a server) makes it report
// times 100 times too fast. Her job keeps its numbers; bob's same problem runs and `best` has
// his; and her next job with --env reuses nothing of his.
TEST_F(SecurityTest, AJobsOwnEnvironmentCannotForgeSharedResults) {
  auto o = LabOptions("0");
  o.reuse = true;
  Start(o);
  VictimProbe probe(*bob_, daemon_.socket());
  const std::vector<std::string> fast = {"--env", "CKEMU_GPU_SLOWDOWN=0=0.01"};
  const int64_t forged = SubmitAs(eve_.get(), testing::FwdConfigsText(1), fast);
  ASSERT_GT(forged, 0);
  const auto eve_results = ResultsAtEnd(forged);
  ASSERT_EQ(eve_results.size(), 1u);
  EXPECT_EQ(eve_results[0].state, TaskState::kSucceeded);

  const size_t runs_before = testing::ReadEmuRuns(emu_log_).size();
  const auto bob_results = ResultsAtEnd(SubmitAs(bob_.get(), testing::FwdConfigsText(1)));
  ASSERT_EQ(bob_results.size(), 1u);
  EXPECT_EQ(bob_results[0].state, TaskState::kSucceeded);
  EXPECT_EQ(testing::ReadEmuRuns(emu_log_).size(), runs_before + 1) << "bob's run was reused";
  const double bob_ms = bob_results[0].avg_ms;
  EXPECT_GT(bob_ms, 50 * eve_results[0].avg_ms) << "the attack did not run as designed";

  CommandResult best = Ckprof(bob_.get(), {"best", "--format", "json"});
  ASSERT_EQ(best.exit_code, 0) << best.err;
  const auto rows = nlohmann::json::parse(best.out)["rows"];
  ASSERT_EQ(rows.size(), 1u) << best.out;
  EXPECT_EQ(rows[0]["measured"], 1) << best.out;
  EXPECT_DOUBLE_EQ(rows[0]["avg_ms"].get<double>(), bob_ms) << best.out;

  const int64_t again = SubmitAs(eve_.get(), testing::FwdConfigsText(1), fast);
  ASSERT_TRUE(testing::WaitJobEnd(daemon_.socket(), again).ok());
  EXPECT_EQ(testing::ReadEmuRuns(emu_log_).size(), runs_before + 2)
      << "a job with --env reused a result measured without it";
  testing::ExpectVictimServed(probe.Stop(), "own_environment");
}

// Item 16: a root daemon looks at the profiler path a user names with her rights. Bob keeps a
// script (0755) in his 0700 directory: eve can neither run it nor learn what is in there, at
// submit or by re-pointing her symlink to it before her task starts.
TEST_F(SecurityTest, AProfilerPathIsOpenedWithItsSubmittersRights) {
  auto o = LabOptions("0");
  Start(o);
  const std::string hidden = dir_.File("bob-private");
  ASSERT_EQ(mkdir(hidden.c_str(), 0700), 0);
  ASSERT_EQ(chown(hidden.c_str(), bob_->uid(), bob_->gid()), 0);
  const std::string ran = hidden + "/ran";
  Script(hidden + "/tool.sh", "#!/bin/sh\ntouch " + ran + "\n", *bob_);
  const std::string real = testing::SharedBinPath("ckprofiler-emu");

  std::string error;
  EXPECT_EQ(SubmitAs(eve_.get(), testing::FwdConfigsText(1),
                     {"--profiler-path", hidden + "/tool.sh"}, &error),
            0);
  EXPECT_NE(error.find("Permission denied"), std::string::npos) << error;
  std::string missing;
  EXPECT_EQ(SubmitAs(eve_.get(), testing::FwdConfigsText(1),
                     {"--profiler-path", hidden + "/no-such-file"}, &missing),
            0);
  EXPECT_NE(missing.find("Permission denied"), std::string::npos)
      << "the answer told eve whether a file exists where she may not look: " << missing;

  // Accepted through her link to the real build, re-pointed to bob's script before it starts.
  const int64_t job =
      SubmitThroughALinkSwappedBeforeItsStart(eve_dir_ + "/ck", real, hidden + "/tool.sh");
  ASSERT_GT(job, 0);
  const auto results = ResultsAtEnd(job);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_NE(results[0].state, TaskState::kSucceeded);
  EXPECT_NE(results[0].error.find("Permission denied"), std::string::npos) << results[0].error;
  EXPECT_FALSE(std::filesystem::exists(ran)) << "eve ran bob's private script";
}

// Item 16's exception: the admin's own profiler_path is the daemon's, opened as root wherever
// it lies (here in a 0700 directory of root's, as a build in an admin's home would be): eve's
// job with the default runs; naming the same file herself, she is refused as her shell would be.
TEST_F(SecurityTest, TheAdminsProfilerRunsForUsersWhereverItLies) {
  const std::string closed = dir_.File("root-only");
  ASSERT_EQ(mkdir(closed.c_str(), 0700), 0);
  const std::string emu = closed + "/ckprofiler-emu";
  std::filesystem::copy_file(testing::SharedBinPath("ckprofiler-emu"), emu);
  ASSERT_EQ(chmod(emu.c_str(), 0755), 0);
  auto o = LabOptions("0");
  o.args = {"--profiler-path", emu};
  Start(o);
  const auto results = ResultsAtEnd(SubmitAs(eve_.get(), testing::FwdConfigsText(1)));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].state, TaskState::kSucceeded) << results[0].error;
  std::string error;
  EXPECT_EQ(SubmitAs(eve_.get(), testing::FwdConfigsText(1),
                     {"--profiler-path", closed + "/./ckprofiler-emu"}, &error),
            0);
  EXPECT_NE(error.find("Permission denied"), std::string::npos) << error;
}

// Items 4 and 10: a profiler of 40 GB (sparse) is not hashed: the submit answers at once, the
// task runs, its result is not shared; and another user's profiler gets a clean environment,
// none of the daemon's secrets.
TEST_F(SecurityTest, AHugeProfilerAndTheDaemonsEnvironment) {
  auto o = LabOptions("0-1");
  o.env.push_back("CKPROFD_TEST_SECRET=hunter2");
  Start(o);
  const std::string huge = eve_dir_ + "/huge.sh";
  const std::string env_out = eve_dir_ + "/env.txt";
  Script(huge,
         "#!/bin/sh\nenv > " + env_out + "\nexec " + testing::SharedBinPath("ckprofiler-emu") +
             " \"$@\"\n",
         *eve_);
  ASSERT_EQ(truncate(huge.c_str(), int64_t{40} << 30), 0);
  VictimProbe probe(*bob_, daemon_.socket());
  const auto start = std::chrono::steady_clock::now();
  const int64_t job = SubmitAs(
      eve_.get(), testing::FwdConfigsText(2),
      {"--profiler-path", huge, "--env", "EVE_SETTING=a=b c", "--env", "ROCM_PATH=/home/eve/rocm"},
      nullptr, eve_dir_);
  const double submit_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "submit with a 40 GB profiler: " << submit_s << " s\n";
  ASSERT_GT(job, 0);
  auto end = testing::WaitJobEnd(daemon_.socket(), job);
  ASSERT_TRUE(end.ok()) << end.error();
  EXPECT_EQ(end->counts.succeeded(), 2);
  testing::ExpectVictimServed(probe.Stop(), "huge_profiler");
  CommandResult best = Ckprof(nullptr, {"best", "--format", "json"});
  EXPECT_EQ(best.out.find("huge.sh"), std::string::npos) << best.out;

  const std::string env = testing::ReadFile(env_out);
  EXPECT_EQ(env.find("hunter2"), std::string::npos) << env;
  EXPECT_NE(env.find("USER=" + eve_->name() + "\n"), std::string::npos) << env;
  EXPECT_NE(env.find("PATH=/usr/local/bin:/usr/bin:/bin\n"), std::string::npos) << env;
  EXPECT_NE(env.find("HIP_VISIBLE_DEVICES="), std::string::npos) << env;
  EXPECT_NE(env.find("CKPROFD_STATE="), std::string::npos) << env;
  EXPECT_NE(env.find("EVE_SETTING=a=b c\n"), std::string::npos) << "her --env: " << env;
  EXPECT_NE(env.find("ROCM_PATH=/home/eve/rocm\n"), std::string::npos) << env;
  // What ckprofd sets itself cannot be set.
  const std::string file = dir_.File("pin.json");
  testing::WriteFile(file, testing::FwdConfigsText(1));
  chmod(file.c_str(), 0644);
  CommandResult pinned =
      Ckprof(eve_.get(), {"submit", file, "--env", "HIP_VISIBLE_DEVICES=3"}, Where::Dir(eve_dir_));
  EXPECT_EQ(pinned.exit_code, 1) << pinned.out;
  EXPECT_NE(pinned.err.find("ckprofd sets it to the task's GPU"), std::string::npos) << pinned.err;
  unlink(huge.c_str());
}

// The daemon opens the profiler as root, but runs for eve only what eve may read: a root
// script she may execute (0711) but not read is not run for her (as the kernel would refuse
// her interpreter), and its text never reaches her process.
TEST_F(SecurityTest, AProfilerSheMayNotReadIsNotRunForHer) {
  Start(LabOptions("0"));
  const std::string secret = dir_.File("secret.sh");
  testing::WriteFile(secret, "#!/bin/sh\n# a root secret\nexec " +
                                 testing::SharedBinPath("ckprofiler-emu") + " \"$@\"\n");
  chmod(secret.c_str(), 0711);
  const int64_t job = SubmitAs(eve_.get(), testing::FwdConfigsText(1), {"--profiler-path", secret},
                               nullptr, eve_dir_);
  ASSERT_GT(job, 0);
  auto end = testing::WaitJobEnd(daemon_.socket(), job);
  ASSERT_TRUE(end.ok()) << end.error();
  auto results = testing::JobResults(daemon_.socket(), job, /*with_output=*/true);
  ASSERT_TRUE(results.ok()) << results.error();
  ASSERT_EQ(results->size(), 1u);
  EXPECT_EQ(results->at(0).state, TaskState::kSpawnFailed);
  EXPECT_NE(results->at(0).error.find("Permission denied"), std::string::npos)
      << results->at(0).error;
}

}  // namespace
}  // namespace ckprof

// Queue features as Slurm and pueue users know them (issue 33), against a real root ckprofd
// driven by the real client as real Linux users: hold and release (scontrol hold/release),
// cancel of the jobs a filter picks (scancel --user/--state/--name), dependencies (sbatch
// --dependency=afterany/afterok) and drains that last (scontrol update state=drain reason=).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/util/commands.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"
#include "tests/util/multi_user.h"
#include "tests/util/requests.h"
#include "tests/util/users.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using testing::CommandResult;
using testing::SystemUser;

class QueueTest : public testing::MultiUserDaemonTest {
 protected:
  JobSummary Status(int64_t job) {
    auto s = testing::JobStatus(daemon_.socket(), job);
    EXPECT_TRUE(s.ok()) << s.error();
    return s.ok() ? *s : JobSummary{};
  }

  // The emulator's runs of problems with this input size (each user's jobs get their own).
  size_t RunsOfSpatial(int spatial) {
    size_t n = 0;
    const std::string size = std::to_string(spatial);
    for (const auto& run : testing::ReadEmuRuns(emu_log_)) {
      // ... Hi Wi ... of grouped_conv_fwd's arguments: the input's spatial size, twice.
      for (size_t i = 1; i < run.argv.size(); ++i) {
        if (run.argv[i] == size && run.argv[i - 1] == size) {
          ++n;
          break;
        }
      }
    }
    return n;
  }
};

// A held job's queued tasks do not start, across a restart too, until whoever held it (or an
// admin) releases it; another user can neither hold nor release it; `status` says who holds it
// and `list --state held` lists it. A job an admin held stays held until an admin releases it.
TEST_F(QueueTest, HoldKeepsQueuedTasksFromStartingUntilReleased) {
  SystemUser alice(testing::UniqueName("ckq", "a")), bob(testing::UniqueName("ckq", "b"));
  ASSERT_TRUE(alice.ok() && bob.ok());
  Start(EmulatorOptions("0", R"({"socket_mode": "0666"})"));
  // bob's hanging task holds the one GPU, so that alice's job is queued when she holds it.
  const int64_t blocker = SubmitAs(&bob, testing::FwdConfigsText(1, 9001));
  ASSERT_EQ(testing::WaitForEmuRuns(emu_log_, 1).size(), 1u);
  const int64_t job = SubmitAs(&alice, testing::FwdConfigsText(3, 0, 1, 10));
  ASSERT_GT(job, 0);
  const std::string id = std::to_string(job);

  CommandResult held = Ckprof(&alice, {"hold", id});
  EXPECT_EQ(held.exit_code, 0) << held.err;
  EXPECT_EQ(held.out, "job " + id + " held\n");
  CommandResult again = Ckprof(&alice, {"hold", id, "--json"});  // held already: as it was
  EXPECT_EQ(again.exit_code, 0) << again.err;
  auto again_json = json::parse(again.out, nullptr, false);
  ASSERT_TRUE(again_json.is_array()) << again.out;
  EXPECT_EQ(again_json[0]["held"], true);
  EXPECT_EQ(again_json[0]["job"]["state"], "held");
  EXPECT_EQ(again_json[0]["job"]["held_by"], alice.name());

  // Another user may neither hold nor release it.
  for (const char* verb : {"hold", "release"}) {
    CommandResult r = Ckprof(&bob, {verb, id});
    EXPECT_EQ(r.exit_code, 1) << verb << ": " << r.out;
    EXPECT_NE(r.err.find("belongs to " + alice.name() + "; only its owner or an admin may " + verb +
                         " it"),
              std::string::npos)
        << r.err;
  }
  JobSummary s = Status(job);
  EXPECT_EQ(s.state, JobState::kHeld);
  EXPECT_EQ(s.held_by, alice.name());
  EXPECT_NE(s.waiting_reason.find("held by " + alice.name()), std::string::npos)
      << s.waiting_reason;
  CommandResult listed = Ckprof(&alice, {"list", "--state", "held", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  auto list = json::parse(listed.out, nullptr, false);
  ASSERT_TRUE(list.is_array() && list.size() == 1) << listed.out;
  EXPECT_EQ(list[0]["id"], job);
  CommandResult shown = Ckprof(&alice, {"status", id});
  EXPECT_NE(shown.out.find("reason: held by " + alice.name()), std::string::npos) << shown.out;

  // Kept across a restart; then the GPU is free and still the held job does not start, while
  // bob's next job does (it is submitted after alice's, which would go first otherwise).
  daemon_.Stop(SIGTERM);
  Start(EmulatorOptions("0", R"({"socket_mode": "0666"})"));
  EXPECT_EQ(Status(job).state, JobState::kHeld);
  ASSERT_EQ(Ckprof(nullptr, {"cancel", std::to_string(blocker)}).exit_code, 0);
  const int64_t later = SubmitAs(&bob, testing::FwdConfigsText(1, 0, 1, 12));
  CommandResult waited = Ckprof(&bob, {"wait", std::to_string(later)});
  EXPECT_EQ(waited.exit_code, 0) << waited.err;
  EXPECT_EQ(RunsOfSpatial(12), 1u);
  EXPECT_EQ(RunsOfSpatial(10), 0u);
  s = Status(job);
  EXPECT_EQ(s.state, JobState::kHeld);
  EXPECT_EQ(s.counts.queued(), 3);

  // Released by its owner: it runs to the end.
  CommandResult released = Ckprof(&alice, {"release", id});
  EXPECT_EQ(released.exit_code, 0) << released.err;
  EXPECT_EQ(released.out, "job " + id + " released\n");
  waited = Ckprof(&alice, {"wait", id});
  EXPECT_EQ(waited.exit_code, 0) << waited.err;
  EXPECT_EQ(RunsOfSpatial(10), 3u);
  EXPECT_TRUE(Status(job).held_by.empty());
  CommandResult not_held = Ckprof(&alice, {"release", id});
  EXPECT_EQ(not_held.exit_code, 1);
  EXPECT_NE(not_held.err.find("job " + id + " has ended: there is nothing to release"),
            std::string::npos)
      << not_held.err;

  // An admin's hold on bob's job, also over bob's own: bob cannot release it, an admin can.
  const int64_t bobs =
      SubmitAs(&bob, testing::FwdConfigsText(2, 0, 1, 14), {"--not-before", "+1h"});
  ASSERT_EQ(Ckprof(&bob, {"hold", std::to_string(bobs)}).exit_code, 0);
  ASSERT_EQ(Ckprof(nullptr, {"hold", std::to_string(bobs)}).exit_code, 0);
  EXPECT_EQ(Status(bobs).held_by, "root");
  CommandResult refused = Ckprof(&bob, {"release", std::to_string(bobs)});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("was held by root; only root or an admin may release it"),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(Ckprof(&bob, {"release", "999999"}).exit_code, 1);  // no such job
  CommandResult by_admin = Ckprof(nullptr, {"release", std::to_string(bobs), "--json"});
  EXPECT_EQ(by_admin.exit_code, 0) << by_admin.err;
  EXPECT_EQ(Status(bobs).state, JobState::kWaiting);  // its --not-before again
}

// cancel --mine/--user/--state/--name picks jobs as scancel does: the caller's own unless
// --user names another; --dry-run lists them; a script (stdin not a terminal) is not asked.
// list --name picks by the same shell pattern.
TEST_F(QueueTest, CancelPicksJobsByStateAndNameAndOnlyYours) {
  SystemUser alice(testing::UniqueName("ckq", "a")), bob(testing::UniqueName("ckq", "b"));
  ASSERT_TRUE(alice.ok() && bob.ok());
  Start(EmulatorOptions("0", R"({"socket_mode": "0666"})"));
  const std::vector<std::string> later = {"--not-before", "+1h"};
  auto submit = [&](const SystemUser* who, const std::string& name) {
    std::vector<std::string> extra = later;
    extra.insert(extra.end(), {"--name", name});
    return SubmitAs(who, testing::FwdConfigsText(2), extra);
  };
  const int64_t a1 = submit(&alice, "resnet-a"), a2 = submit(&alice, "resnet-b");
  const int64_t a3 = submit(&alice, "bert"), b1 = submit(&bob, "resnet-c");
  ASSERT_TRUE(a1 > 0 && a2 > 0 && a3 > 0 && b1 > 0);

  CommandResult listed = Ckprof(&alice, {"list", "--name", "resnet-*", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  auto list = json::parse(listed.out, nullptr, false);
  ASSERT_TRUE(list.is_array()) << listed.out;
  EXPECT_EQ(list.size(), 3u) << listed.out;  // everyone's
  listed = Ckprof(&alice, {"list", "--name", "resnet-*", "--mine", "--json"});
  EXPECT_EQ(json::parse(listed.out, nullptr, false).size(), 2u) << listed.out;

  CommandResult dry = Ckprof(&alice, {"cancel", "--name", "resnet-*", "--dry-run"});
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("would cancel 2 jobs"), std::string::npos) << dry.out;
  EXPECT_EQ(dry.out.find("resnet-c"), std::string::npos) << dry.out;  // bob's
  EXPECT_EQ(Status(a1).state, JobState::kWaiting);

  CommandResult done = Ckprof(&alice, {"cancel", "--name", "resnet-*"});  // a script: not asked
  EXPECT_EQ(done.exit_code, 0) << done.err;
  EXPECT_EQ(done.out,
            "job " + std::to_string(a1) + " cancelled\njob " + std::to_string(a2) + " cancelled\n");
  EXPECT_EQ(Status(a1).state, JobState::kCancelled);
  EXPECT_EQ(Status(a2).state, JobState::kCancelled);
  EXPECT_EQ(Status(a3).state, JobState::kWaiting);
  EXPECT_EQ(Status(b1).state, JobState::kWaiting);

  // Another user's jobs, named with --user: the daemon refuses each (exit 1); nothing changes.
  CommandResult theirs = Ckprof(&alice, {"cancel", "--user", bob.name(), "--yes"});
  EXPECT_EQ(theirs.exit_code, 1);
  EXPECT_NE(theirs.err.find("belongs to " + bob.name()), std::string::npos) << theirs.err;
  EXPECT_EQ(Status(b1).state, JobState::kWaiting);

  // Usage errors: jobs and a filter together, neither, a bad state.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"cancel", std::to_string(a3), "--mine"}, {"cancel"}, {"cancel", "--state", "done"}}) {
    CommandResult r = Ckprof(&alice, args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.out;
    EXPECT_NE(r.err.find("ckprof cancel:"), std::string::npos) << r.err;
  }

  CommandResult by_state = Ckprof(&alice, {"cancel", "--state", "waiting", "--json"});
  EXPECT_EQ(by_state.exit_code, 0) << by_state.err;
  auto cancelled = json::parse(by_state.out, nullptr, false);
  ASSERT_TRUE(cancelled.is_array() && cancelled.size() == 1) << by_state.out;
  EXPECT_EQ(cancelled[0]["job_id"], a3);
  EXPECT_EQ(cancelled[0]["cancelled"], true);

  // An admin cancels another user's jobs by naming the user.
  CommandResult admin = Ckprof(nullptr, {"cancel", "--user", bob.name(), "--yes"});
  EXPECT_EQ(admin.exit_code, 0) << admin.err;
  EXPECT_EQ(Status(b1).state, JobState::kCancelled);
  CommandResult none = Ckprof(&alice, {"cancel", "--mine"});
  EXPECT_EQ(none.exit_code, 0) << none.err;
  EXPECT_EQ(none.out, "no job that has not ended matches: nothing to cancel\n");
}

// submit --after / --after-ok (sbatch --dependency=afterany/afterok, pueue --after): a job
// waits, "waiting for job N", across a restart; --after runs once its jobs ended however they
// ended; --after-ok is cancelled with the reason when one failed, and so are the jobs waiting
// on it in turn; a missing job, or an --after-ok job that already failed, is refused at submit.
TEST_F(QueueTest, DependentJobsWaitForTheirJobsAndFollowHowTheyEnded) {
  SystemUser alice(testing::UniqueName("ckq", "a")), bob(testing::UniqueName("ckq", "b"));
  ASSERT_TRUE(alice.ok() && bob.ok());
  Start(EmulatorOptions("0", R"({"socket_mode": "0666"})"));
  // The first job's one task hangs (until its task is cancelled: the job then ends failed).
  const int64_t first = SubmitAs(&alice, testing::FwdConfigsText(1, 9001));
  ASSERT_GT(first, 0);
  const std::string a = std::to_string(first);
  ASSERT_EQ(testing::WaitForEmuRuns(emu_log_, 1).size(), 1u);
  const int64_t any = SubmitAs(&alice, testing::FwdConfigsText(2, 0, 1, 10), {"--after", a});
  const int64_t ok = SubmitAs(&bob, testing::FwdConfigsText(1, 0, 1, 12), {"--after-ok", a});
  ASSERT_TRUE(any > 0 && ok > 0);
  // Waiting on a job that waits: cancelled in turn when that one is.
  const int64_t chained =
      SubmitAs(&bob, testing::FwdConfigsText(1, 0, 1, 13), {"--after-ok", std::to_string(ok)});
  const int64_t after_any =
      SubmitAs(&alice, testing::FwdConfigsText(1, 0, 1, 14), {"--after-ok", std::to_string(any)});
  ASSERT_TRUE(chained > 0 && after_any > 0);

  JobSummary s = Status(any);
  EXPECT_EQ(s.state, JobState::kWaiting);
  EXPECT_EQ(s.after, std::vector<int64_t>{first});
  EXPECT_NE(s.waiting_reason.find("waiting for job " + a), std::string::npos) << s.waiting_reason;
  CommandResult shown = Ckprof(&bob, {"status", std::to_string(ok)});
  EXPECT_NE(shown.out.find("reason: waiting for job " + a + " to succeed (--after-ok)"),
            std::string::npos)
      << shown.out;
  EXPECT_NE(shown.out.find("after-ok: " + a), std::string::npos) << shown.out;

  // Refused at submit: a job that does not exist (also the id the new job would get: no cycle
  // can be made), a malformed list.
  const std::string text = testing::FwdConfigsText(1, 0, 1, 16);
  std::string err;
  EXPECT_EQ(SubmitAs(&alice, text, {"--after", "999999"}, &err), 0);
  EXPECT_NE(err.find("--after 999999: there is no job 999999"), std::string::npos) << err;
  EXPECT_EQ(SubmitAs(&alice, text, {"--after", std::to_string(after_any + 1)}, &err), 0);
  EXPECT_NE(err.find("there is no job"), std::string::npos) << err;
  std::string many = "1";
  for (int i = 2; i <= 101; ++i) many += "," + std::to_string(i);
  EXPECT_EQ(SubmitAs(&alice, text, {"--after", many}, &err), 0);
  EXPECT_NE(err.find("--after and --after-ok name 101 jobs; a job may wait for at most 100"),
            std::string::npos)
      << err;
  EXPECT_EQ(SubmitAs(&alice, text, {"--after-ok", "7,x"}, &err), 0);
  EXPECT_NE(err.find("--after-ok takes job ids separated by commas"), std::string::npos) << err;

  // Kept across a restart (the hung task runs again, and is waited for again).
  daemon_.Stop(SIGTERM);
  Start(EmulatorOptions("0", R"({"socket_mode": "0666"})"));
  EXPECT_EQ(Status(any).state, JobState::kWaiting);
  EXPECT_EQ(Status(chained).state, JobState::kWaiting);
  ASSERT_EQ(testing::WaitForEmuRuns(emu_log_, 2).size(), 2u);
  EXPECT_EQ(RunsOfSpatial(10), 0u);

  // Its task cancelled, the first job ends failed: --after runs, --after-ok is cancelled, and
  // so is the job that waited on that one.
  ASSERT_EQ(Ckprof(&alice, {"cancel", a + "#1"}).exit_code, 0);
  auto end = testing::WaitJobEnd(daemon_.socket(), after_any);
  ASSERT_TRUE(end.ok()) << end.error();
  EXPECT_EQ(end->state, JobState::kFinished);
  EXPECT_EQ(end->counts.succeeded(), 1);
  EXPECT_EQ(Status(any).counts.succeeded(), 2);
  EXPECT_EQ(RunsOfSpatial(10), 2u);
  EXPECT_EQ(RunsOfSpatial(14), 1u);
  s = Status(ok);
  EXPECT_EQ(s.state, JobState::kCancelled);
  EXPECT_NE(s.cancel_reason.find("job " + a + " failed: 1 of its 1 task(s) did not succeed"),
            std::string::npos)
      << s.cancel_reason;
  s = Status(chained);
  EXPECT_EQ(s.state, JobState::kCancelled);
  EXPECT_NE(s.cancel_reason.find("job " + std::to_string(ok) + " was cancelled"), std::string::npos)
      << s.cancel_reason;
  EXPECT_EQ(RunsOfSpatial(12) + RunsOfSpatial(13), 0u);
  shown = Ckprof(&bob, {"status", std::to_string(ok)});
  EXPECT_NE(shown.out.find("cancelled: job " + a + " failed"), std::string::npos) << shown.out;

  // After the fact: --after-ok on a job that failed is refused, --after on it runs at once.
  EXPECT_EQ(SubmitAs(&alice, text, {"--after-ok", a}, &err), 0);
  EXPECT_NE(err.find("so this job could never run"), std::string::npos) << err;
  const int64_t late = SubmitAs(&alice, testing::FwdConfigsText(1, 0, 1, 15), {"--after", a});
  ASSERT_GT(late, 0);
  end = testing::WaitJobEnd(daemon_.socket(), late);
  ASSERT_TRUE(end.ok()) << end.error();
  EXPECT_EQ(end->counts.succeeded(), 1);
}

// drain GPU --reason (admins): kept across restarts with who, when and why, shown by `gpus`;
// no task starts there meanwhile; a plain user may not drain; resume is kept too.
TEST_F(QueueTest, AnAdminsDrainLastsAcrossRestartsWithWhoWhenAndWhy) {
  SystemUser alice(testing::UniqueName("ckq", "a"));
  ASSERT_TRUE(alice.ok());
  const auto options = EmulatorOptions("0-1", R"({"socket_mode": "0666"})");
  Start(options);
  CommandResult refused = Ckprof(&alice, {"drain", "1", "--reason", "mine now"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("only an admin may drain"), std::string::npos) << refused.err;
  CommandResult drained = Ckprof(nullptr, {"drain", "1", "--reason", "fan failing, ticket 4711"});
  ASSERT_EQ(drained.exit_code, 0) << drained.err;
  EXPECT_EQ(drained.out, "GPU 1 drained\n");
  auto gpu1 = [&] {
    CommandResult r = Ckprof(&alice, {"gpus", "--json"});
    auto gpus = json::parse(r.out, nullptr, false);
    EXPECT_TRUE(gpus.is_array() && gpus.size() == 2) << r.out << r.err;
    return gpus.is_array() && gpus.size() == 2 ? gpus[1] : json::object();
  };
  json g = gpu1();
  EXPECT_EQ(g["drained"], true) << g.dump();
  EXPECT_EQ(g.value("drained_by", ""), "root") << g.dump();
  EXPECT_EQ(g.value("drain_reason", ""), "drained by root: fan failing, ticket 4711") << g.dump();
  const double since = g.value("drained_at", 0.0);
  EXPECT_GT(since, 0) << g.dump();

  daemon_.Stop(SIGTERM);
  Start(options);
  g = gpu1();
  EXPECT_EQ(g["drained"], true) << g.dump();
  EXPECT_EQ(g.value("drained_at", 0.0), since) << g.dump();
  CommandResult table = Ckprof(&alice, {"gpus"});
  EXPECT_NE(table.out.find("drained by root: fan failing, ticket 4711 (since "), std::string::npos)
      << table.out;
  // Nothing starts on it: alice's tasks all run on GPU 0.
  const int64_t job = SubmitAs(&alice, testing::FwdConfigsText(3));
  auto end = testing::WaitJobEnd(daemon_.socket(), job);
  ASSERT_TRUE(end.ok()) << end.error();
  EXPECT_EQ(end->counts.succeeded(), 3);
  for (const auto& run : testing::ReadEmuRuns(emu_log_)) EXPECT_EQ(run.gpu, "0");

  ASSERT_EQ(Ckprof(nullptr, {"resume", "1"}).exit_code, 0);
  daemon_.Stop(SIGTERM);
  Start(options);
  g = gpu1();
  EXPECT_EQ(g["drained"], false) << g.dump();
  EXPECT_FALSE(g.contains("drained_by")) << g.dump();
}

// submit --job-timeout (sbatch --time for the whole job): past it since the job's first start,
// across a restart too, the job is cancelled, its running task stopped and its queued ones
// dropped, with the reason; a plain user may ask for at most max_job_timeout (the default of
// a job that names none), never none; an admin may.
TEST_F(QueueTest, AJobPastItsJobTimeoutIsCancelledSayingWhy) {
  SystemUser alice(testing::UniqueName("ckq", "a"));
  ASSERT_TRUE(alice.ok());
  const auto options = EmulatorOptions("0", R"({"socket_mode": "0666", "max_job_timeout": 3600})");
  Start(options);
  const std::string text = testing::FwdConfigsText(2, 9001, 2);  // #1 runs, #2 hangs
  std::string err;
  EXPECT_EQ(SubmitAs(&alice, text, {"--job-timeout", "2h"}, &err), 0);
  EXPECT_NE(err.find("--job-timeout 7200 is above this daemon's max_job_timeout of 3600 s"),
            std::string::npos)
      << err;
  EXPECT_EQ(SubmitAs(&alice, text, {"--job-timeout", "none"}, &err), 0);
  EXPECT_NE(err.find("--job-timeout 0 (no limit) is for admins only"), std::string::npos) << err;
  EXPECT_EQ(SubmitAs(&alice, text, {"--job-timeout", "soon"}, &err), 0);
  EXPECT_NE(err.find("--job-timeout must be a duration such as 7200"), std::string::npos) << err;
  const int64_t waiting =
      SubmitAs(&alice, testing::FwdConfigsText(1), {"--not-before", "+1h"}, &err);
  ASSERT_GT(waiting, 0) << err;
  EXPECT_EQ(Status(waiting).job_timeout_s, 3600);  // the daemon's maximum, by default
  EXPECT_EQ(Status(waiting).job_deadline, 0);      // not started

  // Two seconds from its first start: its second task hangs; a restart in between does not
  // reset the clock.
  const int64_t job = SubmitAs(&alice, text, {"--job-timeout", "0:00:02"}, &err);
  ASSERT_GT(job, 0) << err;
  ASSERT_EQ(testing::WaitForEmuRuns(emu_log_, 2).size(), 2u);
  JobSummary s = Status(job);
  EXPECT_EQ(s.job_timeout_s, 2);
  EXPECT_GT(s.job_deadline, s.started_at);
  EXPECT_NE(
      Ckprof(&alice, {"status", std::to_string(job)}).out.find("job timeout: 0:02, cancelled at"),
      std::string::npos);
  daemon_.Stop(SIGTERM);
  Start(options);
  auto end = testing::WaitJobEnd(daemon_.socket(), job);
  ASSERT_TRUE(end.ok()) << end.error();
  EXPECT_EQ(end->state, JobState::kCancelled);
  EXPECT_EQ(end->counts.succeeded(), 1);
  s = Status(job);
  EXPECT_NE(s.cancel_reason.find("its --job-timeout of 0:00:02 passed"), std::string::npos)
      << s.cancel_reason;
  EXPECT_LE(s.finished_at - s.started_at, 60);  // (not a timing assertion: it was cancelled)
  // An admin may ask for none.
  const int64_t admins = SubmitAs(nullptr, testing::FwdConfigsText(1), {"--job-timeout", "0"});
  ASSERT_GT(admins, 0);
  EXPECT_EQ(Status(admins).job_timeout_s, 0);
}

// Waits until a file whose name starts with `prefix` is in `dir` (inotify on the directory; a
// file moved in whole), for at most 30 s; its path, or "" on a timeout.
std::string WaitForFileIn(const std::string& dir, const std::string& prefix) {
  const int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (fd >= 0) inotify_add_watch(fd, dir.c_str(), IN_MOVED_TO | IN_CREATE);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string found;
  while (found.empty() && std::chrono::steady_clock::now() < deadline) {
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (name.rfind(prefix, 0) == 0 && name.find(".tmp") == std::string::npos) {
        found = e.path().string();
      }
    }
    if (!found.empty()) break;
    pollfd p = {fd, POLLIN, 0};
    poll(&p, fd >= 0 ? 1 : 0, 100);  // (should an event be missed: look again)
    char events[4096];
    while (fd >= 0 && read(fd, events, sizeof events) > 0) {
    }
  }
  if (fd >= 0) close(fd);
  return found;
}

// submit --mail: the job's end is mailed to its owner through the configured sendmail, run as
// them ("sendmail -oi -t", the message on stdin); a host without one refuses --mail saying why.
TEST_F(QueueTest, MailTellsTheOwnerOfTheJobsEndThroughSendmail) {
  SystemUser alice(testing::UniqueName("ckq", "a"));
  ASSERT_TRUE(alice.ok());
  const std::string mail_dir = dir_.path() + "/mail";
  ASSERT_EQ(mkdir(mail_dir.c_str(), 0777), 0);
  ASSERT_EQ(chmod(mail_dir.c_str(), 0777), 0);
  const std::string sendmail = dir_.path() + "/fake-sendmail";
  testing::WriteFile(
      sendmail,
      "#!/bin/sh\n"
      "out=" +
          mail_dir +
          "/mail-$(id -un)-$$\n"
          "{ echo \"argv: $*\"; cat; } > \"$out.tmp\" && mv \"$out.tmp\" \"$out\"\n");
  ASSERT_EQ(chmod(sendmail.c_str(), 0755), 0);
  Start(EmulatorOptions("0", R"({"socket_mode": "0666", "sendmail": ")" + sendmail + R"("})"));
  const int64_t job = SubmitAs(&alice, testing::FwdConfigsText(2), {"--mail", "--name", "rn %s"});
  ASSERT_GT(job, 0);
  const std::string path = WaitForFileIn(mail_dir, "mail-" + alice.name() + "-");
  ASSERT_FALSE(path.empty()) << "no mail was sent";
  const std::string mail = testing::ReadFile(path);
  const std::string id = std::to_string(job);
  EXPECT_NE(mail.find("argv: -oi -t\n"), std::string::npos) << mail;
  EXPECT_NE(mail.find("To: " + alice.name() + "\n"), std::string::npos) << mail;
  EXPECT_NE(mail.find("Subject: ckprof job " + id + " finished: rn %s\n"), std::string::npos)
      << mail;
  EXPECT_NE(mail.find("Its tasks: 2 succeeded"), std::string::npos) << mail;
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, alice.uid()) << "sendmail ran as the job's owner";

  daemon_.Stop(SIGTERM);
  Start(EmulatorOptions("0", R"({"socket_mode": "0666", "sendmail": "/nonexistent/sendmail"})"));
  std::string err;
  EXPECT_EQ(SubmitAs(&alice, testing::FwdConfigsText(1), {"--mail"}, &err), 0);
  EXPECT_NE(err.find("--mail needs a local sendmail, and this host has none at "
                     "/nonexistent/sendmail"),
            std::string::npos)
      << err;
}

// status J estimates when a queued job starts (squeue --start): from the work ahead at the
// measured task times; later behind more work; unknown (null) for a held job or one waiting
// for another.
TEST_F(QueueTest, StatusEstimatesWhenAQueuedJobStarts) {
  SystemUser alice(testing::UniqueName("ckq", "a"));
  ASSERT_TRUE(alice.ok());
  Start(EmulatorOptions("0", R"({"socket_mode": "0666"})"));
  // Measured task times first: two tasks that end.
  const int64_t measured = SubmitAs(&alice, testing::FwdConfigsText(2));
  ASSERT_TRUE(testing::WaitJobEnd(daemon_.socket(), measured).ok());
  EXPECT_EQ(Status(measured).estimated_start, 0);  // ended
  // The one GPU busy with a task that hangs; two jobs queued behind it.
  const int64_t busy = SubmitAs(&alice, testing::FwdConfigsText(1, 9001));
  ASSERT_GT(busy, 0);
  ASSERT_EQ(testing::WaitForEmuRuns(emu_log_, 3).size(), 3u);
  const int64_t next = SubmitAs(&alice, testing::FwdConfigsText(2, 0, 1, 10));
  const int64_t later = SubmitAs(&alice, testing::FwdConfigsText(2, 0, 1, 12));
  const JobSummary a = Status(next), b = Status(later);
  EXPECT_GT(a.estimated_start, 0);
  EXPECT_GT(b.estimated_start, a.estimated_start) << "two more tasks are ahead of it";
  // (Bounds of sense, not of speed: the hung task's measured peers took milliseconds.)
  EXPECT_GE(a.estimated_start, a.submitted_at - 1);
  EXPECT_LT(b.estimated_start, b.submitted_at + 3600);
  EXPECT_EQ(Status(busy).estimated_start, 0);  // it runs
  CommandResult shown = Ckprof(&alice, {"status", std::to_string(later)});
  EXPECT_NE(shown.out.find("estimated start: "), std::string::npos) << shown.out;
  CommandResult as_json = Ckprof(&alice, {"status", std::to_string(later), "--json"});
  EXPECT_NE(as_json.out.find("\"estimated_start\": "), std::string::npos) << as_json.out;
  // Unknown: held, or waiting for another job.
  ASSERT_EQ(Ckprof(&alice, {"hold", std::to_string(later)}).exit_code, 0);
  EXPECT_EQ(Status(later).estimated_start, 0);
  const int64_t dep =
      SubmitAs(&alice, testing::FwdConfigsText(1, 0, 1, 14), {"--after", std::to_string(next)});
  EXPECT_EQ(Status(dep).estimated_start, 0);
}

}  // namespace
}  // namespace ckprof

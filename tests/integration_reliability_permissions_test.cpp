// Reliability: nobody acts on what is not theirs. Real users and groups are created for each
// test (root only; the tests skip otherwise) and drive a real ckprofd with the real client:
// the socket's mode and group, who may cancel, retry, boost, drain; which uid a root daemon's
// tasks run as; and which profilers a non-root daemon runs for other users.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include "tests/util/commands.h"
#include "tests/util/daemon_fixture.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"
#include "tests/util/launched_daemon.h"
#include "tests/util/multi_user.h"
#include "tests/util/processes.h"
#include "tests/util/requests.h"
#include "tests/util/users.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using testing::BinPath;
using testing::CommandResult;
using testing::LaunchedDaemon;
using testing::SystemGroup;
using testing::SystemUser;

// A configs file whose i-th config has the emulator batch size magic[i] (0 = normal).
std::string MagicConfigs(const std::vector<int>& magic, int64_t spatial = 8) {
  auto j = nlohmann::ordered_json::parse(
      testing::FwdConfigsText(static_cast<int>(magic.size()), 0, 1, spatial));
  for (size_t i = 0; i < magic.size(); ++i) {
    if (magic[i]) j[i]["profiler_args"]["N"] = magic[i];
  }
  return j.dump(2);
}

class ReliabilityPermissionsTest : public testing::MultiUserDaemonTest {
 protected:
  JobSummary Status(int64_t job) {
    auto s = testing::JobStatus(daemon_.socket(), job);
    EXPECT_TRUE(s.ok()) << s.error();
    return s.ok() ? *s : JobSummary{};
  }

  // "uid N gid M" from the emulator's first stdout line, per task of a job.
  std::vector<std::pair<int, int>> TaskIds(int64_t job) {
    std::vector<std::pair<int, int>> out;
    auto results = testing::JobResults(daemon_.socket(), job, /*with_output=*/true);
    EXPECT_TRUE(results.ok()) << results.error();
    if (!results.ok()) return out;
    static const std::regex line(R"(ckprofiler-emu: pid \d+ uid (\d+) gid (\d+))");
    for (const auto& t : *results) {
      std::smatch m;
      if (std::regex_search(t.stdout_text, m, line)) {
        out.emplace_back(std::stoi(m[1]), std::stoi(m[2]));
      } else {
        out.emplace_back(-1, -1);
      }
    }
    return out;
  }
};

TEST_F(ReliabilityPermissionsTest, SocketModeAndGroupAreAsConfigured) {
  SystemGroup lab(testing::UniqueName("ckr", "g"));
  ASSERT_TRUE(lab.ok());
  SystemUser member(testing::UniqueName("ckr", "m"), {lab.name()}),
      outsider(testing::UniqueName("ckr", "o"));
  ASSERT_TRUE(member.ok() && outsider.ok());
  struct Case {
    std::string mode;
    bool member_may, outsider_may;
  } cases[] = {{"0660", true, false}, {"0600", false, false}, {"0666", true, true}};
  for (const auto& c : cases) {
    SCOPED_TRACE("socket_mode " + c.mode);
    Start(EmulatorOptions(
        "0", R"({"socket_mode": ")" + c.mode + R"(", "socket_group": ")" + lab.name() + R"("})"));
    struct stat st {};
    ASSERT_EQ(lstat(daemon_.socket().c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, std::stoul(c.mode, nullptr, 8));
    EXPECT_EQ(st.st_gid, lab.gid());
    EXPECT_EQ(st.st_uid, 0u);
    CommandResult m = Ckprof(&member, {"ping"});
    CommandResult o = Ckprof(&outsider, {"ping"});
    if (c.member_may) {
      EXPECT_EQ(m.exit_code, 0) << m.err;
      EXPECT_NE(m.out.find("you are " + member.name()), std::string::npos) << m.out;
    } else {
      EXPECT_EQ(m.exit_code, 2);
      EXPECT_NE(m.err.find("Permission denied"), std::string::npos) << m.err;
    }
    if (c.outsider_may) {
      EXPECT_EQ(o.exit_code, 0) << o.err;
    } else {
      EXPECT_EQ(o.exit_code, 2);
      EXPECT_NE(o.err.find("Permission denied"), std::string::npos) << o.err;
    }
    daemon_.Stop(SIGTERM);
  }
  // A group that does not exist is a clear startup error.
  auto o = EmulatorOptions("0", R"({"socket_group": "ckr-no-such-group"})");
  LaunchedDaemon refused;
  int status = refused.RunToExit(o);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
  EXPECT_NE(
      testing::ReadFile(refused.log_path()).find("socket_group 'ckr-no-such-group' does not exist"),
      std::string::npos);
}

// Issue 17.11: a user whom the socket's permissions keep out is told which group to join, not
// to start a ckprofd that already runs.
TEST_F(ReliabilityPermissionsTest, PermissionDeniedNamesTheGroupToJoin) {
  SystemGroup lab(testing::UniqueName("ckr", "g"));
  ASSERT_TRUE(lab.ok());
  SystemUser outsider(testing::UniqueName("ckr", "o"));
  ASSERT_TRUE(outsider.ok());
  Start(
      EmulatorOptions("0", R"({"socket_mode": "0660", "socket_group": ")" + lab.name() + R"("})"));
  for (const char* cmd : {"ping", "list"}) {
    CommandResult r = Ckprof(&outsider, {cmd});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.err, "ckprof " + std::string(cmd) + ": ckprofd at " + daemon_.socket() +
                         ": Permission denied: ckprofd runs, but you may not use it: ask to join "
                         "group " +
                         lab.name() +
                         " (the socket's group; log in again after "
                         "joining)\n");
  }
  // A socket no group may use: joining one would not help.
  ASSERT_EQ(chmod(daemon_.socket().c_str(), 0600), 0);
  CommandResult r = Ckprof(&outsider, {"ping"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ckprofd runs, but you may not use it: its socket (mode 0600, owner root) "
                       "admits no group"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("start it"), std::string::npos) << r.err;
}

TEST_F(ReliabilityPermissionsTest, OtherUsersCannotCancelRetryBoostOrDrain) {
  SystemGroup admins(testing::UniqueName("ckr", "adm"));
  ASSERT_TRUE(admins.ok());
  SystemUser alice(testing::UniqueName("ckr", "a")), bob(testing::UniqueName("ckr", "b")),
      carol(testing::UniqueName("ckr", "c"), {admins.name()});
  ASSERT_TRUE(alice.ok() && bob.ok() && carol.ok());
  Start(EmulatorOptions("0", R"({"socket_mode": "0666", "kill_grace": 0.2, "admin_group": ")" +
                                 admins.name() + R"("})"));
  // Alice's job: task 1 fails, task 2 hangs on the only GPU.
  int64_t job = SubmitAs(&alice, MagicConfigs({9003, 9001}));
  ASSERT_GT(job, 0);
  ASSERT_TRUE(testing::WatchUntil(daemon_.socket(), job, [](const JobSummary& s) {
                return s.counts.of(TaskState::kFailed) == 1 && s.counts.running() == 1;
              }).ok());
  const std::string id = std::to_string(job);
  struct Attempt {
    std::vector<std::string> args;
    std::string error;
  } refused[] = {
      {{"cancel", id},
       "job " + id + " belongs to " + alice.name() + "; only its owner or an admin may cancel it"},
      {{"retry", id},
       "job " + id + " belongs to " + alice.name() + "; only its owner or an admin may retry it"},
      {{"boost", id, "100"}, "only an admin may change a job's priority"},
      {{"drain", "0"}, "only an admin may drain or resume a GPU"},
      {{"resume", "0"}, "only an admin may drain or resume a GPU"},
  };
  for (const auto& a : refused) {
    SCOPED_TRACE("bob: " + a.args[0]);
    CommandResult r = Ckprof(&bob, a.args);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(a.error), std::string::npos) << r.err;
  }
  // Nothing of Alice's job changed.
  JobSummary s = Status(job);
  EXPECT_EQ(s.state, JobState::kRunning);
  EXPECT_EQ(s.priority, 0);
  EXPECT_EQ(s.counts.of(TaskState::kFailed), 1);
  EXPECT_EQ(s.counts.running(), 1);
  EXPECT_EQ(s.counts.queued(), 0) << "bob's retry requeued alice's failed task";
  // The owner may retry and cancel, but not boost; an admin-group member may do all.
  CommandResult own_boost = Ckprof(&alice, {"boost", id, "100"});
  EXPECT_EQ(own_boost.exit_code, 1);
  EXPECT_NE(own_boost.err.find("only an admin"), std::string::npos) << own_boost.err;
  CommandResult own_retry = Ckprof(&alice, {"retry", id});
  EXPECT_EQ(own_retry.exit_code, 0) << own_retry.err;
  EXPECT_NE(own_retry.out.find("1 task(s) requeued"), std::string::npos) << own_retry.out;
  CommandResult admin_boost = Ckprof(&carol, {"boost", id, "5"});
  EXPECT_EQ(admin_boost.exit_code, 0) << admin_boost.err;
  EXPECT_EQ(Status(job).priority, 5);
  CommandResult admin_cancel = Ckprof(&carol, {"cancel", id});
  EXPECT_EQ(admin_cancel.exit_code, 0) << admin_cancel.err;
  auto end = testing::WaitJobEnd(daemon_.socket(), job);
  ASSERT_TRUE(end.ok()) << end.error();
  EXPECT_EQ(end->state, JobState::kCancelled);
  // Bob may cancel his own.
  int64_t bobs = SubmitAs(&bob, MagicConfigs({9001}));
  ASSERT_GT(bobs, 0);
  CommandResult bob_cancel = Ckprof(&bob, {"cancel", std::to_string(bobs)});
  EXPECT_EQ(bob_cancel.exit_code, 0) << bob_cancel.err;
  auto bobs_end = testing::WaitJobEnd(daemon_.socket(), bobs);
  ASSERT_TRUE(bobs_end.ok()) << bobs_end.error();
  EXPECT_EQ(bobs_end->state, JobState::kCancelled);
  EXPECT_TRUE(testing::ProcessesWithEnv("CKPROFD_STATE=" + daemon_.state_dir()).empty());
}

TEST_F(ReliabilityPermissionsTest, TasksOfARootDaemonRunAsTheirSubmitter) {
  SystemUser alice(testing::UniqueName("ckr", "a")), bob(testing::UniqueName("ckr", "b"));
  ASSERT_TRUE(alice.ok() && bob.ok());
  Start(EmulatorOptions("0-1", R"({"socket_mode": "0666"})"));
  int64_t a = SubmitAs(&alice, MagicConfigs({0, 0, 0}));
  int64_t b = SubmitAs(&bob, MagicConfigs({0, 0}, 10));
  int64_t r = SubmitAs(nullptr, MagicConfigs({0}, 12));
  ASSERT_TRUE(a > 0 && b > 0 && r > 0);
  for (int64_t job : {a, b, r}) ASSERT_TRUE(testing::WaitJobEnd(daemon_.socket(), job).ok());
  const std::pair<int, int> alice_ids(static_cast<int>(alice.uid()), static_cast<int>(alice.gid()));
  const std::pair<int, int> bob_ids(static_cast<int>(bob.uid()), static_cast<int>(bob.gid()));
  using Ids = std::vector<std::pair<int, int>>;
  EXPECT_EQ(TaskIds(a), Ids(3, alice_ids));
  EXPECT_EQ(TaskIds(b), Ids(2, bob_ids));
  EXPECT_EQ(TaskIds(r), Ids(1, std::make_pair(0, 0)));
}

TEST_F(ReliabilityPermissionsTest, NonRootDaemonRunsOtherUsersProfilersOnlyFromAllowedRoots) {
  SystemUser svc(testing::UniqueName("ckr", "s")), eve(testing::UniqueName("ckr", "e"));
  ASSERT_TRUE(svc.ok() && eve.ok());
  namespace fs = std::filesystem;
  const std::string allowed = dir_.File("allowed"), outside = dir_.File("outside");
  fs::create_directories(allowed);
  fs::create_directories(outside);
  for (const auto& d : {allowed, outside}) {
    fs::copy_file(BinPath("ckprofiler-emu"), d + "/ckProfiler");
    chmod((d + "/ckProfiler").c_str(), 0755);
  }
  // Eve's own directory, with a link into the allowed root and a program of her own.
  const std::string eves = dir_.File("eve");
  fs::create_directories(eves);
  // The daemon runs as svc, in a directory of its own.
  const std::string home = dir_.File("svc");
  fs::create_directories(home);
  chown(home.c_str(), svc.uid(), svc.gid());
  chmod(home.c_str(), 0755);
  const std::string marker = home + "/evil-ran";  // where a program run as svc may write
  testing::WriteFile(eves + "/evil", "#!/bin/sh\ntouch " + marker + "\n");
  chmod((eves + "/evil").c_str(), 0755);
  fs::create_symlink(allowed + "/ckProfiler", eves + "/link");
  chown(eves.c_str(), eve.uid(), eve.gid());
  LaunchedDaemon::Options o =
      EmulatorOptions("0", R"({"socket_mode": "0666", "allowed_profiler_roots": [")" + allowed +
                               R"("], "profiler_path": ")" + allowed + R"(/ckProfiler"})");
  o.dir = home;
  o.args.clear();
  o.uid = svc.uid();
  o.gid = svc.gid();
  Start(o);

  struct Case {
    std::string path;
    bool accepted;
  } cases[] = {
      {outside + "/ckProfiler", false},
      {outside, false},
      {allowed + "/../outside/ckProfiler", false},
      {eves + "/evil", false},
      {allowed + "/ckProfiler", true},
      {allowed, true},
      {"", true},  // the daemon's default, inside the root
  };
  for (const auto& c : cases) {
    SCOPED_TRACE("eve with '" + c.path + "'");
    std::string error;
    std::vector<std::string> extra;
    if (!c.path.empty()) extra = {"--profiler-path", c.path};
    int64_t job = SubmitAs(&eve, MagicConfigs({0}), extra, &error);
    if (c.accepted) {
      ASSERT_GT(job, 0) << error;
      auto end = testing::WaitJobEnd(daemon_.socket(), job);
      ASSERT_TRUE(end.ok()) << end.error();
      EXPECT_EQ(end->counts.succeeded(), 1);
      // A non-root daemon runs every task as itself.
      auto ids = TaskIds(job);
      ASSERT_EQ(ids.size(), 1u);
      EXPECT_EQ(ids[0].first, static_cast<int>(svc.uid()));
    } else {
      EXPECT_EQ(job, 0);
      EXPECT_NE(error.find("is not under allowed_profiler_roots (" + allowed + ")"),
                std::string::npos)
          << error;
      EXPECT_NE(error.find("runs as uid " + std::to_string(svc.uid())), std::string::npos) << error;
    }
  }
  // The daemon's own user may run any profiler.
  int64_t own = SubmitAs(&svc, MagicConfigs({0}), {"--profiler-path", outside + "/ckProfiler"});
  ASSERT_GT(own, 0);
  EXPECT_EQ(testing::WaitJobEnd(daemon_.socket(), own)->counts.succeeded(), 1);

  // A link Eve controls passes the check while it points into the root; re-pointed before the
  // task runs, it must not make the daemon run Eve's program.
  CommandResult drain = Ckprof(nullptr, {"drain", "0"});
  ASSERT_EQ(drain.exit_code, 0) << drain.err;
  int64_t job = SubmitAs(&eve, MagicConfigs({0}), {"--profiler-path", eves + "/link"});
  ASSERT_GT(job, 0);
  fs::remove(eves + "/link");
  fs::create_symlink(eves + "/evil", eves + "/link");
  CommandResult resume = Ckprof(nullptr, {"resume", "0"});
  ASSERT_EQ(resume.exit_code, 0) << resume.err;
  auto end = testing::WaitJobEnd(daemon_.socket(), job);
  ASSERT_TRUE(end.ok()) << end.error();
  EXPECT_FALSE(fs::exists(marker)) << "the daemon ran a program outside allowed_profiler_roots";
  EXPECT_EQ(end->counts.succeeded(), 1);
  daemon_.Stop(SIGTERM);  // before svc is deleted
}

// Issue 20.3 and 20.4: edit and clean act on one's own jobs within the owner's rights; an
// admin may do more; nobody removes a job that has not ended.
TEST_F(ReliabilityPermissionsTest, EditAndCleanKeepToTheOwnersRights) {
  SystemGroup admins(testing::UniqueName("ckr", "adm"));
  ASSERT_TRUE(admins.ok());
  SystemUser alice(testing::UniqueName("ckr", "a")), bob(testing::UniqueName("ckr", "b")),
      carol(testing::UniqueName("ckr", "c"), {admins.name()});
  ASSERT_TRUE(alice.ok() && bob.ok() && carol.ok());
  Start(EmulatorOptions("0-1",
                        R"({"socket_mode": "0666", "admin_group": ")" + admins.name() + R"("})"));
  // Alice's job waits for two hours.
  const int64_t job = SubmitAs(&alice, MagicConfigs({0, 0}), {"--not-before", "+2h"});
  ASSERT_GT(job, 0);
  const std::string id = std::to_string(job);
  EXPECT_EQ(Status(job).state, JobState::kWaiting);
  CommandResult by_bob = Ckprof(&bob, {"edit", id, "--priority", "-1"});
  EXPECT_EQ(by_bob.exit_code, 1);
  EXPECT_NE(by_bob.err.find("job " + id + " belongs to " + alice.name() +
                            "; only its owner or an admin may edit it"),
            std::string::npos)
      << by_bob.err;
  // Any priority, as at submit: it orders her own jobs only (SecurityLimitsTest).
  CommandResult raise = Ckprof(&alice, {"edit", id, "--priority", "5"});
  EXPECT_EQ(raise.exit_code, 0) << raise.err;
  EXPECT_EQ(Status(job).priority, 5);
  CommandResult lower = Ckprof(&alice, {"edit", id, "--priority", "-3", "--gpus", "1", "--max-gpus",
                                        "1", "--timeout", "60", "--name", "mine"});
  EXPECT_EQ(lower.exit_code, 0) << lower.err;
  JobSummary s = Status(job);
  EXPECT_EQ(s.priority, -3);
  EXPECT_EQ(s.allowed_gpus, std::vector<int>{1});
  EXPECT_EQ(s.max_gpus, 1);
  EXPECT_EQ(s.timeout_s, 60);
  EXPECT_EQ(s.name, "mine");
  EXPECT_EQ(s.state, JobState::kWaiting);
  CommandResult admin = Ckprof(&carol, {"edit", id, "--priority", "10"});
  EXPECT_EQ(admin.exit_code, 0) << admin.err;
  EXPECT_EQ(Status(job).priority, 10);
  CommandResult bad_gpu = Ckprof(&alice, {"edit", id, "--gpus", "7"});
  EXPECT_EQ(bad_gpu.exit_code, 1);
  EXPECT_NE(bad_gpu.err.find("this daemon drives no GPU 7"), std::string::npos) << bad_gpu.err;
  // Now: it runs at once, on GPU 1 alone.
  CommandResult now = Ckprof(&alice, {"edit", id, "--not-before", "now"});
  EXPECT_EQ(now.exit_code, 0) << now.err;
  auto end = testing::WaitJobEnd(daemon_.socket(), job);
  ASSERT_TRUE(end.ok()) << end.error();
  EXPECT_EQ(end->state, JobState::kFinished);
  auto results = testing::JobResults(daemon_.socket(), job, false);
  ASSERT_TRUE(results.ok()) << results.error();
  for (const auto& t : *results) EXPECT_EQ(t.gpu, 1);
  CommandResult ended = Ckprof(&alice, {"edit", id, "--priority", "-5"});
  EXPECT_EQ(ended.exit_code, 1);
  EXPECT_NE(ended.err.find("has ended"), std::string::npos) << ended.err;

  // Clean: Bob's own clean leaves Alice's job, and his waiting one; --all is for admins.
  const int64_t bobs = SubmitAs(&bob, MagicConfigs({0}), {"--not-before", "+2h"});
  ASSERT_GT(bobs, 0);
  CommandResult bob_clean = Ckprof(&bob, {"clean"});
  EXPECT_EQ(bob_clean.exit_code, 0) << bob_clean.err;
  EXPECT_EQ(bob_clean.out, "no ended job to remove\n");
  CommandResult bob_all = Ckprof(&bob, {"clean", "--all"});
  EXPECT_EQ(bob_all.exit_code, 1);
  EXPECT_NE(bob_all.err.find("only an admin may clean other users' jobs"), std::string::npos)
      << bob_all.err;
  CommandResult young = Ckprof(&alice, {"clean", "--older-than", "7d"});
  EXPECT_EQ(young.out, "no ended job older than 7d to remove\n") << young.err;
  CommandResult admin_all = Ckprof(&carol, {"clean", "--all", "--json"});
  EXPECT_EQ(admin_all.exit_code, 0) << admin_all.err;
  EXPECT_EQ(nlohmann::json::parse(admin_all.out)["removed"], nlohmann::json::array({job}));
  CommandResult gone = Ckprof(&alice, {"status", id});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_NE(gone.err.find("no job " + id), std::string::npos) << gone.err;
  EXPECT_EQ(Status(bobs).state, JobState::kWaiting);
}

}  // namespace
}  // namespace ckprof

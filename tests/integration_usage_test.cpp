// `ckprof usage` (issue 33.4: sacct's and sshare's questions) against a real root ckprofd
// driven by the real client as real Linux users: each user's GPU time, runs, successes and
// failures (and each job's with --jobs) from the stored attempts, also after a restart; the
// fair-share usage and place; the caller's caps; --since and --user.
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "daemon/unix_time.h"
#include "tests/util/commands.h"
#include "tests/util/emulator.h"
#include "tests/util/multi_user.h"
#include "tests/util/users.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using testing::CommandResult;
using testing::SystemUser;

// One GPU, every user's caps set (so that `usage` shows them).
constexpr const char* kConfig =
    R"({"socket_mode": "0666", "max_jobs_per_user": 10, "max_queued_runs_per_user": 100,
        "max_gpus_per_user": 1})";

class UsageTest : public testing::MultiUserDaemonTest {
 protected:
  // `usage ARGS --json` as `user`: the object, or null after a failed expectation.
  json Usage(const SystemUser* user, std::vector<std::string> args) {
    args.insert(args.begin(), "usage");
    args.push_back("--json");
    CommandResult r = Ckprof(user, args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    json j = json::parse(r.out, nullptr, false);
    EXPECT_TRUE(j.is_object()) << r.out;
    return j.is_object() ? j : json();
  }
  // The row of `name` in rows (users or jobs), keyed by "user" or "job_id".
  static json Row(const json& rows, const char* key, const json& value) {
    if (rows.is_array()) {
      for (const json& r : rows) {
        if (r.value(key, json()) == value) return r;
      }
    }
    return json();
  }
  void Wait(const SystemUser* user, int64_t job) {
    CommandResult w = Ckprof(user, {"wait", std::to_string(job)});
    ASSERT_TRUE(w.exit_code == 0 || w.exit_code == 1) << w.err;  // 1: a task failed
  }
};

TEST_F(UsageTest, CountsEachUsersAndJobsRunsFromTheStoredAttempts) {
  SystemUser alice(testing::UniqueName("cku", "a")), bob(testing::UniqueName("cku", "b"));
  ASSERT_TRUE(alice.ok() && bob.ok());
  Start(EmulatorOptions("0", kConfig));
  const double t0 = UnixNow();
  // alice: 3 runs (the third fails) and 2; bob: 2. Each job its own problems (no reuse).
  const int64_t a1 = SubmitAs(&alice, testing::FwdConfigsText(3, 9003, 3, 20));
  const int64_t a2 = SubmitAs(&alice, testing::FwdConfigsText(2, 0, 1, 21));
  const int64_t b1 = SubmitAs(&bob, testing::FwdConfigsText(2, 0, 1, 22));
  ASSERT_TRUE(a1 > 0 && a2 > 0 && b1 > 0);
  Wait(&alice, a1);
  Wait(&alice, a2);
  Wait(&bob, b1);
  const double wall = UnixNow() - t0;

  // Everyone sees everyone's, bob included.
  for (const SystemUser* asker : {&alice, &bob}) {
    json u = Usage(asker, {});
    const json a = Row(u["users"], "user", alice.name()), b = Row(u["users"], "user", bob.name());
    ASSERT_TRUE(a.is_object() && b.is_object()) << u.dump(2);
    EXPECT_EQ(a["runs"], 5);
    EXPECT_EQ(a["succeeded"], 4);
    EXPECT_EQ(a["failed"], 1);
    EXPECT_EQ(b["runs"], 2);
    EXPECT_EQ(b["succeeded"], 2);
    EXPECT_EQ(b["failed"], 0);
    EXPECT_EQ(a["uid"], alice.uid());
    // Measured GPU time: some, and on one GPU never more than the test's wall time together.
    const double as = a["gpu_seconds"].get<double>(), bs = b["gpu_seconds"].get<double>();
    EXPECT_GT(as, 0);
    EXPECT_GT(bs, 0);
    EXPECT_LE(as + bs, wall + 1e-3);
    std::cout << "GPU seconds: alice " << as << ", bob " << bs << " in " << wall << " s\n";
    // Fair share: what they used, decayed a little; nobody has queued work, so no place.
    EXPECT_GT(a["fair_share_usage"].get<double>(), 0);
    EXPECT_LE(a["fair_share_usage"].get<double>(), wall + 1e-3);
    EXPECT_TRUE(a["place"].is_null()) << a;
    EXPECT_GT(u["half_life_s"].get<double>(), 0);
    EXPECT_TRUE(u["jobs"].empty()) << u.dump(2);
    // The asker's own use and caps, as status gives them.
    EXPECT_EQ(u["you"]["user"], asker->name());
    EXPECT_EQ(u["you"]["max_jobs"], 10);
    EXPECT_EQ(u["you"]["max_queued_runs"], 100);
    EXPECT_EQ(u["you"]["max_gpus"], 1);
  }

  // --jobs: one row per job, with its own counts; --user: that user alone.
  json j = Usage(&bob, {"--jobs"});
  ASSERT_EQ(j["jobs"].size(), 3u) << j.dump(2);
  const std::map<int64_t, std::vector<int>> expected = {
      {a1, {3, 2, 1}}, {a2, {2, 2, 0}}, {b1, {2, 2, 0}}};
  for (const auto& [job, counts] : expected) {
    const json row = Row(j["jobs"], "job_id", job);
    ASSERT_TRUE(row.is_object()) << job << ": " << j.dump(2);
    EXPECT_EQ(row["runs"], counts[0]) << job;
    EXPECT_EQ(row["succeeded"], counts[1]) << job;
    EXPECT_EQ(row["failed"], counts[2]) << job;
    EXPECT_EQ(row["user"], job == b1 ? bob.name() : alice.name());
    EXPECT_GT(row["gpu_seconds"].get<double>(), 0);
  }
  json only = Usage(&alice, {"--user", bob.name(), "--jobs"});
  ASSERT_EQ(only["users"].size(), 1u) << only.dump(2);
  EXPECT_EQ(only["users"][0]["user"], bob.name());
  ASSERT_EQ(only["jobs"].size(), 1u) << only.dump(2);
  EXPECT_EQ(only["jobs"][0]["job_id"], b1);

  // Asked at once by several clients: the scans take turns (one at a time on the pool), and
  // each is answered.
  std::vector<std::thread> askers;
  std::vector<CommandResult> answers(4);
  for (size_t i = 0; i < answers.size(); ++i) {
    askers.emplace_back([&, i] {
      answers[i] = Ckprof(i % 2 ? &bob : &alice, {"usage", "--json"});
    });
  }
  for (auto& t : askers) t.join();
  for (const CommandResult& r : answers) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    json u = json::parse(r.out, nullptr, false);
    EXPECT_EQ(Row(u.is_object() ? u["users"] : json(), "user", alice.name())["runs"], 5) << r.out;
  }

  // --since: an age that covers the test counts all; a time to come counts nothing.
  EXPECT_EQ(Row(Usage(&alice, {"--since", "7d"})["users"], "user", alice.name())["runs"], 5);
  json later = Usage(&alice, {"--since", "+1h", "--jobs"});
  for (const json& row : later["users"]) {
    EXPECT_EQ(row["runs"], 0) << later.dump(2);
    EXPECT_EQ(row["gpu_seconds"], 0.0) << later.dump(2);
  }
  EXPECT_TRUE(later["jobs"].empty()) << later.dump(2);

  // Usage errors name the option.
  CommandResult bad = Ckprof(&alice, {"usage", "--since", "last tuesday"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.err.find("--since must be an age such as 7d"), std::string::npos) << bad.err;
  CommandResult nobody = Ckprof(&alice, {"usage", "--user", "cku-nobody-here"});
  EXPECT_EQ(nobody.exit_code, 1) << nobody.out;
  EXPECT_NE(nobody.err.find("--user cku-nobody-here: no such user"), std::string::npos)
      << nobody.err;

  // The table: every column, and the caps line status prints.
  ckprof_env_ = {"COLUMNS=200"};
  CommandResult table = Ckprof(&alice, {"usage", "--jobs"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  for (const char* text : {"USER", "GPU-HOURS", "RUNS", "OK", "FAILED", "FAIR-SHARE USAGE", "PLACE",
                           "JOB", "NAME", "limits: 10 active jobs, 100 runs"}) {
    EXPECT_NE(table.out.find(text), std::string::npos) << text << "\n" << table.out;
  }

  // From the Store: the same after a restart.
  daemon_.Stop(SIGTERM);
  Start(EmulatorOptions("0", kConfig));
  json after = Usage(&alice, {"--jobs"});
  const json a = Row(after["users"], "user", alice.name());
  EXPECT_EQ(a["runs"], 5) << after.dump(2);
  EXPECT_EQ(a["succeeded"], 4);
  EXPECT_EQ(a["failed"], 1);
  EXPECT_EQ(Row(after["users"], "user", bob.name())["runs"], 2) << after.dump(2);
  EXPECT_EQ(after["jobs"].size(), 3u) << after.dump(2);
}

// The fair-share order: among the users with queued work, the one with less decayed usage is
// served first (place 1), as the next free GPU shows.
TEST_F(UsageTest, PlacesTheUserWithLessUsageFirst) {
  SystemUser alice(testing::UniqueName("cku", "c")), bob(testing::UniqueName("cku", "d"));
  ASSERT_TRUE(alice.ok() && bob.ok());
  Start(EmulatorOptions("0", kConfig));
  // alice runs six tasks, bob one: alice has the more usage.
  Wait(&alice, SubmitAs(&alice, testing::FwdConfigsText(6, 0, 1, 30)));
  Wait(&bob, SubmitAs(&bob, testing::FwdConfigsText(1, 0, 1, 31)));
  // root's hanging task holds the GPU; then alice, then bob queue a job each.
  const int64_t blocker = SubmitAs(nullptr, testing::FwdConfigsText(1, 9001, 1, 32));
  ASSERT_EQ(testing::WaitForEmuRuns(emu_log_, 8).size(), 8u);
  const int64_t a = SubmitAs(&alice, testing::FwdConfigsText(1, 0, 1, 33));
  const int64_t b = SubmitAs(&bob, testing::FwdConfigsText(1, 0, 1, 34));
  ASSERT_TRUE(a > 0 && b > 0);

  json u = Usage(&alice, {});
  const json ra = Row(u["users"], "user", alice.name()), rb = Row(u["users"], "user", bob.name());
  ASSERT_TRUE(ra.is_object() && rb.is_object()) << u.dump(2);
  EXPECT_GT(ra["fair_share_usage"].get<double>(), rb["fair_share_usage"].get<double>())
      << u.dump(2);
  EXPECT_EQ(rb["place"], 1) << u.dump(2);
  EXPECT_EQ(ra["place"], 2) << u.dump(2);
  // root runs, but has nothing queued: no place.
  EXPECT_TRUE(Row(u["users"], "user", "root")["place"].is_null()) << u.dump(2);

  // And so it goes: the GPU, freed, runs bob's job first.
  ASSERT_EQ(Ckprof(nullptr, {"cancel", std::to_string(blocker)}).exit_code, 0);
  const std::vector<testing::EmuRun> runs = testing::WaitForEmuRuns(emu_log_, 10);
  ASSERT_EQ(runs.size(), 10u);
  auto spatial_of = [](const testing::EmuRun& run) {
    for (size_t i = 1; i < run.argv.size(); ++i) {
      if (run.argv[i] == run.argv[i - 1] && (run.argv[i] == "33" || run.argv[i] == "34"))
        return run.argv[i];
    }
    return std::string();
  };
  EXPECT_EQ(spatial_of(runs[8]), "34");  // bob's
  EXPECT_EQ(spatial_of(runs[9]), "33");  // alice's
  Wait(&alice, a);
  Wait(&bob, b);
}

}  // namespace
}  // namespace ckprof

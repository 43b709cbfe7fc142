// Issue 21.1 and 21.2 end to end: `submit --reuse auto` on a real ckprofd. A sweep submitted
// twice runs once; a sweep overlapping it runs only its new problems; --reuse never and
// --repeat always run; a rebuilt profiler is measured again; results are shared between users
// unless share_results is false; `ckprof best` agrees with the stored results. The emulator's
// log (CKEMU_LOG) says which profiler runs happened.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "common/ck_config.h"
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
using testing::SystemUser;

class ReuseTest : public testing::EmulatorDaemonTest {
 protected:
  void SetUp() override {
    EmulatorDaemonTest::SetUp();
    daemon_.ExpectCleanStop();
  }
  void StartWithReuse(const std::string& config_json = "", const std::string& profiler = "") {
    auto o = EmulatorOptions("0-1", config_json);
    o.reuse = true;
    if (!profiler.empty()) o.args = {"--profiler-path", profiler};
    Start(o);
  }
  CommandResult Ckprof(std::vector<std::string> args, const SystemUser* user = nullptr) {
    std::vector<std::string> argv = user ? user->As() : std::vector<std::string>{};
    argv.insert(argv.end(), {testing::SharedBinPath("ckprof"), "--socket", daemon_.socket()});
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunCommand(argv, {}, dir_.path());
  }
  // Submits `text` (a configs file) with `extra` options; waits for the job's end; its id.
  std::string SubmitAndWait(const std::string& text, std::vector<std::string> extra = {},
                            const SystemUser* user = nullptr) {
    const std::string file = dir_.File("configs-" + std::to_string(++files_) + ".json");
    testing::WriteFile(file, text);
    chmod(file.c_str(), 0644);
    extra.insert(extra.begin(), {"submit", file});
    auto submitted = Ckprof(extra, user);
    EXPECT_EQ(submitted.exit_code, 0) << submitted.err;
    std::string job = submitted.out.substr(0, submitted.out.find('\n'));
    last_submit_err_ = submitted.err;
    auto waited = Ckprof({"wait", job}, user);
    EXPECT_EQ(waited.exit_code, 0) << waited.err;
    return job;
  }
  json Results(const std::string& job) {
    auto r = Ckprof({"results", job, "--format", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto j = ParseJson(r.out);
    return j.ok() ? (*j)["results"] : json::array();
  }
  json Status(const std::string& job) {
    auto r = Ckprof({"status", job, "--json"});
    auto j = ParseJson(r.out);  // {"jobs": [the jobs named], ...}
    const bool one = j.ok() && j->is_object() && (*j)["jobs"].size() == 1;
    EXPECT_TRUE(one) << r.out << r.err;
    return one ? (*j)["jobs"][0] : json();
  }
  size_t ProfilerRuns() const { return testing::ReadEmuRuns(emu_log_).size(); }

  int files_ = 0;
  std::string last_submit_err_;
};

TEST_F(ReuseTest, ASweepSubmittedTwiceRunsOnce) {
  StartWithReuse();
  const std::string sweep = testing::FwdConfigsText(5);
  const std::string first = SubmitAndWait(sweep);
  ASSERT_EQ(ProfilerRuns(), 5u);
  const json measured = Results(first);

  const std::string second = SubmitAndWait(sweep);
  EXPECT_EQ(ProfilerRuns(), 5u) << "the second submit ran a profiler";
  EXPECT_NE(last_submit_err_.find("5 reused from earlier runs"), std::string::npos)
      << last_submit_err_;
  const json s = Status(second);
  EXPECT_EQ(s["state"], "finished") << s.dump();
  EXPECT_EQ(s["succeeded"], 5);
  EXPECT_EQ(s["reused"], 5);
  const json reused = Results(second);
  ASSERT_EQ(reused.size(), 5u);
  for (size_t i = 0; i < reused.size(); ++i) {
    const json& r = reused[i];
    ASSERT_TRUE(r["reused_from"].is_object()) << r.dump();
    // Where it came from: the first job's task at the same place, its figures unchanged.
    EXPECT_EQ(r["reused_from"]["job_id"], std::stoll(first)) << r.dump();
    EXPECT_EQ(r["reused_from"]["task_id"], measured[i]["task_id"]) << r.dump();
    EXPECT_EQ(r["reused_from"]["position"], measured[i]["position"]);
    EXPECT_EQ(r["reused_from"]["gpu"], measured[i]["gpu"]);
    EXPECT_EQ(r["best_instance"], measured[i]["best_instance"]);
    EXPECT_EQ(r["avg_time_ms"], measured[i]["avg_time_ms"]);
    EXPECT_EQ(r["tflops"], measured[i]["tflops"]);
    EXPECT_TRUE(r["success"].get<bool>());
    EXPECT_TRUE(r["gpu"].is_null()) << "a reused task ran on no GPU: " << r.dump();
    EXPECT_EQ(r["elapsed_time"], 0.0) << "a reused task cost no time";
    EXPECT_TRUE(measured[i]["reused_from"].is_null());
  }
  // The views say so.
  CommandResult table = Ckprof({"results", second, "--format", "table", "--wide"});
  EXPECT_NE(table.out.find("succeeded="), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("= reused: not run"), std::string::npos) << table.out;
  CommandResult watch = Ckprof({"watch", second});
  EXPECT_EQ(watch.exit_code, 0) << watch.err;
  EXPECT_NE(watch.out.find("5 of the succeeded reused from earlier runs"), std::string::npos)
      << watch.out;
  CommandResult csv = Ckprof({"results", second, "--format", "csv"});
  EXPECT_NE(
      csv.out.find("," + first + "," + std::to_string(measured[0]["task_id"].get<int>()) + ",,,\n"),
      std::string::npos)
      << csv.out;
}

// A large sweep is stored in steps; what reuse works out at its first step (the GPU model, the
// builds, each problem's lookup) serves the next ones: the same problems, 60 times over 30
// steps, all reused, none run again.
TEST_F(ReuseTest, ASweepStoredInStepsReusesInEveryStep) {
  auto o = EmulatorOptions("0-1");
  o.reuse = true;
  o.env.push_back("CKPROFD_STEP_ROWS=10");
  Start(o);
  const std::string five = testing::FwdConfigsText(5);
  SubmitAndWait(five);
  ASSERT_EQ(ProfilerRuns(), 5u);
  auto configs = ParseJson(five);
  ASSERT_TRUE(configs.ok());
  json many = json::array();
  for (int i = 0; i < 60; ++i) {
    for (const auto& c : *configs) many.push_back(c);
  }
  const std::string second = SubmitAndWait(many.dump());
  EXPECT_EQ(ProfilerRuns(), 5u) << "a step after the first ran a profiler";
  const json s = Status(second);
  EXPECT_EQ(s["succeeded"], 300);
  EXPECT_EQ(s["reused"], 300) << s.dump();
}

TEST_F(ReuseTest, AnOverlappingSweepRunsOnlyItsNewProblems) {
  StartWithReuse();
  SubmitAndWait(testing::FwdConfigsText(3));  // problems 1..3
  ASSERT_EQ(ProfilerRuns(), 3u);
  // Problems 1..5, and problem 2 again with other metadata (a second model's layer that has
  // its shape) and another log level: 2 new.
  json wider = json::parse(testing::FwdConfigsText(5));
  json again = wider[1];
  again["metadata"] = {{"priority_rank", 6}, {"description", "another model's layer"}};
  again["profiler_args"]["log"] = 1;  // prints more; the same work
  wider.push_back(again);
  const std::string job = SubmitAndWait(wider.dump());
  const auto runs = testing::ReadEmuRuns(emu_log_);
  ASSERT_EQ(runs.size(), 5u) << "only problems 4 and 5 should have run";
  const json s = Status(job);
  EXPECT_EQ(s["total"], 6);
  EXPECT_EQ(s["succeeded"], 6);
  EXPECT_EQ(s["reused"], 4) << s.dump();
  const json r = Results(job);
  ASSERT_EQ(r.size(), 6u);
  for (int i : {0, 1, 2, 5}) EXPECT_TRUE(r[i]["reused_from"].is_object()) << r[i].dump();
  EXPECT_EQ(r[5]["reused_from"]["task_id"], r[1]["reused_from"]["task_id"]);
  EXPECT_TRUE(r[3]["reused_from"].is_null());
  EXPECT_TRUE(r[4]["reused_from"].is_null());
}

TEST_F(ReuseTest, ReuseNeverAndRepeatAlwaysRunAndBestCountsEveryMeasurement) {
  StartWithReuse();
  const std::string sweep = testing::FwdConfigsText(2);
  SubmitAndWait(sweep);
  SubmitAndWait(sweep, {"--reuse", "never"});
  EXPECT_EQ(ProfilerRuns(), 4u);
  const std::string repeated = SubmitAndWait(sweep, {"--repeat", "2"});
  EXPECT_EQ(ProfilerRuns(), 8u);
  EXPECT_EQ(Status(repeated)["reused"], 0);
  EXPECT_EQ(Ckprof({"submit", dir_.File("configs-1.json"), "--reuse", "sometimes"}).exit_code, 2);

  // The tuning table: one row per problem, measured 4 times each (two jobs, two repeats),
  // its best the fastest of the stored runs.
  CommandResult best = Ckprof({"best", "--format", "json"});
  ASSERT_EQ(best.exit_code, 0) << best.err;
  auto table = ParseJson(best.out);
  ASSERT_TRUE(table.ok()) << best.out;
  const json& rows = (*table)["rows"];
  ASSERT_EQ(rows.size(), 2u) << best.out;
  std::map<std::string, double> fastest;  // problem key -> fastest stored time
  for (const std::string job : {"1", "2", "3"}) {
    auto r = Ckprof({"results", job, "--format", "json", "--runs"});
    auto j = ParseJson(r.out);
    ASSERT_TRUE(j.ok());
    for (const json& t : (*j)["results"]) {
      auto cfg = ConfigFromJson(ParseOrderedJson(t["config"].dump()).value(), 0);
      ASSERT_TRUE(cfg.ok()) << cfg.error();
      const std::string key = ProblemKey(*cfg);
      const double ms = t["avg_time_ms"].get<double>();
      if (!fastest.count(key) || ms < fastest[key]) fastest[key] = ms;
    }
  }
  for (const json& row : rows) {
    EXPECT_EQ(row["measured"], 4) << row.dump();
    EXPECT_EQ(row["operation"], "profile_grouped_conv_fwd");
    ASSERT_TRUE(fastest.count(row["problem"])) << row.dump();
    EXPECT_DOUBLE_EQ(row["avg_ms"].get<double>(), fastest[row["problem"]]) << row.dump();
    EXPECT_EQ(row["profiler"],
              std::filesystem::canonical(testing::SharedBinPath("ckprofiler-emu")).string());
    EXPECT_FALSE(row["best_name"].get<std::string>().empty());
  }
  // Filters, and the other formats.
  auto none = ParseJson(Ckprof({"best", "--op", "bwd_data", "--format", "json"}).out);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE((*none)["rows"].empty());
  auto other = ParseJson(Ckprof({"best", "--profiler", "/nonexistent/ck", "--format", "json"}).out);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE((*other)["rows"].empty());
  CommandResult csv = Ckprof({"best", "--format", "csv"});
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 3) << csv.out;
  CommandResult text = Ckprof({"best", "--format", "table"});
  EXPECT_NE(text.out.find("2 problem(s)"), std::string::npos) << text.out;
  EXPECT_EQ(Ckprof({"best", "--op", "sideways"}).exit_code, 2);
}

// Every job's measurements go to `best`, not only those of jobs that reuse: a first job with
// --reuse never is recorded. And a job queued across a restart is recorded when it runs (its
// build is identified again after the restart; the cache of builds lives in memory).
TEST_F(ReuseTest, ANeverReuseJobAndAJobQueuedAcrossARestartAreRecorded) {
  StartWithReuse();
  SubmitAndWait(testing::FwdConfigsText(2), {"--reuse", "never"});
  auto best = ParseJson(Ckprof({"best", "--format", "json"}).out);
  ASSERT_TRUE(best.ok());
  EXPECT_EQ((*best)["rows"].size(), 2u) << (*best).dump();

  const std::string file = dir_.File("later.json");
  testing::WriteFile(file, testing::FwdConfigsText(3));
  chmod(file.c_str(), 0644);
  auto later = Ckprof({"submit", file, "--not-before", "+1h"});
  ASSERT_EQ(later.exit_code, 0) << later.err;
  const std::string job = later.out.substr(0, later.out.find('\n'));
  ASSERT_EQ(daemon_.StopGracefully(30), "");
  StartWithReuse();
  // The build is hashed on the pool after the restart: waited for by its log line.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (testing::ReadFile(daemon_.log_path()).find("identified again after the restart") ==
             std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(Ckprof({"edit", job, "--not-before", "now"}).exit_code, 0);
  ASSERT_EQ(Ckprof({"wait", job}).exit_code, 0);
  EXPECT_EQ(Status(job)["reused"], 2);
  auto after = ParseJson(Ckprof({"best", "--format", "json"}).out);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)["rows"].size(), 3u)
      << "the run after the restart was not recorded: " << (*after).dump();
}

TEST_F(ReuseTest, ARebuiltProfilerIsMeasuredAgain) {
  // A profiler of the test's own, which the test then "rebuilds" (new content, new mtime).
  const std::string bin = dir_.File("ck");
  mkdir(bin.c_str(), 0755);
  const std::string exe = bin + "/ckProfiler";
  std::filesystem::copy_file(testing::BinPath("ckprofiler-emu"), exe);
  chmod(exe.c_str(), 0755);
  StartWithReuse("", bin);
  const std::string sweep = testing::FwdConfigsText(2);
  SubmitAndWait(sweep);
  SubmitAndWait(sweep);
  ASSERT_EQ(ProfilerRuns(), 2u);
  {
    std::ofstream out(exe, std::ios::app | std::ios::binary);
    out << "a rebuild";  // an executable still: trailing bytes are not loaded
  }
  const std::string job = SubmitAndWait(sweep);
  EXPECT_EQ(ProfilerRuns(), 4u) << "a new build must not reuse the old one's results";
  EXPECT_EQ(Status(job)["reused"], 0);
}

TEST_F(ReuseTest, ResultsAreSharedBetweenUsersUnlessTheAdminSaysNot) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to create users";
  const std::string tag = std::to_string(getpid() % 1000000);
  SystemUser alice("ckua" + tag), bob("ckub" + tag);
  ASSERT_TRUE(alice.ok() && bob.ok());
  StartWithReuse(R"({"socket_mode": "0666"})");
  const std::string sweep = testing::FwdConfigsText(2);
  SubmitAndWait(sweep, {}, &alice);
  const std::string bobs = SubmitAndWait(sweep, {}, &bob);
  EXPECT_EQ(ProfilerRuns(), 2u);
  EXPECT_EQ(Status(bobs)["reused"], 2);

  // share_results: false — each reuses what they measured themselves: bob has measured
  // nothing (his job reused alice's), alice problems 1 and 2.
  ASSERT_EQ(daemon_.StopGracefully(30), "");
  StartWithReuse(R"({"socket_mode": "0666", "share_results": false})");
  const std::string bobs_own = SubmitAndWait(testing::FwdConfigsText(3), {}, &bob);
  EXPECT_EQ(Status(bobs_own)["reused"], 0) << "what bob reused was alice's";
  EXPECT_EQ(ProfilerRuns(), 5u);
  const std::string alices = SubmitAndWait(testing::FwdConfigsText(3), {}, &alice);
  EXPECT_EQ(Status(alices)["reused"], 2) << "problem 3 was bob's: alice measures it herself";
  EXPECT_EQ(ProfilerRuns(), 6u);
  auto alice_best = ParseJson(Ckprof({"best", "--format", "json"}, &alice).out);
  ASSERT_TRUE(alice_best.ok());
  EXPECT_FALSE((*alice_best)["shared"].get<bool>());
  for (const json& row : (*alice_best)["rows"]) EXPECT_EQ(row["measured"], 1) << row.dump();
  EXPECT_EQ((*alice_best)["rows"].size(), 3u);
  auto root_best = ParseJson(Ckprof({"best", "--format", "json"}).out);
  ASSERT_TRUE(root_best.ok());
  EXPECT_TRUE((*root_best)["shared"].get<bool>());  // an admin sees everyone's
}

}  // namespace
}  // namespace ckprof

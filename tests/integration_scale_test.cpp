// Large jobs in steps (daemon/large_jobs.cpp): a submit, a cancel and a clean of a job too large
// for one transaction are done a step at a time, with other requests served in between, and
// a daemon killed between two steps leaves a database its next start makes whole. The daemon
// takes CKPROFD_STEP_ROWS rows per step here, so that a job of a few thousand tasks crosses
// many steps (a million-task job is the benchmark's, bench/README.md section 8).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/util/commands.h"
#include "tests/util/daemon_fixture.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"
#include "tests/util/multi_user.h"
#include "tests/util/requests.h"
#include "tests/util/sql.h"
#include "tests/util/users.h"
#include "tests/util/victim_probe.h"

namespace ckprof {
namespace {

using testing::CommandResult;
using testing::SqlQuery;
using testing::SystemUser;
using testing::VictimFigures;
using testing::VictimProbe;

constexpr int kTasks = 3000;  // many steps of kStepRows
constexpr int kStepRows = 100;

class ScaleTest : public testing::EmulatorDaemonTest {
 protected:
  void SetUp() override {
    EmulatorDaemonTest::SetUp();
    configs_ = dir_.File("configs.json");
    testing::WriteFile(configs_, testing::FwdConfigsText(kTasks));
    chmod(configs_.c_str(), 0644);
  }

  void StartStepping() {
    auto o = EmulatorOptions("0-3", R"({"socket_mode": "0666"})");
    o.env.push_back("CKPROFD_STEP_ROWS=" + std::to_string(kStepRows));
    o.args.insert(o.args.end(), {"--log-level", "debug"});
    Start(o);
  }

  CommandResult Ckprof(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {testing::SharedBinPath("ckprof"), "--socket",
                                     daemon_.socket()};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunCommand(argv, {}, dir_.path());
  }

  // The job, held for two hours: its tasks stay queued.
  int64_t SubmitHeld() {
    CommandResult r = Ckprof({"submit", configs_, "--not-before", "+2h"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? std::stoll(r.out) : 0;
  }

  std::string Db() const { return daemon_.state_dir() + "/ckprofd.db"; }

  int64_t Count(const std::string& sql) { return std::stoll(SqlQuery(Db(), sql).at(0).at(0)); }

  // Waits until a submit's steps are under way: its job marked (jobs_dropped) and its first
  // rows stored; false after 60 s (a broken build, not a pause).
  bool StepsUnderWay() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < until) {
      try {
        if (Count("SELECT count(*) FROM jobs_dropped") > 0 &&
            Count("SELECT count(*) FROM tasks") > 0) {
          return true;
        }
      } catch (const std::exception&) {
        // (The database may not exist yet, or be busy a moment.)
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

  // Waits for the daemon's log to say `needle` (its rows removed, ...); a deadline for a broken
  // build, not a pause.
  bool WaitForLog(const std::string& needle, double timeout_s = 60) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < until) {
      if (testing::ReadFile(daemon_.log_path()).find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  size_t CountInLog(const std::string& needle) {
    const std::string log = testing::ReadFile(daemon_.log_path());
    size_t n = 0;
    for (size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) ++n;
    return n;
  }

  static void Report(const char* what, const VictimFigures& f) {
    std::cout << what << ": victim status p50/p99/max ms: " << f.p50_ms << " / " << f.p99_ms
              << " / " << f.max_ms << " (" << f.requests << " requests)\n";
    EXPECT_EQ(f.errors, 0) << f.first_error;
    EXPECT_LT(f.max_ms, 5000) << f.text;  // a stall, not a speed
  }

  std::string configs_;
};

// A submit, a cancel and a clean of a job of many steps: whole at each end (every task stored,
// every task cancelled, every row gone) while another user's `status` is answered throughout.
TEST_F(ScaleTest, SubmitCancelAndCleanInStepsAreWholeAndOthersAreServed) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to create the second user";
  SystemUser victim(testing::UniqueName("cks", "v"));
  ASSERT_TRUE(victim.ok());
  StartStepping();
  const int64_t before = SubmitHeld();  // what is there already
  ASSERT_GT(before, 0);

  VictimProbe submit_probe(victim, daemon_.socket());
  const int64_t job = SubmitHeld();
  Report("submit", submit_probe.Stop());
  ASSERT_GT(job, 0);
  StatusRequest st;
  st.job_id = job;
  auto status = testing::CallOnce(daemon_.socket(), st);
  ASSERT_TRUE(status.ok()) << status.error();
  auto summary = JobSummaryFromJson((*status)["job"]);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->total, kTasks);
  EXPECT_EQ(summary->counts.queued(), kTasks);
  const std::string of_job = " FROM tasks WHERE job_id=" + std::to_string(job);
  EXPECT_EQ(Count("SELECT count(*)" + of_job), kTasks);
  EXPECT_EQ(Count("SELECT count(DISTINCT position)" + of_job), kTasks);
  EXPECT_EQ(Count("SELECT count(*) FROM jobs_dropped"), 0);
  // The steps took the ids reserved for the job: one range, in position order.
  EXPECT_EQ(Count("SELECT max(id) - min(id) + 1" + of_job), kTasks);
  EXPECT_EQ(Count("SELECT count(*)" + of_job + " AND id - position <> (SELECT min(id) - 1" +
                  of_job + ")"),
            0);

  VictimProbe cancel_probe(victim, daemon_.socket());
  CommandResult cancel = Ckprof({"cancel", std::to_string(job)});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  auto ended = testing::WaitJobEnd(daemon_.socket(), job);
  Report("cancel", cancel_probe.Stop());
  ASSERT_TRUE(ended.ok()) << ended.error();
  EXPECT_EQ(ended->counts.of(TaskState::kCancelled), kTasks);
  EXPECT_EQ(ended->counts.queued(), 0);
  // In the Store, one row: its task rows are not rewritten (they read as cancelled through it).
  EXPECT_EQ(Count("SELECT count(*) FROM job_cancels WHERE job_id=" + std::to_string(job)), 1);
  EXPECT_EQ(Count("SELECT count(*)" + of_job + " AND state NOT IN ('queued', 'cancelled')"), 0);
  // The other job was left alone.
  EXPECT_EQ(Count("SELECT count(*) FROM tasks WHERE state = 'queued' AND job_id NOT IN "
                  "(SELECT job_id FROM job_cancels)"),
            kTasks);

  VictimProbe clean_probe(victim, daemon_.socket());
  CommandResult clean = Ckprof({"clean", std::to_string(job), "--yes"});
  ASSERT_EQ(clean.exit_code, 0) << clean.err;
  // Gone from every answer at once; its rows a step at a time.
  EXPECT_NE(Ckprof({"status", std::to_string(job)}).exit_code, 0);
  const std::string removed =
      "job " + std::to_string(job) + ": its " + std::to_string(kTasks) + " task rows are removed";
  ASSERT_TRUE(WaitForLog(removed));
  Report("clean", clean_probe.Stop());
  EXPECT_EQ(Count("SELECT count(*)" + of_job), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM jobs WHERE id=" + std::to_string(job)), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM jobs_dropped"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM job_cancels"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM tasks"), kTasks);
  // Once quiet: the freed pages given back to the filesystem, the log truncated. The compaction
  // waited for is one logged after the rows were removed: the cancel's own, armed before the
  // clean, may end in the moment before the clean's first step (seen under ASan: 487 pages).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto compacted_after_removal = [&] {
    const std::string log = testing::ReadFile(daemon_.log_path());
    const size_t at = log.find(removed);
    return at != std::string::npos &&
           log.find("compacted after large work", at) != std::string::npos;
  };
  while (!compacted_after_removal() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(compacted_after_removal());
  EXPECT_EQ(Count("PRAGMA freelist_count"), 0);
  // (The checkpoint thread truncates the log right after.)
  auto wal_size = [&] {
    struct stat wal {};
    return stat((Db() + "-wal").c_str(), &wal) == 0 ? wal.st_size : 0;
  };
  while (wal_size() > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(wal_size(), 0);
}

// A cancel naming many tasks goes a step of positions at a time (kStepRows here), each step
// its own transaction with other requests served in between: checked whole first (a position
// the job lacks refuses it before any task is cancelled), then whole at its end (every named
// task cancelled once, the others queued), told in one line. Two such cancels of one user at
// once take turns, and both are whole.
TEST_F(ScaleTest, ACancelNamingManyTasksGoesInStepsAndIsWhole) {
  StartStepping();
  const int64_t job = SubmitHeld();
  ASSERT_GT(job, 0);
  const std::string id = std::to_string(job);
  auto named = [&](int from, int to, const std::string& more = "") {
    std::string list;
    for (int p = from; p <= to; ++p) list += (list.empty() ? "" : ",") + std::to_string(p);
    return id + "#" + list + more;
  };
  const std::string of_job = " FROM tasks WHERE job_id=" + id;
  // The last position is not the job's: refused, and nothing was cancelled, though the steps
  // before it would have been whole.
  CommandResult refused = Ckprof({"cancel", named(1, 1000, "," + std::to_string(kTasks + 1))});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("job " + id + " has no task #" + std::to_string(kTasks + 1)),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(Count("SELECT count(*)" + of_job + " AND state = 'cancelled'"), 0);

  CommandResult cancel = Ckprof({"cancel", named(1, 1000)});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(Count("SELECT count(*)" + of_job + " AND state = 'cancelled' AND position <= 1000"),
            1000);
  EXPECT_EQ(Count("SELECT count(*)" + of_job + " AND state = 'queued'"), kTasks - 1000);
  EXPECT_TRUE(WaitForLog("job " + id + ": a cancel naming 1000 task(s) took 10 steps"));
  EXPECT_EQ(CountInLog("job " + id + ": 1000 queued and 0 running task(s) cancelled by"), 1u);

  // Two at once, overlapping by 100 of the cancelled ones: each says what it cancelled.
  CommandResult first, second;
  std::thread a([&] { first = Ckprof({"cancel", named(901, 2000)}); });
  std::thread b([&] { second = Ckprof({"cancel", named(2001, kTasks)}); });
  a.join();
  b.join();
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(Count("SELECT count(*)" + of_job + " AND state = 'cancelled'"), kTasks);
  EXPECT_EQ(CountInLog("job " + id + ": 1000 queued and 0 running task(s) cancelled by"), 3u);
  auto ended = testing::WaitJobEnd(daemon_.socket(), job);
  ASSERT_TRUE(ended.ok()) << ended.error();
  EXPECT_EQ(ended->counts.of(TaskState::kCancelled), kTasks);
  // Nothing left of them to cancel: refused, naming the first.
  CommandResult again = Ckprof({"cancel", named(1, 200)});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("already ended: nothing to cancel"), std::string::npos) << again.err;
}

// One user's large submits and a cancel in steps, all at once, take her step turn in turn (one
// step of hers at a time: Service::TakeStepTurn): each is whole, and none waits on another for
// ever.
TEST_F(ScaleTest, OneUsersSubmitsAndCancelInStepsAtOnceAreEachWhole) {
  StartStepping();
  const int64_t held = SubmitHeld();
  ASSERT_GT(held, 0);
  std::string named = std::to_string(held) + "#1";
  for (int p = 2; p <= 1000; ++p) named += "," + std::to_string(p);
  constexpr int kSubmits = 3;
  std::vector<CommandResult> submitted(kSubmits);
  CommandResult cancelled;
  std::vector<std::thread> clients;
  for (int i = 0; i < kSubmits; ++i) {
    clients.emplace_back([&, i] {
      submitted[i] = Ckprof({"submit", configs_, "--not-before", "+2h"});
    });
  }
  clients.emplace_back([&] { cancelled = Ckprof({"cancel", named}); });
  for (auto& c : clients) c.join();
  for (const CommandResult& r : submitted) {
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string job = std::to_string(std::stoll(r.out));
    EXPECT_EQ(Count("SELECT count(*) FROM tasks WHERE state = 'queued' AND job_id=" + job), kTasks);
    EXPECT_TRUE(WaitForLog("job " + job + ": " + std::to_string(kTasks) + " task(s) stored in " +
                           std::to_string(kTasks / kStepRows) + " step(s)"));
  }
  ASSERT_EQ(cancelled.exit_code, 0) << cancelled.err;
  EXPECT_EQ(Count("SELECT count(*) FROM tasks WHERE state = 'cancelled' AND job_id=" +
                  std::to_string(held)),
            1000);
}

// A submit larger than a chunk of task records (16,384 configs: the others are made while the
// first are stored) with --repeat: every config's runs stored once, in position order, each with
// its own config.
TEST_F(ScaleTest, ALargeSubmitsRecordsMadeInChunksAreStoredWhole) {
  constexpr int kConfigs = 40000;  // three chunks
  const std::string many = dir_.File("many.json");
  const std::string text = testing::FwdConfigsText(kConfigs);
  testing::WriteFile(many, text);
  StartStepping();
  CommandResult r =
      Ckprof({"submit", many, "--not-before", "+2h", "--repeat", "2", "--reuse", "never"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string job = std::to_string(std::stoll(r.out));
  const std::string of_job = " FROM tasks WHERE job_id=" + job;
  EXPECT_EQ(Count("SELECT count(*)" + of_job), 2 * kConfigs);
  EXPECT_EQ(Count("SELECT count(DISTINCT position)" + of_job), kConfigs);
  EXPECT_EQ(Count("SELECT count(*) FROM (SELECT position" + of_job +
                  " GROUP BY position HAVING min(run) <> 1 OR max(run) <> 2 OR count(*) <> 2)"),
            0);
  // Ids follow positions, then runs.
  EXPECT_EQ(Count("SELECT count(*)" + of_job + " AND id - (SELECT min(id)" + of_job +
                  ") <> (position - 1) * 2 + run - 1"),
            0);
  const auto input = nlohmann::ordered_json::parse(text);
  for (int p : {1, 16384, 16385, 32768, 32769, kConfigs}) {
    SCOPED_TRACE("#" + std::to_string(p));
    const auto rows = SqlQuery(
        Db(), "SELECT config" + of_job + " AND run = 2 AND position = " + std::to_string(p));
    ASSERT_EQ(rows.size(), 1u);
    const auto stored = nlohmann::ordered_json::parse(rows[0][0]);
    EXPECT_EQ(stored["profiler_args"], input[p - 1]["profiler_args"]);
    EXPECT_EQ(stored["metadata"]["priority_rank"], p);
  }
}

// A cancel that a retry overtakes (before its steps have forgotten the tasks): the retry
// queues every cancelled task again, they run, and the job ends as a retried one does, not
// cancelled.
TEST_F(ScaleTest, RetryDuringACancelInStepsWins) {
  StartStepping();
  const int64_t job = SubmitHeld();
  ASSERT_GT(job, 0);
  ASSERT_EQ(Ckprof({"cancel", std::to_string(job)}).exit_code, 0);
  // At once, before most steps had their turn.
  CommandResult retry = Ckprof({"retry", std::to_string(job)});
  ASSERT_EQ(retry.exit_code, 0) << retry.err;
  ASSERT_EQ(Ckprof({"edit", std::to_string(job), "--not-before", "now"}).exit_code, 0);
  auto ended = testing::WaitJobEnd(daemon_.socket(), job);
  ASSERT_TRUE(ended.ok()) << ended.error();
  EXPECT_EQ(ended->counts.succeeded(), kTasks);
  EXPECT_EQ(ended->counts.of(TaskState::kCancelled), 0);
}

// Two real users against a root ckprofd. The owner of a large job retries one task of it
// cancelled, and while that retry writes the others out as cancelled rows in steps (one row a
// step here, after a restart), asks for a second retry and a cancel of one task: both refused,
// saying why. A cancel of the whole job stops the steps where they are, and every task reads
// cancelled, also after a restart. The other user's status is answered throughout.
TEST_F(ScaleTest, ACancelStopsARetryInStepsAndASecondRetryWaitsForIt) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to create the users";
  SystemUser owner(testing::UniqueName("cks", "o")), victim(testing::UniqueName("cks", "v"));
  ASSERT_TRUE(owner.ok() && victim.ok());
  constexpr int kMany = 10000;  // a transaction a step: seconds of steps, the race not close
  const std::string configs = dir_.File("many.json");
  testing::WriteFile(configs, testing::FwdConfigsText(kMany));
  chmod(configs.c_str(), 0644);
  StartStepping();
  auto as_owner = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = owner.As();
    argv.insert(argv.end(), {testing::SharedBinPath("ckprof"), "--socket", daemon_.socket()});
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunCommand(argv, {}, dir_.path());
  };
  CommandResult submit = as_owner({"submit", configs, "--not-before", "+2h"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string job = std::to_string(std::stoll(submit.out));
  ASSERT_EQ(as_owner({"cancel", job}).exit_code, 0);
  ASSERT_TRUE(
      WaitForLog("job " + job + ": its " + std::to_string(kMany) + " cancelled task(s) forgotten"));
  ASSERT_EQ(daemon_.StopGracefully(testing::LaunchedDaemon::kStopTimeoutS), "");
  auto o = EmulatorOptions("0-3", R"({"socket_mode": "0666"})");
  o.env.push_back("CKPROFD_STEP_ROWS=1");
  Start(o);
  VictimProbe probe(victim, daemon_.socket());
  CommandResult retry = as_owner({"retry", job, "5"});
  ASSERT_EQ(retry.exit_code, 0) << retry.err;
  // Not "requeued": its steps have yet to run (the rows written out; task 5 queued last).
  EXPECT_EQ(retry.out, "job " + job +
                           ": 1 task(s) being queued again, a step at a time (they start as "
                           "they are queued; 'ckprof status " +
                           job + "' shows how far)\n");
  const std::string busy = "job " + job + ": its retry is still queueing its tasks again (";
  CommandResult again = as_owner({"retry", job});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find(busy), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("retry it again once that is done"), std::string::npos) << again.err;
  CommandResult one = as_owner({"cancel", job + "#7"});
  EXPECT_NE(one.exit_code, 0);
  EXPECT_NE(one.err.find(busy), std::string::npos) << one.err;
  CommandResult cancel = as_owner({"cancel", job});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  ASSERT_TRUE(WaitForLog("job " + job + ": its retry stopped after "));
  auto ended = testing::WaitJobEnd(daemon_.socket(), std::stoll(job));
  Report("cancel during a retry's steps", probe.Stop());
  ASSERT_TRUE(ended.ok()) << ended.error();
  EXPECT_EQ(ended->counts.of(TaskState::kCancelled), kMany);
  EXPECT_EQ(ended->counts.queued(), 0);
  // The rows the steps had not reached read cancelled through the cancel's mark.
  auto all_cancelled = [&] {
    CommandResult r = as_owner({"results", job, "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << "not JSON";
    EXPECT_EQ(j["stats"]["cancelled"], kMany) << j["stats"].dump();
    EXPECT_EQ(j["stats"]["queued"], 0);
  };
  all_cancelled();
  ASSERT_EQ(daemon_.StopGracefully(testing::LaunchedDaemon::kStopTimeoutS), "");
  Start(o);
  all_cancelled();
}

// Two real users against a root ckprofd, each with a job whose results are made on the pool,
// one such answer at a time. One user asks five times at once for the results of a large job;
// the other, asking once while those wait, is served next, not after all five.
TEST_F(ScaleTest, OneUsersManyLargeAnswersDoNotQueueAheadOfAnothersOne) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to create the users";
  SystemUser hog(testing::UniqueName("cks", "h")), other(testing::UniqueName("cks", "w"));
  ASSERT_TRUE(hog.ok() && other.ok());
  const std::string big = dir_.File("big.json");
  testing::WriteFile(big, testing::FwdConfigsText(20000));  // results: a good part of a second
  chmod(big.c_str(), 0644);
  StartStepping();
  auto ckprof_as = [&](const SystemUser& u, const std::vector<std::string>& args) {
    std::vector<std::string> argv = u.As();
    argv.insert(argv.end(), {testing::SharedBinPath("ckprof"), "--socket", daemon_.socket()});
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  };
  auto submit = [&](const SystemUser& u, const std::string& file) {
    CommandResult r =
        testing::RunCommand(ckprof_as(u, {"submit", file, "--not-before", "+2h"}), {}, dir_.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? std::stoll(r.out) : 0;
  };
  const int64_t hog_job = submit(hog, big), other_job = submit(other, configs_);
  ASSERT_GT(hog_job, 0);
  ASSERT_GT(other_job, 0);
  std::vector<std::unique_ptr<testing::BackgroundCommand>> hogs;
  for (int i = 0; i < 5; ++i) {
    hogs.push_back(std::make_unique<testing::BackgroundCommand>(
        ckprof_as(hog, {"results", std::to_string(hog_job), "--json"}), std::vector<std::string>{},
        dir_.path()));
  }
  // Two of them wait behind the one being made: the other user asks now.
  ASSERT_TRUE(WaitForLog("results of job " + std::to_string(hog_job) + " for uid " +
                         std::to_string(hog.uid()) +
                         ": waits for its turn on the pool (2 waiting)"));
  CommandResult mine = testing::RunCommand(
      ckprof_as(other, {"results", std::to_string(other_job), "--json"}), {}, dir_.path());
  ASSERT_EQ(mine.exit_code, 0) << mine.err;
  for (auto& h : hogs) EXPECT_EQ(h->Finish(120).exit_code, 0);
  // The order the answers were made in: the other user's is not the last.
  const std::string log = testing::ReadFile(daemon_.log_path());
  const std::string made_hog = "results of job " + std::to_string(hog_job) + ": made beside";
  const size_t other_at = log.find("results of job " + std::to_string(other_job) + ": made beside");
  ASSERT_NE(other_at, std::string::npos);
  size_t hog_after = 0;
  for (size_t at = log.find(made_hog); at != std::string::npos; at = log.find(made_hog, at + 1)) {
    hog_after += at > other_at ? 1 : 0;
  }
  EXPECT_GE(hog_after, 1u) << "the other user's answer came after all five";
  EXPECT_EQ(CountInLog(made_hog), 5u);
}

// The results of a job of thousands of queued tasks are read and encoded on the pool: the
// pool's path under every sanitizer (the case below, which runs them, is labelled slow).
TEST_F(ScaleTest, ALargeQueuedJobsResultsAreMadeBesideTheIoThread) {
  StartStepping();
  const int64_t job = SubmitHeld();
  ASSERT_GT(job, 0);
  CommandResult r = Ckprof({"results", std::to_string(job), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json queued = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(queued.is_object()) << "not JSON";
  ASSERT_EQ(queued["results"].size(), static_cast<size_t>(kTasks));
  EXPECT_EQ(queued["stats"]["queued"], kTasks);
  EXPECT_TRUE(WaitForLog("results of job " + std::to_string(job) + ": made beside the io thread"));
}

// The results and the whole log of a job of thousands of tasks are read and encoded on the
// pool (the io thread serves others meanwhile): the same answers, in position order, queued
// and then run.
TEST_F(ScaleTest, ALargeJobsResultsAndLogAreMadeBesideTheIoThread) {
  StartStepping();
  const int64_t job = SubmitHeld();
  ASSERT_GT(job, 0);
  auto results = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"results", std::to_string(job), "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult r = Ckprof(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  };
  nlohmann::json queued = results({});
  ASSERT_TRUE(queued.is_object()) << "not JSON";
  ASSERT_EQ(queued["results"].size(), static_cast<size_t>(kTasks));
  EXPECT_EQ(queued["stats"]["queued"], kTasks);
  ASSERT_TRUE(WaitForLog("results of job " + std::to_string(job) + ": made beside the io thread"));
  ASSERT_EQ(Ckprof({"edit", std::to_string(job), "--not-before", "now"}).exit_code, 0);
  auto ended = testing::WaitJobEnd(daemon_.socket(), job);
  ASSERT_TRUE(ended.ok()) << ended.error();
  nlohmann::json done = results({});
  ASSERT_TRUE(done.is_object()) << "not JSON";
  ASSERT_EQ(done["results"].size(), static_cast<size_t>(kTasks));
  EXPECT_EQ(done["stats"]["success"], kTasks);
  for (size_t i = 0; i < done["results"].size(); i += 997) {
    const nlohmann::json& t = done["results"][i];
    EXPECT_EQ(t.value("position", -1), static_cast<int>(i) + 1) << t.dump();
    EXPECT_FALSE(t.value("best_instance", std::string()).empty()) << t.dump();
    EXPECT_NE(t.value("stdout", std::string()).find("Best configuration"), std::string::npos)
        << "the captured output";
  }
  // Its whole log (the last 2 lines of each task), made there too.
  CommandResult log = Ckprof({"log", std::to_string(job), "-n", "2"});
  ASSERT_EQ(log.exit_code, 0) << log.err;
  EXPECT_NE(log.out.find("#" + std::to_string(kTasks)), std::string::npos) << "the last task";
  EXPECT_NE(log.out.find("GB/s:"), std::string::npos) << log.out.substr(0, 400);
  const std::string beside = "log of job " + std::to_string(job) + ": made beside the io thread";
  ASSERT_TRUE(WaitForLog(beside));
  // `log J -f` of the ended job: the same log, made there as well, and the stream ends.
  CommandResult follow = Ckprof({"log", std::to_string(job), "-n", "2", "-f"});
  ASSERT_EQ(follow.exit_code, 0) << follow.err;
  EXPECT_EQ(follow.out, log.out);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (CountInLog(beside) < 2 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(CountInLog(beside), 2u);
}

// What a daemon killed between two steps of a submit leaves (the job's row, marked dropped,
// and part of its tasks), and between two steps of a clean (the marked job with its rows
// partly gone): the next start shows neither job and removes their rows.
TEST_F(ScaleTest, JobsCutShortByACrashAreRemovedAtTheNextStart) {
  StartStepping();
  const int64_t half_submitted = SubmitHeld();
  const int64_t half_cleaned = SubmitHeld();
  const int64_t kept = SubmitHeld();
  ASSERT_GT(kept, 0);
  daemon_.Stop(SIGKILL);
  // The state of a crash between steps (the steps' own transactions leave no other).
  const std::string a = std::to_string(half_submitted), b = std::to_string(half_cleaned);
  SqlQuery(Db(), "DELETE FROM tasks WHERE job_id=" + a + " AND position > 1234");
  SqlQuery(Db(), "DELETE FROM tasks WHERE job_id=" + b + " AND position <= 2000");
  SqlQuery(Db(), "INSERT INTO jobs_dropped (job_id) VALUES (" + a + "), (" + b + ")");
  StartStepping();
  EXPECT_NE(Ckprof({"status", a}).exit_code, 0);
  EXPECT_NE(Ckprof({"status", b}).exit_code, 0);
  ASSERT_TRUE(WaitForLog("job " + b + ": its 1000 task rows are removed"));
  ASSERT_TRUE(WaitForLog("job " + a + ": its 1234 task rows are removed"));
  EXPECT_EQ(Count("SELECT count(*) FROM tasks WHERE job_id IN (" + a + ", " + b + ")"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM jobs WHERE id IN (" + a + ", " + b + ")"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM jobs_dropped"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM tasks WHERE job_id=" + std::to_string(kept)), kTasks);
  // Their ids are not given again.
  const int64_t next = SubmitHeld();
  EXPECT_GT(next, kept);
  EXPECT_GT(Count("SELECT min(id) FROM tasks WHERE job_id=" + std::to_string(next)),
            Count("SELECT max(id) FROM tasks WHERE job_id=" + std::to_string(kept)));
}

// A client that goes (Ctrl-C, killed) while its large submit is being stored was told of no
// job: the daemon stops storing it at its next step and keeps nothing of it, and serves on.
TEST_F(ScaleTest, ASubmitWhoseClientLeftMidwayKeepsNothing) {
  auto o = EmulatorOptions();
  o.env.push_back("CKPROFD_STEP_ROWS=5");  // 600 steps: the client goes during them
  o.args.insert(o.args.end(), {"--log-level", "debug"});
  Start(o);
  testing::BackgroundCommand submit({testing::SharedBinPath("ckprof"), "--socket", daemon_.socket(),
                                     "submit", configs_, "--not-before", "+2h"});
  ASSERT_TRUE(StepsUnderWay()) << "the submit's steps were never seen under way";
  submit.Signal(SIGKILL);
  submit.Finish(30);
  ASSERT_TRUE(WaitForLog("the client left before its job was stored; nothing of it is kept"));
  ASSERT_TRUE(WaitForLog("task rows are removed"));
  EXPECT_EQ(Count("SELECT count(*) FROM tasks"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM jobs"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM jobs_dropped"), 0);
  CommandResult list = Ckprof({"list", "--all"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(list.out.find("configs.json"), std::string::npos) << list.out;
  // A client that stays is answered as before.
  EXPECT_GT(SubmitHeld(), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM tasks"), kTasks);
}

// A daemon killed (SIGKILL) while a large submit is being stored: the submit was not
// acknowledged, and after the restart the job is not there, nor any of its rows.
TEST_F(ScaleTest, SubmitKilledBetweenStepsLeavesNoJob) {
  auto o = EmulatorOptions();
  o.env.push_back("CKPROFD_STEP_ROWS=5");  // 600 steps: the kill falls between two
  Start(o);
  testing::BackgroundCommand submit({testing::SharedBinPath("ckprof"), "--socket", daemon_.socket(),
                                     "submit", configs_, "--not-before", "+2h"});
  // The job's row appears, marked, with its first step: kill then.
  ASSERT_TRUE(StepsUnderWay()) << "the submit's steps were never seen under way";
  daemon_.Stop(SIGKILL);
  CommandResult r = submit.Finish(30);
  EXPECT_NE(r.exit_code, 0) << r.out;  // never acknowledged
  const int64_t stored = Count("SELECT count(*) FROM tasks");
  EXPECT_LT(stored, kTasks);
  auto o2 = EmulatorOptions();
  o2.args.insert(o2.args.end(), {"--log-level", "debug"});
  Start(o2);
  ASSERT_TRUE(WaitForLog("task rows are removed"));
  EXPECT_EQ(Count("SELECT count(*) FROM tasks"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM jobs"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM jobs_dropped"), 0);
  CommandResult list = Ckprof({"list"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
}

}  // namespace
}  // namespace ckprof

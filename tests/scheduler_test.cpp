// Scheduler policy tests with a fake launcher (no processes) and a real Store in a temp dir.
#include "daemon/scheduler.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include "common/convert.h"
#include "daemon/gpu_probe.h"
#include "daemon/gpu_watch.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"

namespace ckprof {
namespace {

using testing::TempDir;

// Records every start; the test finishes runs explicitly.
class FakeLauncher final : public Launcher {
 public:
  std::string_view Name() const override { return "fake"; }
  struct Run {
    RunSpec spec;
    std::function<void(RunResult)> done;
    bool cancelled = false;
    bool interrupted = false;
  };
  RunId Start(RunSpec spec, std::function<void(RunResult)> on_done) override {
    RunId id = next_++;
    if (spec.on_started) spec.on_started(static_cast<pid_t>(100000 + id));
    runs_[id] = Run{std::move(spec), std::move(on_done)};
    order_.push_back(id);
    return id;
  }
  bool Cancel(RunId id) override {
    runs_.at(id).cancelled = true;
    Finish(id, Outcome{Outcome::Kind::kCancelled, 0, SIGTERM, "cancelled"});
    return true;
  }
  bool Interrupt(RunId id) override {
    runs_.at(id).interrupted = true;
    Finish(id, Outcome{Outcome::Kind::kInterrupted, 0, SIGTERM, "interrupted"});
    return true;
  }
  size_t running() const override { return runs_.size(); }
  std::optional<RunOutput> Output(RunId id) const override {
    if (!runs_.count(id)) return std::nullopt;
    return RunOutput{written_, ""};
  }
  // What the profiler of run `id` writes now (to its followers, and to Output).
  void Write(RunId id, const std::string& text) {
    written_ += text;
    if (runs_.at(id).spec.on_output) runs_.at(id).spec.on_output(false, text);
  }

  // Completes a run as its profiler would have.
  void Finish(RunId id, Outcome o = Outcome{}, double elapsed = 1.0) {
    auto it = runs_.find(id);
    ASSERT_NE(it, runs_.end());
    Run run = std::move(it->second);
    runs_.erase(it);
    RunResult r;
    r.outcome = o;
    r.elapsed_s = elapsed;
    if (o.ok()) {
      r.perf.has_best = true;
      r.perf.best_name = "Inst<1, 2>";
      r.perf.avg_ms = 0.5;
      r.perf.tflops = 10;
      r.perf.gbps = 100;
      r.perf.valids = 3;
      r.perf.top = {{"Inst<1, 2>", 0.5, 10, 100, "4"},
                    {"Inst<3>", std::numeric_limits<double>::infinity(), 0, 0, ""}};
    }
    run.done(std::move(r));
  }
  // The env value of `var` in run `id`'s spec.
  std::string Env(RunId id, const std::string& var) const {
    for (const auto& [k, v] : runs_.at(id).spec.set_env) {
      if (k == var) return v;
    }
    return "";
  }
  std::vector<RunId> Active() const {
    std::vector<RunId> out;
    for (const auto& [id, r] : runs_) out.push_back(id);
    return out;
  }
  const Run& Get(RunId id) const { return runs_.at(id); }

 private:
  RunId next_ = 1;
  std::string written_;  // what Write gave the runs
  std::map<RunId, Run> runs_;
  std::vector<RunId> order_;
};

CkConfig Config(int rank) {
  CkConfig c = testing::Conv3x3(ConvOp::kFwd, 4, 8, 8, 16);
  c.metadata["priority_rank"] = rank;
  return c;
}

std::vector<CkConfig> Configs(int n) {
  std::vector<CkConfig> out;
  for (int i = 1; i <= n; ++i) out.push_back(Config(i));
  return out;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open(std::vector<int> gpus = {0}) {
    sched_.reset();
    store_.reset();
    auto s = Store::Open(dir_.path(), false);
    ASSERT_TRUE(s.ok()) << s.error();
    store_ = std::move(*s);
    sched_ = std::make_unique<Scheduler>(io_.get_executor(), *store_, launcher_, Options(gpus));
    ASSERT_TRUE(sched_->Recover().ok());
  }

  SchedulerOptions Options(std::vector<int> gpus = {0}) const {
    SchedulerOptions o;
    o.gpus = std::move(gpus);
    o.state_dir = dir_.path();
    o.max_attempts = 2;
    o.reuse_max_age_s = 0;  // the tests' jobs hold the same configs as distinct work
    return o;
  }

  JobRecord Job(uint32_t uid, const std::string& name, int priority = 0) {
    JobRecord j;
    j.uid = uid;
    j.gid = uid;
    j.owner = "user" + std::to_string(uid);
    j.name = name;
    j.priority = priority;
    j.timeout_s = -1;
    j.profiler_path = testing::BinPath("ckprofiler-emu");
    j.cwd = "/";
    return j;
  }

  // A fresh Scheduler on the Store whose large work goes 3 rows a step (so that every job here
  // is a large one); its options, for a restart.
  SchedulerOptions RestartInSmallSteps() {
    SchedulerOptions o = Options();
    o.step_rows = 3;
    sched_ = std::make_unique<Scheduler>(io_.get_executor(), *store_, launcher_, o);
    EXPECT_TRUE(sched_->Recover().ok());
    return o;
  }

  // A job of user 1000 with 20 configs whose ranks run backwards (#20 first, #1 last).
  int64_t SubmitRanked() {
    std::vector<CkConfig> configs;
    for (int i = 1; i <= 20; ++i) configs.push_back(Config(21 - i));
    auto id = sched_->Submit(Job(1000, "ranked"), configs);
    EXPECT_TRUE(id.ok()) << id.error();
    return id.ok() ? *id : 0;
  }

  // The user `uid` (its group the same number), named "user<uid>".
  static Identity User(uint32_t uid) {
    Identity who;
    who.uid = who.gid = uid;
    who.user = "user" + std::to_string(uid);
    return who;
  }

  int64_t Submit(JobRecord j, int tasks) {
    auto id = sched_->Submit(std::move(j), Configs(tasks));
    EXPECT_TRUE(id.ok()) << id.error();
    return id.ok() ? *id : 0;
  }

  // The job id of the task a run executes (from the CKPROFD_TASK marker).
  int64_t JobOfRun(Launcher::RunId id) {
    std::string marker = launcher_.Env(id, "CKPROFD_TASK");
    int64_t task = std::stoll(marker.substr(0, marker.find(':')));
    auto rows = store_->ForEachTaskBrief([&](TaskRecord&& t) {
      if (t.id == task) job_of_task_ = t.job_id;
    });
    EXPECT_TRUE(rows.ok());
    return job_of_task_;
  }

  TempDir dir_;
  asio::io_context io_;
  FakeLauncher launcher_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Scheduler> sched_;
  int64_t job_of_task_ = 0;
};

TEST_F(SchedulerTest, EachGpuRunsOneTaskPinnedToIt) {
  Open({0, 1, 2});
  int64_t job = Submit(Job(1000, "a"), 5);
  auto active = launcher_.Active();
  ASSERT_EQ(active.size(), 3u);
  std::set<std::string> pins;
  for (auto id : active) pins.insert(launcher_.Env(id, "HIP_VISIBLE_DEVICES"));
  EXPECT_EQ(pins, (std::set<std::string>{"0", "1", "2"}));
  // A GPU that frees takes the next task at once.
  launcher_.Finish(active[0]);
  EXPECT_EQ(launcher_.Active().size(), 3u);
  for (auto id : launcher_.Active()) launcher_.Finish(id);
  for (auto id : launcher_.Active()) launcher_.Finish(id);
  auto s = sched_->Summary(job);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->counts.succeeded(), 5);
  EXPECT_EQ(s->state, JobState::kFinished);
}

// A job's --on-end command runs on this host, never through the task launcher (under the
// Slurm executor that would be an sbatch of a shell command with an empty stem).
TEST_F(SchedulerTest, JobEndCommandsRunHereNotThroughTheTaskLauncher) {
  const std::string marker = dir_.File("on-end-ran");
  JobRecord j = Job(getuid(), "notify");
  j.on_end = "echo $CKPROF_JOB_STATE > " + marker;
  const int64_t job = Submit(std::move(j), 1);
  ASSERT_EQ(launcher_.Active().size(), 1u);
  launcher_.Finish(launcher_.Active()[0]);
  auto s = sched_->Summary(job);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->state, JobState::kFinished);
  EXPECT_TRUE(launcher_.Active().empty()) << "the job-end command went to the task launcher";
  // Until the command has written its line (the shell creates the file, then writes to it).
  // Waited for by the clock, not by a count of handlers (other timers' run meanwhile); it takes
  // milliseconds, the bound is for a starved machine.
  auto written = [&] {
    return std::filesystem::exists(marker) &&
           testing::ReadFile(marker).find('\n') != std::string::npos;
  };
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!written() && std::chrono::steady_clock::now() < give_up) {
    io_.run_one_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(std::filesystem::exists(marker));
  EXPECT_EQ(testing::ReadFile(marker), "finished\n");
}

TEST_F(SchedulerTest, FairShareLetsASmallJobPassALargeOne) {
  int64_t big = Submit(Job(1000, "sweep"), 50);
  // The big job's user has used the GPU for a while.
  for (int i = 0; i < 3; ++i) launcher_.Finish(launcher_.Active()[0], Outcome{}, 10.0);
  int64_t small = Submit(Job(2000, "small"), 3);
  // Whatever runs now finishes; the next three starts must all be the small job's.
  std::vector<int64_t> next_jobs;
  for (int i = 0; i < 4; ++i) {
    launcher_.Finish(launcher_.Active()[0], Outcome{}, 10.0);
    next_jobs.push_back(JobOfRun(launcher_.Active()[0]));
  }
  EXPECT_EQ(next_jobs[0], small);
  EXPECT_EQ(next_jobs[1], small);
  EXPECT_EQ(next_jobs[2], small);
  EXPECT_EQ(next_jobs[3], big);
}

TEST_F(SchedulerTest, PriorityThenSubmitOrderWithinAUser) {
  int64_t first = Submit(Job(1000, "first"), 2);  // its first task starts at once
  int64_t low = Submit(Job(1000, "low", 0), 1);
  int64_t high = Submit(Job(1000, "high", 5), 2);
  std::vector<int64_t> order;
  for (int i = 0; i < 4; ++i) {
    launcher_.Finish(launcher_.Active()[0]);
    order.push_back(JobOfRun(launcher_.Active()[0]));
  }
  EXPECT_EQ(order, (std::vector<int64_t>{high, high, first, low}));
}

// Over 20,000 configs the records are made on two threads: every one in its place.
TEST_F(SchedulerTest, LargeSubmitsRecordsAreEachInTheirPlace) {
  std::vector<CkConfig> configs = Configs(25001);
  for (size_t i = 0; i < configs.size(); i += 7) configs[i].metadata.erase("priority_rank");
  std::vector<TaskRecord> records = Scheduler::MakeTaskRecords(configs);
  ASSERT_EQ(records.size(), configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    ASSERT_EQ(records[i].position, static_cast<int64_t>(i) + 1) << i;
    ASSERT_EQ(records[i].rank, static_cast<int64_t>(i) + 1) << i;  // rank i+1, or the position
    ASSERT_EQ(records[i].config, ConfigJsonText(configs[i])) << i;
    ASSERT_EQ(records[i].est_cost, configs[i].Flops()) << i;
  }
}

// Five configs of rank 1..5 whose batch sizes (so FLOPs) are 1, 4, 2, 8, 3.
std::vector<CkConfig> MixedSizeConfigs() {
  std::vector<CkConfig> out = Configs(5);
  const int batch[] = {1, 4, 2, 8, 3};
  for (size_t i = 0; i < out.size(); ++i) out[i].N = batch[i];
  return out;
}

// Finishes up to n runs of `launcher`, the oldest first; the positions of the tasks they ran
// (so, in the order they started).
std::vector<int64_t> PositionsRun(Store& store, FakeLauncher& launcher, size_t n) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < n && !launcher.Active().empty(); ++i) {
    std::string marker = launcher.Env(launcher.Active()[0], "CKPROFD_TASK");
    int64_t task = std::stoll(marker.substr(0, marker.find(':')));
    EXPECT_TRUE(store
                    .ForEachTaskBrief([&](TaskRecord&& t) {
                      if (t.id == task) out.push_back(t.position);
                    })
                    .ok());
    launcher.Finish(launcher.Active()[0]);
  }
  return out;
}

TEST_F(SchedulerTest, JobOrderRankOrLongestFirstAndItSurvivesARestart) {
  auto positions_run = [&](FakeLauncher& launcher, size_t n) {
    return PositionsRun(*store_, launcher, n);
  };
  auto by_rank = sched_->Submit(Job(1000, "by-rank"), MixedSizeConfigs());
  ASSERT_TRUE(by_rank.ok()) << by_rank.error();
  EXPECT_EQ(positions_run(launcher_, 5), (std::vector<int64_t>{1, 2, 3, 4, 5}));

  JobRecord j = Job(1000, "longest");
  j.order = TaskOrder::kLongestFirst;
  auto longest = sched_->Submit(std::move(j), MixedSizeConfigs());
  ASSERT_TRUE(longest.ok()) << longest.error();
  EXPECT_EQ(positions_run(launcher_, 2), (std::vector<int64_t>{4, 2}));  // batch 8, then 4
  // The daemon dies with position 5 (batch 3) running; the order is stored with the job.
  sched_.reset();
  FakeLauncher fresh;
  Scheduler again(io_.get_executor(), *store_, fresh, Options());
  ASSERT_TRUE(again.Recover().ok());
  EXPECT_EQ(positions_run(fresh, 3), (std::vector<int64_t>{5, 3, 1}));
  EXPECT_EQ(again.Summary(*longest)->counts.succeeded(), 5);
}

// In rank order, a task too long to run last starts once the rest of the queued work, spread over
// the job's GPUs, is less than it: here 30 tasks of batch 1 and, ranked last, one of batch 8
// on 2 GPUs start it when 15 small ones are left (15 / 2 < 8). On one GPU, where the order
// cannot shorten the sweep, and with equal sizes, the order is the rank's.
TEST_F(SchedulerTest, RankOrderStartsATaskTooLongToRunLastInTime) {
  Open({0, 1});
  std::vector<CkConfig> configs = Configs(31);
  for (auto& c : configs) c.N = 1;
  configs[30].N = 8;
  std::vector<int64_t> expected;
  for (int64_t p = 1; p <= 15; ++p) expected.push_back(p);
  expected.push_back(31);
  for (int64_t p = 16; p <= 30; ++p) expected.push_back(p);
  ASSERT_TRUE(sched_->Submit(Job(1000, "two-gpus"), configs).ok());
  EXPECT_EQ(PositionsRun(*store_, launcher_, 31), expected);

  JobRecord one = Job(1000, "one-gpu");
  one.max_gpus = 1;
  ASSERT_TRUE(sched_->Submit(std::move(one), configs).ok());
  std::vector<int64_t> in_rank_order(31);
  std::iota(in_rank_order.begin(), in_rank_order.end(), 1);
  EXPECT_EQ(PositionsRun(*store_, launcher_, 31), in_rank_order);

  ASSERT_TRUE(sched_->Submit(Job(1000, "equal"), Configs(31)).ok());
  EXPECT_EQ(PositionsRun(*store_, launcher_, 31), in_rank_order);
}

TEST_F(SchedulerTest, AllowedGpusAndMaxGpus) {
  Open({0, 1, 2, 3});
  JobRecord j = Job(1000, "pinned");
  j.gpus = {2, 3};
  j.max_gpus = 1;
  Submit(std::move(j), 4);
  auto active = launcher_.Active();
  ASSERT_EQ(active.size(), 1u);
  std::string gpu = launcher_.Env(active[0], "HIP_VISIBLE_DEVICES");
  EXPECT_TRUE(gpu == "2" || gpu == "3") << gpu;
}

TEST_F(SchedulerTest, OnlyOwnerOrAdminMayCancel) {
  int64_t job = Submit(Job(1000, "mine"), 3);
  Identity other;
  other.uid = 2000;
  other.user = "other";
  Status s = sched_->Cancel(job, other);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("only its owner or an admin"), std::string::npos) << s.error();
  EXPECT_FALSE(sched_->Retry(job, other).ok());
  EXPECT_FALSE(sched_->Boost(job, 10, other).ok());
  const Identity owner = User(1000);
  ASSERT_TRUE(sched_->Cancel(job, owner).ok());
  auto sum = sched_->Summary(job);
  EXPECT_EQ(sum->counts.of(TaskState::kCancelled),
            3);  // two queued, one running (cancelled through the launcher)
  EXPECT_EQ(sum->state, JobState::kCancelled);
  EXPECT_TRUE(launcher_.Active().empty());
}

// Issue 17.5: cancelling a job that has ended is refused with its state, and changes nothing.
TEST_F(SchedulerTest, CancelOfAnEndedJobIsRefusedAndChangesNothing) {
  const Identity owner = User(1000);
  int64_t done = Submit(Job(1000, "done"), 1);
  launcher_.Finish(launcher_.Active()[0]);
  ASSERT_EQ(sched_->Summary(done)->state, JobState::kFinished);
  Status s = sched_->Cancel(done, owner);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error(), "job " + std::to_string(done) + " already finished: nothing to cancel");
  EXPECT_EQ(sched_->Summary(done)->state, JobState::kFinished);
  EXPECT_EQ(sched_->Summary(done)->counts.of(TaskState::kCancelled), 0);
  // The store too: a restart still sees it finished.
  Open();
  EXPECT_EQ(sched_->Summary(done)->state, JobState::kFinished);

  int64_t job = Submit(Job(1000, "queued"), 2);
  ASSERT_TRUE(sched_->Cancel(job, owner).ok());
  ASSERT_EQ(sched_->Summary(job)->state, JobState::kCancelled);
  s = sched_->Cancel(job, owner);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error(), "job " + std::to_string(job) + " already cancelled: nothing to cancel");
}

// Issue 34: a cancel ends every queued task of the job at once, in the Store one row (rewriting
// a million task rows took seconds), whatever their order: results say so at once, with the
// cancel's reason, while the scheduler forgets its entries a step at a time; and so does the
// next start.
TEST_F(SchedulerTest, ACancelEndsEveryQueuedTaskAtOnceWhateverTheirRanks) {
  const SchedulerOptions o = RestartInSmallSteps();
  const int64_t job = SubmitRanked();
  ASSERT_GT(job, 0);
  const int64_t other = Submit(Job(1001, "other"), 3);
  ASSERT_EQ(launcher_.Active().size(), 1u);
  const Identity owner = User(1000);
  ASSERT_TRUE(sched_->Cancel(job, owner).ok());
  auto check = [&](Scheduler& sched) {
    auto sum = sched.Summary(job);
    ASSERT_TRUE(sum.ok());
    EXPECT_EQ(sum->state, JobState::kCancelled);
    EXPECT_EQ(sum->counts.of(TaskState::kCancelled), 20);
    EXPECT_EQ(sum->counts.queued() + sum->counts.running(), 0);
    auto results = sched.Results(job, false);
    ASSERT_TRUE(results.ok()) << results.error();
    ASSERT_EQ(results->size(), 20u);
    for (const auto& r : *results) {
      EXPECT_EQ(r.state, TaskState::kCancelled) << "#" << r.position;
      EXPECT_GT(r.ended_at, 0) << "#" << r.position;
      // (The running #20 was cancelled through the launcher.)
      if (r.position != 20) {
        EXPECT_NE(r.error.find("cancelled by user1000"), std::string::npos) << r.error;
      }
    }
    // The other job's tasks are left queued.
    EXPECT_EQ(sched.Summary(other)->counts.queued() + sched.Summary(other)->counts.running(), 3);
  };
  // At once, before any step had its turn (of 3 entries each).
  check(*sched_);
  for (int i = 0; i < 100 && io_.poll_one() > 0; ++i) {
  }
  check(*sched_);
  // A fresh start on the same Store: cancelled still, nothing queued again.
  sched_.reset();
  FakeLauncher fresh;
  Scheduler again(io_.get_executor(), *store_, fresh, o);
  ASSERT_TRUE(again.Recover().ok());
  check(again);
  EXPECT_EQ(fresh.Active().size(), 1u);  // the other job's
}

// Issue 34: the whole retry of a large job (more tasks than a step takes) answers at once with
// what it queues again, from the job's counts, and reads its rows a step at a time: the job
// waits meanwhile (saying why), and none of it is lost: the Store has every task queued again
// when the last step is done, and after a restart. A cancel meanwhile finishes the retry first.
TEST_F(SchedulerTest, ARetryOfALargeJobQueuesItsTasksAgainInSteps) {
  const SchedulerOptions o = RestartInSmallSteps();
  const int64_t job = SubmitRanked();
  ASSERT_GT(job, 0);
  const Identity owner = User(1000);
  launcher_.Finish(launcher_.Active()[0], Outcome{Outcome::Kind::kCrashed, 0, SIGSEGV, "SIGSEGV"});
  launcher_.Finish(launcher_.Active()[0]);       // succeeded: not taken
  ASSERT_TRUE(sched_->Cancel(job, owner).ok());  // the running one, and 17 queued
  for (int i = 0; i < 100 && io_.poll_one() > 0; ++i) {
  }
  ASSERT_EQ(sched_->Summary(job)->state, JobState::kCancelled);
  auto n = sched_->Retry(job, owner);
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(*n, 19);
  {  // Before any step: waiting, and saying why.
    auto sum = sched_->Summary(job);
    EXPECT_EQ(sum->state, JobState::kWaiting);
    EXPECT_NE(sum->waiting_reason.find("its retry is queueing its tasks again (0 of 19"),
              std::string::npos)
        << sum->waiting_reason;
    EXPECT_TRUE(launcher_.Active().empty());
  }
  int steps = 0;
  for (; steps < 100 && sched_->Summary(job)->state == JobState::kWaiting; ++steps) {
    ASSERT_GT(io_.poll_one(), 0u);
  }
  EXPECT_GE(steps, 5);  // 20 rows, 3 a step
  // (`ended`: the one running when the daemon stopped, its attempts used.)
  auto check = [&](Scheduler& sched, FakeLauncher& launcher, int ended) {
    auto sum = sched.Summary(job);
    ASSERT_TRUE(sum.ok());
    EXPECT_EQ(sum->counts.succeeded(), 1);
    EXPECT_EQ(sum->counts.of(TaskState::kFailed), ended);
    EXPECT_EQ(sum->counts.queued() + sum->counts.running(), 19 - ended);
    EXPECT_EQ(launcher.Active().size(), 1u);
    auto results = sched.Results(job, false);
    ASSERT_TRUE(results.ok()) << results.error();
    int again = 0;
    for (const auto& r : *results) {
      again += r.state == TaskState::kQueued || r.state == TaskState::kRunning;
    }
    EXPECT_EQ(again, 19 - ended);
  };
  check(*sched_, launcher_, 0);
  // A fresh start on the same Store: the same.
  sched_.reset();
  FakeLauncher fresh;
  auto again = std::make_unique<Scheduler>(io_.get_executor(), *store_, fresh, o);
  ASSERT_TRUE(again->Recover().ok());
  check(*again, fresh, 1);
  // Retried again (all of it cancelled first: #20 failed, #19 succeeded, 18 cancelled).
  ASSERT_TRUE(again->Cancel(job, owner).ok());
  for (int i = 0; i < 100 && io_.poll_one() > 0; ++i) {
  }
  n = again->Retry(job, owner);
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(*n, 19);
  // While its steps run, a second retry and a cancel of named tasks are refused, saying why
  // (either would have had to finish the steps at once: a million rows, every user waiting).
  const std::string busy = "its retry is still queueing its tasks again (0 of 19 so far)";
  auto twice = again->Retry(job, owner);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().find(busy), std::string::npos) << twice.error();
  Status named = again->Cancel(job, owner, {3});
  ASSERT_FALSE(named.ok());
  EXPECT_NE(named.error().find(busy), std::string::npos) << named.error();
  // A cancel of the whole job stops the steps where they are. The cancel takes what they
  // queued; the rest stay as they ended (#20 failed), those the first cancel's mark had ended
  // covered by the new one: before any step (nothing queued), then after one (#1-#3 queued).
  auto stopped = [&](Scheduler& sched) {
    auto sum = sched.Summary(job);
    EXPECT_EQ(sum->state, JobState::kCancelled);
    EXPECT_EQ(sum->counts.of(TaskState::kCancelled), 18);
    EXPECT_EQ(sum->counts.of(TaskState::kFailed), 1);
    EXPECT_EQ(sum->counts.succeeded(), 1);
    EXPECT_EQ(sum->counts.queued() + sum->counts.running(), 0);
    auto results = sched.Results(job, false);
    ASSERT_TRUE(results.ok()) << results.error();
    ASSERT_EQ(results->size(), 20u);
    int by_owner = 0;
    for (const auto& r : *results) {
      if (r.position >= 19) continue;
      EXPECT_EQ(r.state, TaskState::kCancelled) << "#" << r.position;
      by_owner += r.error.find("cancelled by user1000") != std::string::npos;
    }
    EXPECT_EQ(by_owner, 17);  // (#18 was running, cancelled through the launcher)
  };
  ASSERT_TRUE(again->Cancel(job, owner).ok());
  for (int i = 0; i < 100 && io_.poll_one() > 0; ++i) {
  }
  stopped(*again);
  n = again->Retry(job, owner);
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(*n, 19);
  ASSERT_GT(io_.poll_one(), 0u);
  ASSERT_EQ(again->Summary(job)->counts.queued(), 3);
  ASSERT_TRUE(again->Cancel(job, owner).ok());
  for (int i = 0; i < 100 && io_.poll_one() > 0; ++i) {
  }
  stopped(*again);
  EXPECT_TRUE(fresh.Active().empty());
  again.reset();
  FakeLauncher third;
  Scheduler after(io_.get_executor(), *store_, third, o);
  ASSERT_TRUE(after.Recover().ok());
  stopped(after);
  EXPECT_TRUE(third.Active().empty());
}

// A retry of a large job whose cancel is still forgetting its tasks in steps does not finish
// that cancel at once (a million entries): its own steps come after the cancel's, and take the
// tasks the cancel ended, named ones or all.
TEST_F(SchedulerTest, ARetryOfALargeJobFollowsItsCancelsSteps) {
  const SchedulerOptions o = RestartInSmallSteps();
  const int64_t job = Submit(Job(1000, "j"), 20);
  const Identity owner = User(1000);
  launcher_.Finish(launcher_.Active()[0]);       // #1 succeeded
  ASSERT_TRUE(sched_->Cancel(job, owner).ok());  // #2 running, #3-#20 queued: 3 forgotten now
  RetryOptions named;
  named.positions = {7, 12, 20};
  auto n = sched_->Retry(job, owner, named);
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(*n, 3);
  for (int i = 0; i < 100 && sched_->Summary(job)->state == JobState::kWaiting; ++i) {
    ASSERT_GT(io_.poll_one(), 0u);
  }
  auto expect = [&](Scheduler& sched, const std::set<int>& again) {
    auto results = sched.Results(job, false);
    ASSERT_TRUE(results.ok()) << results.error();
    ASSERT_EQ(results->size(), 20u);
    for (const auto& r : *results) {
      const bool queued_or_running =
          r.state == TaskState::kQueued || r.state == TaskState::kRunning;
      EXPECT_EQ(queued_or_running, again.count(r.position) > 0)
          << "#" << r.position << " " << EnumName(r.state);
    }
    auto sum = sched.Summary(job);
    EXPECT_EQ(sum->counts.queued() + sum->counts.running(), static_cast<int>(again.size()));
    EXPECT_EQ(sum->counts.succeeded(), 1);
  };
  expect(*sched_, {7, 12, 20});
  auto steps = [&] {
    for (int i = 0; i < 100 && sched_->Summary(job)->state == JobState::kWaiting; ++i) {
      ASSERT_GT(io_.poll_one(), 0u);
    }
  };
  n = sched_->Retry(job, owner);  // the other 16 cancelled
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(*n, 16);
  steps();
  // Cancelled again (18 queued), and retried whole before the cancel's second step.
  ASSERT_TRUE(sched_->Cancel(job, owner).ok());
  n = sched_->Retry(job, owner);
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(*n, 19);
  steps();
  std::set<int> all;
  for (int p = 2; p <= 20; ++p) all.insert(p);
  expect(*sched_, all);
  // A fresh start on the same Store: the same, but for the one running (its attempts used).
  ASSERT_EQ(launcher_.Active().size(), 1u);
  auto now = sched_->Results(job, false);  // (held: a range-for over *temporary dangles)
  ASSERT_TRUE(now.ok()) << now.error();
  for (const auto& r : *now) {
    if (r.state == TaskState::kRunning) all.erase(static_cast<int>(r.position));
  }
  ASSERT_EQ(all.size(), 18u);
  sched_.reset();
  FakeLauncher fresh;
  Scheduler again(io_.get_executor(), *store_, fresh, o);
  ASSERT_TRUE(again.Recover().ok());
  expect(again, all);
}

// A partial retry (named tasks, or --failed) of a large cancelled job in steps: the tasks its
// cancel's mark ended that the retry does not take get rows of their own, cancelled, and the
// mark goes at the last step; in results and after a restart, only the retried run again.
TEST_F(SchedulerTest, APartialRetryOfALargeCancelledJobKeepsTheRestCancelled) {
  const SchedulerOptions o = RestartInSmallSteps();
  const int64_t job = Submit(Job(1000, "j"), 20);
  const Identity owner = User(1000);
  launcher_.Finish(launcher_.Active()[0], Outcome{Outcome::Kind::kFailed, 1, 0, "exit 1"});  // #1
  ASSERT_TRUE(sched_->Cancel(job, owner).ok());  // #2 running, #3-#20 queued: the mark
  for (int i = 0; i < 100 && io_.poll_one() > 0; ++i) {
  }
  RetryOptions named;
  named.positions = {7, 12};
  auto n = sched_->Retry(job, owner, named);
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(*n, 2);
  EXPECT_EQ(sched_->Summary(job)->state, JobState::kWaiting);
  for (int i = 0; i < 100 && sched_->Summary(job)->state == JobState::kWaiting; ++i) {
    ASSERT_GT(io_.poll_one(), 0u);
  }
  RetryOptions failed;
  failed.failed_only = true;
  n = sched_->Retry(job, owner, failed);  // #1 (the job is not cancelled any more: no mark)
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(*n, 1);
  for (int i = 0; i < 100 && io_.poll_one() > 0; ++i) {
  }
  auto expect = [&](Scheduler& sched, int queued) {
    auto results = sched.Results(job, false);
    ASSERT_TRUE(results.ok()) << results.error();
    ASSERT_EQ(results->size(), 20u);
    for (const auto& r : *results) {
      const bool again = r.position == 1 || r.position == 7 || r.position == 12;
      const bool queued_or_running =
          r.state == TaskState::kQueued || r.state == TaskState::kRunning;
      EXPECT_EQ(queued_or_running, again) << "#" << r.position << " " << EnumName(r.state);
      if (!again) {
        EXPECT_EQ(r.state, TaskState::kCancelled) << "#" << r.position;
      }
      if (!again && r.position > 2) {
        EXPECT_NE(r.error.find("cancelled by user1000"), std::string::npos) << r.error;
      }
    }
    EXPECT_EQ(sched.Summary(job)->counts.of(TaskState::kCancelled), 17);
    EXPECT_EQ(sched.Summary(job)->counts.queued() + sched.Summary(job)->counts.running(), queued);
  };
  expect(*sched_, 3);
  EXPECT_EQ(launcher_.Active().size(), 1u);
  // A cancel of one named task of a job with many queued looks up its rows alone.
  const int64_t other = Submit(Job(1001, "other"), 200);
  ASSERT_TRUE(sched_->Cancel(other, User(1001), {5}).ok());
  EXPECT_EQ(sched_->Summary(other)->counts.of(TaskState::kCancelled), 1);
  EXPECT_EQ(sched_->Summary(other)->counts.queued(), 199);
  EXPECT_EQ((*sched_->Results(other, false))[4].state, TaskState::kCancelled);
  sched_.reset();
  FakeLauncher fresh;
  Scheduler again(io_.get_executor(), *store_, fresh, o);
  ASSERT_TRUE(again.Recover().ok());
  expect(again, 3);
}

// The stepped retry of only the failed tasks of a large job that ran to its end: those that
// failed run again, the others keep their results.
TEST_F(SchedulerTest, ARetryOfALargeJobsFailedTasksInSteps) {
  RestartInSmallSteps();
  const int64_t job = Submit(Job(1000, "j"), 10);
  for (int i = 0; i < 10; ++i) {
    ASSERT_FALSE(launcher_.Active().empty());
    if (i % 3 == 0) {
      launcher_.Finish(launcher_.Active()[0], Outcome{Outcome::Kind::kFailed, 1, 0, "exit 1"});
    } else {
      launcher_.Finish(launcher_.Active()[0]);
    }
  }
  ASSERT_EQ(sched_->Summary(job)->state, JobState::kFinished);
  const Identity owner = User(1000);
  RetryOptions failed;
  failed.failed_only = true;
  auto n = sched_->Retry(job, owner, failed);
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(*n, 4);  // #1, #4, #7, #10
  for (int i = 0; i < 100 && sched_->Summary(job)->state == JobState::kWaiting; ++i) {
    ASSERT_GT(io_.poll_one(), 0u);
  }
  auto sum = sched_->Summary(job);
  EXPECT_EQ(sum->counts.succeeded(), 6);
  EXPECT_EQ(sum->counts.of(TaskState::kFailed), 0);
  EXPECT_EQ(sum->counts.queued() + sum->counts.running(), 4);
  std::set<int64_t> ran;
  for (int i = 0; i < 4; ++i) {
    ASSERT_FALSE(launcher_.Active().empty());
    auto results = sched_->Results(job, false);
    for (const auto& r : *results) {
      if (r.state == TaskState::kRunning) ran.insert(r.position);
    }
    launcher_.Finish(launcher_.Active()[0]);
  }
  EXPECT_EQ(ran, (std::set<int64_t>{1, 4, 7, 10}));
  EXPECT_EQ(sched_->Summary(job)->state, JobState::kFinished);
  EXPECT_EQ(sched_->Summary(job)->counts.succeeded(), 10);
}

// A retried cancelled job is revived, in the Store too: after a restart it runs on, it does not
// come back cancelled.
TEST_F(SchedulerTest, ARetriedCancelledJobStaysRevivedAfterARestart) {
  const Identity owner = User(1000);
  int64_t job = Submit(Job(1000, "j"), 2);
  ASSERT_TRUE(sched_->Cancel(job, owner).ok());
  ASSERT_EQ(sched_->Summary(job)->state, JobState::kCancelled);
  auto n = sched_->Retry(job, owner);
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(*n, 2);
  EXPECT_NE(sched_->Summary(job)->state, JobState::kCancelled);
  // The daemon stops with the revived job running: a fresh one (on the same Store) runs it on.
  sched_.reset();
  FakeLauncher fresh;
  Scheduler again(io_.get_executor(), *store_, fresh, Options());
  ASSERT_TRUE(again.Recover().ok());
  EXPECT_NE(again.Summary(job)->state, JobState::kCancelled);
  for (int i = 0; i < 2 && !fresh.Active().empty(); ++i) fresh.Finish(fresh.Active()[0]);
  EXPECT_EQ(again.Summary(job)->state, JobState::kFinished);
  EXPECT_EQ(again.Summary(job)->counts.of(TaskState::kCancelled),
            0);  // (the task interrupted twice used its attempts)
  EXPECT_EQ(again.Summary(job)->counts.queued() + again.Summary(job)->counts.running(), 0);
}

// The queued tasks a cancel ended stay cancelled when a retry of only the failed ones revives
// the job: in its results, and after a restart (they are not queued again).
TEST_F(SchedulerTest, ARetryOfTheFailedKeepsTheCancelledTasksCancelled) {
  const Identity owner = User(1000);
  int64_t job = Submit(Job(1000, "j"), 4);
  launcher_.Finish(launcher_.Active()[0], Outcome{Outcome::Kind::kCrashed, 0, SIGSEGV, "SIGSEGV"});
  ASSERT_TRUE(sched_->Cancel(job, owner).ok());  // #2 runs (ended through the launcher), #3-#4
  RetryOptions failed;
  failed.failed_only = true;
  auto n = sched_->Retry(job, owner, failed);
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(*n, 1);
  auto expect = [&](Scheduler& sched) {
    auto results = sched.Results(job, false);
    ASSERT_TRUE(results.ok()) << results.error();
    ASSERT_EQ(results->size(), 4u);
    EXPECT_NE((*results)[0].state, TaskState::kCancelled);
    for (int i : {1, 2, 3}) EXPECT_EQ((*results)[i].state, TaskState::kCancelled) << "#" << i + 1;
    EXPECT_NE((*results)[3].error.find("cancelled by user1000"), std::string::npos)
        << (*results)[3].error;
    EXPECT_EQ(sched.Summary(job)->counts.of(TaskState::kCancelled), 3);
    EXPECT_EQ(sched.Summary(job)->counts.queued(), 0);
  };
  expect(*sched_);
  EXPECT_EQ(sched_->Summary(job)->counts.running(), 1);  // #1 again
  // (Stopped while #1 runs: its second attempt, interrupted, is its last.)
  sched_.reset();
  FakeLauncher fresh;
  Scheduler again(io_.get_executor(), *store_, fresh, Options());
  ASSERT_TRUE(again.Recover().ok());
  expect(again);
  EXPECT_TRUE(fresh.Active().empty());
}

TEST_F(SchedulerTest, FailuresAreRecordedAndRetried) {
  int64_t job = Submit(Job(1000, "j"), 2);
  launcher_.Finish(launcher_.Active()[0], Outcome{Outcome::Kind::kCrashed, 0, SIGSEGV, "SIGSEGV"});
  launcher_.Finish(launcher_.Active()[0],
                   Outcome{Outcome::Kind::kTimedOut, 0, SIGTERM, "timed out"});
  auto results = sched_->Results(job, false);
  ASSERT_TRUE(results.ok());
  EXPECT_EQ((*results)[0].state, TaskState::kCrashed);
  EXPECT_EQ((*results)[0].returncode, -SIGSEGV);
  EXPECT_EQ((*results)[1].state, TaskState::kTimedOut);
  Identity owner;
  owner.uid = 1000;
  auto n = sched_->Retry(job, owner);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2);
  EXPECT_EQ(launcher_.Active().size(), 1u);
  launcher_.Finish(launcher_.Active()[0]);
  launcher_.Finish(launcher_.Active()[0]);
  EXPECT_EQ(sched_->Summary(job)->counts.succeeded(), 2);
  EXPECT_EQ((*sched_->Results(job, false))[0].attempts, 2);
}

// A task's end and the next start on its GPU share one commit. When it fails (a full or failing
// disk), neither happened: the task keeps its GPU, the next one stays queued and no process is
// launched for it; once the Store accepts writes again the end is recorded and the next starts.
TEST_F(SchedulerTest, AnEndTheStoreCannotRecordKeepsItsGpuAndTheNextTaskQueued) {
  int64_t job = Submit(Job(1000, "j"), 3);
  ASSERT_EQ(launcher_.Active().size(), 1u);
  auto states = [&] {
    std::vector<std::string> out;
    EXPECT_TRUE(store_
                    ->ForEachTaskBrief(
                        [&](TaskRecord&& t) { out.push_back(std::string(EnumName(t.state))); })
                    .ok());
    return out;
  };
  store_->FailCommitsForTesting(true);
  launcher_.Finish(launcher_.Active()[0]);
  EXPECT_TRUE(launcher_.Active().empty());  // nothing launched that the Store does not know of
  EXPECT_EQ(states(), (std::vector<std::string>{"running", "queued", "queued"}));
  auto sum = sched_->Summary(job);
  EXPECT_EQ(sum->counts.running(), 1);
  EXPECT_EQ(sum->counts.queued(), 2);
  EXPECT_EQ(sum->counts.succeeded(), 0);

  store_->FailCommitsForTesting(false);
  // The end is retried on a timer: run the loop until the next task is launched.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (launcher_.Active().empty() && std::chrono::steady_clock::now() < deadline) {
    io_.run_one_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(launcher_.Active().size(), 1u);
  EXPECT_EQ(states(), (std::vector<std::string>{"succeeded", "running", "queued"}));
  launcher_.Finish(launcher_.Active()[0]);
  launcher_.Finish(launcher_.Active()[0]);
  sum = sched_->Summary(job);
  EXPECT_EQ(sum->counts.succeeded(), 3);
  EXPECT_EQ(sum->state, JobState::kFinished);
  auto history = store_->Attempts(0);
  ASSERT_TRUE(history.ok());
  EXPECT_EQ(history->size(), 3u);  // one attempt each: nothing ran twice
}

// What the Store keeps of a run (written without the DOM): for `results` and for anyone who
// reads the database.
TEST_F(SchedulerTest, TheStoredResultHoldsTheOutcomePerfAndCaptures) {
  int64_t job = Submit(Job(1000, "j"), 1);
  launcher_.Finish(launcher_.Active()[0]);
  auto rows = store_->JobTasks(job);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  const nlohmann::json r = nlohmann::json::parse((*rows)[0].result);
  EXPECT_EQ(r["outcome"], "succeeded");
  EXPECT_EQ(r["exit_code"], 0);
  EXPECT_EQ(r["gpu"], 0);
  EXPECT_EQ(r["elapsed_s"], 1.0);
  EXPECT_NE(r["command"].get<std::string>().find("grouped_conv_fwd"), std::string::npos);
  EXPECT_EQ(r["perf"]["has_best"], true);
  EXPECT_EQ(r["perf"]["best_name"], "Inst<1, 2>");
  EXPECT_EQ(r["perf"]["avg_ms"], 0.5);
  EXPECT_EQ(r["perf"]["tflops"], 10.0);
  EXPECT_EQ(r["perf"]["valids"], 3);
  ASSERT_EQ(r["perf"]["top"].size(), 2u);
  EXPECT_EQ(r["perf"]["top"][0]["name"], "Inst<1, 2>");
  EXPECT_EQ(r["perf"]["top"][0]["gbps"], 100.0);
  EXPECT_EQ(r["perf"]["top"][0]["split_k"], "4");
  EXPECT_TRUE(r["perf"]["top"][1]["avg_ms"].is_null());  // CK printed inf
  EXPECT_EQ(r["stdout"], "");
  EXPECT_EQ(r["stdout_bytes"], 0);
  auto results = sched_->Results(job, true);
  ASSERT_TRUE(results.ok());
  EXPECT_EQ((*results)[0].best_name, "Inst<1, 2>");
  EXPECT_EQ((*results)[0].tflops, 10.0);
}

// Fair share's usage reaches the Store with an end at most every few seconds, and all of it when
// the daemon stops: the next start shares the GPUs as if it had never stopped.
TEST_F(SchedulerTest, UsageIsStoredNowAndThenAndAllOfItAtShutdown) {
  Submit(Job(1000, "j"), 3);
  auto stored = [&] {
    double usage = -1;
    EXPECT_TRUE(store_
                    ->ForEachUsage([&](UsageRecord&& u) {
                      if (u.uid == 1000) usage = u.usage;
                    })
                    .ok());
    return usage;
  };
  launcher_.Finish(launcher_.Active()[0], Outcome{}, 10.0);
  EXPECT_NEAR(stored(), 10.0, 0.01);  // the first end writes it
  launcher_.Finish(launcher_.Active()[0], Outcome{}, 20.0);
  launcher_.Finish(launcher_.Active()[0], Outcome{}, 30.0);
  EXPECT_NEAR(stored(), 10.0, 0.01);  // within seconds of it: not again
  bool done = false;
  sched_->Shutdown([&] { done = true; });
  ASSERT_TRUE(done);
  EXPECT_NEAR(stored(), 60.0, 0.05);
}

TEST_F(SchedulerTest, RestartRequeuesWhatWasRunning) {
  int64_t job = Submit(Job(1000, "j"), 3);
  ASSERT_EQ(launcher_.Active().size(), 1u);
  // The daemon "dies": drop the scheduler without telling it the run ended.
  sched_.reset();
  FakeLauncher fresh;
  auto store = Store::Open(dir_.path(), false);
  ASSERT_TRUE(store.ok());
  Scheduler again(io_.get_executor(), **store, fresh, Options());
  ASSERT_TRUE(again.Recover().ok());
  ASSERT_EQ(fresh.Active().size(), 1u);
  for (int i = 0; i < 3; ++i) fresh.Finish(fresh.Active()[0]);
  auto results = again.Results(job, false);
  ASSERT_TRUE(results.ok());
  int attempts = 0;
  for (const auto& t : *results) {
    EXPECT_EQ(t.state, TaskState::kSucceeded);
    attempts += t.attempts;
  }
  EXPECT_EQ(attempts, 4);  // the interrupted task ran twice, the others once
  auto history = (*store)->Attempts(0);
  ASSERT_TRUE(history.ok());
  EXPECT_EQ(history->front().outcome, "interrupted");
}

TEST_F(SchedulerTest, MissingProfilerIsASpawnFailureAndTheJobGoesOn) {
  JobRecord j = Job(1000, "missing");
  j.profiler_path = dir_.File("no-such-ckProfiler");
  int64_t job = Submit(std::move(j), 3);
  auto s = sched_->Summary(job);
  EXPECT_EQ(s->counts.of(TaskState::kFailed), 3);
  EXPECT_EQ(s->state, JobState::kFinished);
  auto results = sched_->Results(job, false);
  EXPECT_EQ((*results)[0].state, TaskState::kSpawnFailed);
  EXPECT_NE((*results)[0].error.find("no-such-ckProfiler"), std::string::npos)
      << (*results)[0].error;
}

// Collects the tasks of a job's task_finished events.
class FinishedTasks final : public JobWatcher {
 public:
  void OnJobEvent(const JobEvent& e) override {
    auto j = nlohmann::json::parse(e.frame);
    if (j["event"] == "task_finished") tasks.push_back(j["task"]);
  }
  std::vector<nlohmann::json> tasks;
};

// Collects the frames a follower of a task's log is told.
class LogFollower final : public JobWatcher {
 public:
  void OnJobEvent(const JobEvent& e) override {
    frames.push_back(nlohmann::json::parse(e.frame));
    last = e.job_finished;
  }
  std::vector<nlohmann::json> frames;
  bool last = false;
};

// Issue 20.1: a follower of a queued task is told its start, what it writes (as it writes it),
// and its end, which is its stream's last event; the log of a running task is what it wrote so
// far.
TEST_F(SchedulerTest, FollowingATaskStreamsItsStartOutputAndEnd) {
  const int64_t job = Submit(Job(1000, "sweep"), 2);  // one GPU: #1 runs, #2 waits
  LogFollower second;
  auto f = sched_->FollowLog(job, 2, 0, &second);
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_FALSE(f->ended);
  ASSERT_EQ(f->first.tasks.size(), 1u);
  EXPECT_EQ(f->first.tasks[0].state, TaskState::kQueued);
  ASSERT_EQ(launcher_.Active().size(), 1u);
  launcher_.Write(launcher_.Active()[0], "first task's line\n");
  EXPECT_TRUE(second.frames.empty()) << "told another task's output";
  auto log = sched_->Log(job, {1}, 0, 1 << 20);
  ASSERT_TRUE(log.ok()) << log.error();
  ASSERT_EQ(log->tasks.size(), 1u);
  EXPECT_EQ(log->tasks[0].state, TaskState::kRunning);
  EXPECT_EQ(log->tasks[0].stdout_text, "first task's line\n");
  launcher_.Finish(launcher_.Active()[0]);
  ASSERT_EQ(second.frames.size(), 1u);
  EXPECT_EQ(second.frames[0]["event"], "started");
  EXPECT_EQ(second.frames[0]["gpu"], 0);
  launcher_.Write(launcher_.Active()[0], "second\n");
  ASSERT_EQ(second.frames.size(), 2u);
  EXPECT_EQ(second.frames[1]["event"], "output");
  EXPECT_EQ(second.frames[1]["data"], "second\n");
  EXPECT_EQ(second.frames[1]["position"], 2);
  EXPECT_FALSE(second.last);
  launcher_.Finish(launcher_.Active()[0]);
  ASSERT_EQ(second.frames.size(), 3u);
  EXPECT_EQ(second.frames[2]["event"], "ended");
  EXPECT_EQ(second.frames[2]["state"], "succeeded");
  EXPECT_TRUE(second.last);
  // An ended task: its log at once, nothing to follow.
  LogFollower late;
  auto ended = sched_->FollowLog(job, 1, 0, &late);
  ASSERT_TRUE(ended.ok()) << ended.error();
  EXPECT_TRUE(ended->ended);
  EXPECT_EQ(ended->first.tasks[0].state, TaskState::kSucceeded);
  EXPECT_FALSE(sched_->FollowLog(job, 3, 0, &late).ok());
  EXPECT_FALSE(sched_->Log(99, {}, 0, 1 << 20).ok());
}

// A deferred job some of whose tasks ended (here: cancelled, then two retried) waits for its
// time again: status says waiting, not running, while nothing of it runs.
TEST_F(SchedulerTest, ADeferredJobPartlyDoneSaysItWaits) {
  const Identity owner = User(1000);
  JobRecord later = Job(1000, "later");
  later.not_before = UnixNow() + 7200;
  const int64_t job = Submit(later, 4);
  EXPECT_EQ(sched_->Summary(job)->state, JobState::kWaiting);
  ASSERT_TRUE(sched_->Cancel(job, owner).ok());
  RetryOptions some;
  some.positions = {1, 3};
  auto n = sched_->Retry(job, owner, some);
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(*n, 2);
  EXPECT_TRUE(launcher_.Active().empty());
  EXPECT_EQ(sched_->Summary(job)->done(), 2);
  EXPECT_EQ(sched_->Summary(job)->state, JobState::kWaiting);
  EditOptions now;
  now.not_before = 0.0;
  ASSERT_TRUE(sched_->Edit(job, now, owner).ok());
  EXPECT_EQ(sched_->Summary(job)->state, JobState::kRunning);
}

// Issue 20.3 and 20.4: an edit reaches the policy at once; clean removes ended jobs only.
TEST_F(SchedulerTest, EditAndCleanChangeOnlyWhatTheyMay) {
  const Identity owner = User(1000);
  JobRecord later = Job(1000, "later");
  later.not_before = UnixNow() + 7200;
  const int64_t waiting = Submit(later, 1);
  EXPECT_TRUE(launcher_.Active().empty());
  EditOptions now;
  now.not_before = 0.0;
  ASSERT_TRUE(sched_->Edit(waiting, now, owner).ok());
  ASSERT_EQ(launcher_.Active().size(), 1u) << "not started at once";
  // Any priority, as at submit: it orders the owner's own jobs only.
  EditOptions raise;
  raise.priority = 3;
  EXPECT_TRUE(sched_->Edit(waiting, raise, owner).ok());
  EXPECT_EQ(sched_->Summary(waiting)->priority, 3);
  Identity other;
  other.uid = other.gid = 1001;
  other.user = "user1001";
  EditOptions name;
  name.name = "x";
  EXPECT_FALSE(sched_->Edit(waiting, name, other).ok());
  auto none = sched_->Clean(owner, {});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->removed.empty()) << "removed a running job";
  launcher_.Finish(launcher_.Active()[0]);
  EXPECT_TRUE(sched_->Clean(other, {})->removed.empty()) << "removed another user's job";
  auto removed = sched_->Clean(owner, {});
  ASSERT_TRUE(removed.ok()) << removed.error();
  EXPECT_EQ(removed->removed, std::vector<int64_t>{waiting});
  EXPECT_FALSE(sched_->JobExists(waiting));
  EXPECT_TRUE(store_->JobTasks(waiting)->empty());
}

// Issue 17.8: a task's task_finished event and its row in `results` are made by one codec from
// what was stored, so they say the same, returncode included, for every kind of end.
TEST_F(SchedulerTest, TaskFinishedEventsAndResultsAgree) {
  Identity admin;
  admin.admin = true;
  admin.user = "root";
  ASSERT_TRUE(sched_->SetDrained(0, true, admin).ok());  // nothing starts before the watch
  int64_t job = Submit(Job(1000, "runs"), 4);
  JobRecord missing = Job(1000, "missing");
  missing.profiler_path = dir_.File("no-such-ckProfiler");
  int64_t bad = Submit(std::move(missing), 1);
  FinishedTasks events;
  sched_->AddWatcher(job, &events);
  sched_->AddWatcher(bad, &events);
  ASSERT_TRUE(sched_->SetDrained(0, false, admin).ok());
  launcher_.Finish(launcher_.Active()[0],
                   Outcome{Outcome::Kind::kTimedOut, 0, SIGTERM, "timed out"});
  launcher_.Finish(launcher_.Active()[0], Outcome{Outcome::Kind::kCrashed, 0, SIGSEGV, "SIGSEGV"});
  launcher_.Finish(launcher_.Active()[0], Outcome{Outcome::Kind::kFailed, 3, 0, "exit 3"});
  launcher_.Finish(launcher_.Active()[0]);
  ASSERT_TRUE(sched_->JobEnded(job) && sched_->JobEnded(bad));
  sched_->RemoveWatcher(job, &events);
  sched_->RemoveWatcher(bad, &events);
  auto runs = sched_->Results(job, false), spawn = sched_->Results(bad, false);
  ASSERT_TRUE(runs.ok() && spawn.ok());
  std::vector<TaskResult> stored = *runs;
  stored.insert(stored.end(), spawn->begin(), spawn->end());
  ASSERT_EQ(events.tasks.size(), stored.size());
  std::map<std::string, int> returncodes;
  for (size_t i = 0; i < stored.size(); ++i) {
    EXPECT_EQ(events.tasks[i], ToJson(stored[i])) << stored[i].state;
    returncodes[std::string(EnumName(stored[i].state))] = stored[i].returncode;
  }
  EXPECT_EQ(returncodes["timed_out"], -SIGTERM);
  EXPECT_EQ(returncodes["crashed"], -SIGSEGV);
  EXPECT_EQ(returncodes["failed"], 3);
  EXPECT_EQ(returncodes["spawn_failed"], -1);
  EXPECT_EQ(returncodes["succeeded"], 0);
  EXPECT_EQ(sched_->Summary(job)->counts.Describe(),
            "1 succeeded, 1 failed, 1 timed out, 1 crashed");
}

// A probe whose answers the test sets: cheap, as the KFD's (the scheduler asks it at once).
class FakeProbe final : public GpuProbe {
 public:
  bool cheap() const override { return true; }
  std::string Describe() const override { return "fake"; }
  Result<std::map<int, std::vector<ProbedProcess>>> Processes() override {
    std::lock_guard<std::mutex> lock(mu_);
    return procs_;
  }
  std::map<int, GpuState> Identities() override {
    std::map<int, GpuState> out;
    for (int g = 0; g < 2; ++g) {
      out[g] = GpuState{"Fake GPU", "uuid-" + std::to_string(g), "gfx942", "fake 1.0", {}, {}};
    }
    return out;
  }
  std::map<int, GpuReading> Readings() override {
    std::map<int, GpuReading> out;
    for (int g = 0; g < 2; ++g) out[g] = *ReadingOf(g);
    return out;
  }
  std::optional<GpuReading> ReadingOf(int gpu) override {
    std::lock_guard<std::mutex> lock(mu_);
    GpuReading r;
    r.sclk_mhz = 2000 + gpu;
    r.temperature_c = 40 + ++reads_;  // warmer each time: before and after differ
    r.at = 1e9 + reads_;              // (power and mclk: not available)
    return r;
  }
  // Process `pid` (of group `pgid`; `ours`: it carries the daemon's marker) uses `gpu`.
  void Use(int gpu, int64_t pid, int64_t pgid = 0, bool ours = false) {
    std::lock_guard<std::mutex> lock(mu_);
    ProbedProcess p;
    p.user = GpuUser{pid, 1001, "alice", "python3 train.py"};
    p.pgid = pgid ? pgid : pid;
    p.ours = ours;
    procs_[gpu].push_back(p);
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    procs_.clear();
  }

 private:
  std::mutex mu_;
  std::map<int, std::vector<ProbedProcess>> procs_;
  int reads_ = 0;
};

class SchedulerWatchTest : public SchedulerTest {
 protected:
  void Watch(ForeignGpuUse policy, std::vector<int> gpus = {0, 1}) {
    sched_.reset();
    watch_.reset();
    auto s = Store::Open(dir_.path(), false);
    ASSERT_TRUE(s.ok()) << s.error();
    store_ = std::move(*s);
    SchedulerOptions o = Options(gpus);
    o.foreign_gpu_use = policy;
    sched_ = std::make_unique<Scheduler>(io_.get_executor(), *store_, launcher_, o);
    auto probe = std::make_unique<FakeProbe>();
    probe_ = probe.get();
    // (Its snapshots go to io_, which these tests do not run: they deliver their own.)
    watch_ = std::make_unique<GpuWatch>(io_.get_executor(), std::move(probe),
                                        std::chrono::milliseconds(50), [](GpuSnapshot) {});
    sched_->AttachGpuWatch(watch_.get());
    ASSERT_TRUE(sched_->Recover().ok());
  }
  // What the watch would deliver now.
  void Snapshot() {
    GpuSnapshot snap;
    snap.processes = *probe_->Processes();
    snap.readings = probe_->Readings();
    snap.taken = std::chrono::steady_clock::now();
    sched_->OnGpuSnapshot(std::move(snap));
  }
  std::vector<TaskResult> Results(int64_t job) {
    auto r = sched_->Results(job, false);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : std::vector<TaskResult>{};
  }
  void TearDown() override {
    sched_.reset();  // before the watch it uses
    watch_.reset();
  }

  FakeProbe* probe_ = nullptr;
  std::unique_ptr<GpuWatch> watch_;
};

// Issue 19.1: under "wait", a GPU with a foreign process takes no task, says who holds it, and
// takes work again once the process is gone.
TEST_F(SchedulerWatchTest, AForeignProcessHoldsItsGpuUntilItLeaves) {
  Watch(ForeignGpuUse::kWait);
  probe_->Use(0, 4242);
  const int64_t job = Submit(Job(1000, "sweep"), 3);
  ASSERT_EQ(launcher_.Active().size(), 1u);
  EXPECT_EQ(launcher_.Env(launcher_.Active()[0], "HIP_VISIBLE_DEVICES"), "1");
  auto gpus = sched_->Gpus();
  ASSERT_EQ(gpus[0].foreign.size(), 1u);
  EXPECT_EQ(gpus[0].foreign[0].Describe(), "pid 4242 (alice, python3 train.py)");
  EXPECT_EQ(gpus[0].model, "Fake GPU");
  EXPECT_TRUE(gpus[1].foreign.empty());
  launcher_.Finish(launcher_.Active()[0]);
  ASSERT_EQ(launcher_.Active().size(), 1u);
  EXPECT_EQ(launcher_.Env(launcher_.Active()[0], "HIP_VISIBLE_DEVICES"), "1");
  probe_->Clear();
  Snapshot();
  ASSERT_EQ(launcher_.Active().size(), 2u) << "GPU 0 works again";
  for (auto id : launcher_.Active()) launcher_.Finish(id);
  for (const auto& r : Results(job)) EXPECT_TRUE(r.contended.empty()) << r.position;
}

// A foreign process that comes during a run marks that run contended; under "wait" its GPU then
// waits for it.
TEST_F(SchedulerWatchTest, AForeignProcessDuringARunMarksItContended) {
  Watch(ForeignGpuUse::kWait, {0});
  const int64_t job = Submit(Job(1000, "sweep"), 2);
  ASSERT_EQ(launcher_.Active().size(), 1u);
  probe_->Use(0, 4242);
  Snapshot();
  launcher_.Finish(launcher_.Active()[0]);
  EXPECT_TRUE(launcher_.Active().empty()) << "the GPU waits for the foreign process";
  probe_->Clear();
  Snapshot();
  ASSERT_EQ(launcher_.Active().size(), 1u);
  launcher_.Finish(launcher_.Active()[0]);
  auto results = Results(job);
  ASSERT_EQ(results.size(), 2u);
  ASSERT_EQ(results[0].contended.size(), 1u);
  EXPECT_EQ(results[0].contended[0].pid, 4242);
  EXPECT_EQ(results[0].contended[0].user, "alice");
  EXPECT_EQ(results[0].contended[0].command, "python3 train.py");
  EXPECT_TRUE(results[1].contended.empty());
}

// "flag" runs beside a foreign process and marks the result; "ignore" does not even look.
TEST_F(SchedulerWatchTest, FlagRunsAndMarksIgnoreDoesNotLook) {
  for (ForeignGpuUse policy : {ForeignGpuUse::kFlag, ForeignGpuUse::kIgnore}) {
    SCOPED_TRACE(policy == ForeignGpuUse::kFlag ? "flag" : "ignore");
    Watch(policy, {0});
    probe_->Use(0, 4242);
    const int64_t job = Submit(Job(1000, "sweep"), 1);
    ASSERT_EQ(launcher_.Active().size(), 1u);
    launcher_.Finish(launcher_.Active()[0]);
    auto results = Results(job);
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].contended.size(), policy == ForeignGpuUse::kFlag ? 1u : 0u);
    EXPECT_EQ(sched_->Gpus()[0].foreign.size(), policy == ForeignGpuUse::kFlag ? 1u : 0u);
  }
}

// The task's own processes (its process group) and any carrying the daemon's marker are not
// foreign.
TEST_F(SchedulerWatchTest, OurOwnProcessesAreNotForeign) {
  Watch(ForeignGpuUse::kWait, {0});
  probe_->Use(0, 777, 0, /*ours=*/true);  // another of our profilers' children
  const int64_t job = Submit(Job(1000, "sweep"), 2);
  ASSERT_EQ(launcher_.Active().size(), 1u);
  const auto run = launcher_.Active()[0];
  probe_->Use(0, 100000 + static_cast<int64_t>(run) + 1, 100000 + static_cast<int64_t>(run));
  Snapshot();
  launcher_.Finish(run);
  ASSERT_EQ(launcher_.Active().size(), 1u) << "the next task starts: nothing foreign";
  probe_->Clear();  // the first task's process exited with it
  probe_->Use(0, 777, 0, /*ours=*/true);
  for (auto id : launcher_.Active()) launcher_.Finish(id);
  for (const auto& r : Results(job)) EXPECT_TRUE(r.contended.empty()) << r.position;
}

// Issue 19.2: each result carries what the GPU is and its readings before and after; what the
// probe cannot read is null.
TEST_F(SchedulerWatchTest, ResultsCarryTheGpuState) {
  Watch(ForeignGpuUse::kWait, {0});
  const int64_t job = Submit(Job(1000, "sweep"), 1);
  launcher_.Finish(launcher_.Active()[0]);
  auto results = Results(job);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_TRUE(results[0].gpu_state.has_value());
  const GpuState& g = *results[0].gpu_state;
  EXPECT_EQ(g.name, "Fake GPU");
  EXPECT_EQ(g.uuid, "uuid-0");
  EXPECT_EQ(g.arch, "gfx942");
  ASSERT_TRUE(g.before && g.after);
  EXPECT_EQ(g.before->sclk_mhz, 2000.0);
  EXPECT_LT(*g.before->temperature_c, *g.after->temperature_c);
  EXPECT_LT(g.before->at, g.after->at);
  EXPECT_EQ(g.after->power_w, std::nullopt);
  const nlohmann::json j = ToJson(results[0]);
  EXPECT_TRUE(j["gpu_state"]["after"]["power_w"].is_null()) << j["gpu_state"];
  EXPECT_TRUE(j["gpu_state"]["after"]["mclk_mhz"].is_null());
}

TEST_F(SchedulerTest, DrainedGpuTakesNoWork) {
  Open({0, 1});
  Identity admin;
  admin.admin = true;
  ASSERT_TRUE(sched_->SetDrained(1, true, admin).ok());
  Identity user;
  user.uid = 5;
  EXPECT_FALSE(sched_->SetDrained(0, true, user).ok());
  Submit(Job(1000, "j"), 4);
  ASSERT_EQ(launcher_.Active().size(), 1u);
  EXPECT_EQ(launcher_.Env(launcher_.Active()[0], "HIP_VISIBLE_DEVICES"), "0");
  ASSERT_TRUE(sched_->SetDrained(1, false, admin).ok());
  EXPECT_EQ(launcher_.Active().size(), 2u);
}

// A job of one task stored in `store`: the task's id (0 when it could not be stored).
int64_t StoreOneTask(Store& store) {
  JobRecord job;
  job.owner = "u";
  std::vector<TaskRecord> tasks(1);
  tasks[0].position = 1;
  tasks[0].op = "profile_grouped_conv_fwd";
  tasks[0].config = "{}";
  return store.InsertJob(&job, &tasks).ok() ? tasks[0].id : 0;
}

// A task end of a few pages, as a profiler's capture is: attempt `attempt` of `task` started
// and ended with a result of 12,000 bytes.
void EndAttempt(Store& store, int64_t task, int attempt) {
  static const std::string result(12000, 'x');
  ASSERT_TRUE(store.MarkRunning(task, attempt, 0, attempt).ok());
  ASSERT_TRUE(store
                  .FinishAttempt(task, attempt, Outcome::Kind::kSucceeded, TaskState::kQueued,
                                 attempt, result + std::to_string(attempt), nullptr)
                  .ok());
}

// A Store in a directory of its own, holding one task (`task`) whose ends the cases write.
class StoreCheckpoints : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = Store::Open(dir.path(), false);
    ASSERT_TRUE(opened.ok()) << opened.error();
    owned = std::move(*opened);
    task = StoreOneTask(store());
    ASSERT_GT(task, 0);
  }
  Store& store() { return *owned; }

  TempDir dir;
  std::unique_ptr<Store> owned;
  int64_t task = 0;
};

// The log is copied into the database while the daemon runs (by the checkpoint thread), not only
// when it stops: a night's sweep would otherwise grow the -wal file by every page written.
TEST_F(StoreCheckpoints, TheLogIsCheckpointedWhileTasksRun) {
  // Up to 40 times what should take one (1,000 pages), within a minute.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int attempt = 0;
  while (store().CheckpointsForTesting() == 0 && attempt < 10000 &&
         std::chrono::steady_clock::now() < deadline) {
    ++attempt;
    ASSERT_NO_FATAL_FAILURE(EndAttempt(store(), task, attempt));
  }
  EXPECT_GT(store().CheckpointsForTesting(), 0) << "after " << attempt << " task ends";
  struct stat st {};
  ASSERT_EQ(stat((dir.path() + "/ckprofd.db-wal").c_str(), &st), 0);
  EXPECT_LT(st.st_size, int64_t{64} << 20);
}

// A writer that never pauses gives a RESTART's busy wait no gap (it sleeps between tries; the
// writer takes the lock again at once): past twice the restart size it is held at a commit
// until the log has started over. Without that the log grew by every commit (698 MB after 10,000
// task ends on a loaded machine). About 400 MiB written; label slow (tests/CMakeLists.txt).
TEST_F(StoreCheckpoints, AWriterThatNeverPausesKeepsTheLogBounded) {
  const std::string wal = dir.path() + "/ckprofd.db-wal";
  int64_t largest = 0;
  for (int attempt = 1; attempt <= 6000; ++attempt) {
    ASSERT_NO_FATAL_FAILURE(EndAttempt(store(), task, attempt));
    struct stat st {};
    if (attempt % 50 == 0 && stat(wal.c_str(), &st) == 0) largest = std::max(largest, st.st_size);
  }
  EXPECT_GT(store().CheckpointsForTesting(), 0);
  EXPECT_LT(largest, int64_t{144} << 20) << "the log's largest size";
}

// Large work in steps (bulk writing) meets no RESTART, which would hold the daemon's thread for
// a copy and an fsync: once the log is 64 MiB long it waits, as Scheduler::LargeWorkWaits does,
// until a passive checkpoint has copied it all, and its next transaction starts the log over
// (the file is reused, not cut back, until the work ends). A writer that never waited would
// grow the log by all it wrote (about 190 MiB here); label slow (tests/CMakeLists.txt).
TEST_F(StoreCheckpoints, BulkWritingWaitsForPassiveCheckpointsAndKeepsTheLogBounded) {
  const std::string wal = dir.path() + "/ckprofd.db-wal";
  store().SetBulkWriting(true);
  int64_t largest = 0;
  int waited = 0;
  for (int attempt = 1; attempt <= 8000; ++attempt) {
    for (int polls = 0; store().LogBehind() && polls < 10000; ++polls) {
      if (polls == 0) ++waited;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_FALSE(store().LogBehind()) << "the checkpoints did not catch up within 10 s";
    ASSERT_NO_FATAL_FAILURE(EndAttempt(store(), task, attempt));
    struct stat st {};
    if (attempt % 50 == 0 && stat(wal.c_str(), &st) == 0) largest = std::max(largest, st.st_size);
  }
  EXPECT_GT(waited, 0) << "the log never reached 64 MiB";
  EXPECT_LT(largest, int64_t{80} << 20) << "the log's largest size";
  store().SetBulkWriting(false);
  EXPECT_FALSE(store().LogBehind());
}

// A state directory written by the first ckprofd release (schema 1, no jobs.task_order) opens:
// its jobs keep the rank order, and the file is brought to the current schema in place.
TEST(StoreSchema, Version1DatabaseIsMigratedToVersion10) {
  TempDir dir;
  const std::string path = dir.File("ckprofd.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const char* v1 = R"SQL(
PRAGMA journal_mode=WAL;
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY,
  uid INTEGER NOT NULL, gid INTEGER NOT NULL, groups TEXT NOT NULL, owner TEXT NOT NULL,
  name TEXT NOT NULL, priority INTEGER NOT NULL, gpus TEXT NOT NULL, max_gpus INTEGER NOT NULL,
  not_before REAL NOT NULL, timeout_s REAL NOT NULL, profiler_path TEXT NOT NULL,
  cwd TEXT NOT NULL, input_format TEXT NOT NULL, cancelled INTEGER NOT NULL DEFAULT 0,
  submitted_at REAL NOT NULL, finished_at REAL NOT NULL DEFAULT 0);
CREATE TABLE tasks (
  id INTEGER PRIMARY KEY,
  job_id INTEGER NOT NULL REFERENCES jobs(id),
  position INTEGER NOT NULL, rank INTEGER NOT NULL, op TEXT NOT NULL, config TEXT NOT NULL,
  est_cost REAL NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
  gpu INTEGER NOT NULL DEFAULT -1, pgid INTEGER NOT NULL DEFAULT 0,
  started_at REAL NOT NULL DEFAULT 0, ended_at REAL NOT NULL DEFAULT 0,
  result TEXT NOT NULL DEFAULT '');
INSERT INTO jobs (id, uid, gid, groups, owner, name, priority, gpus, max_gpus, not_before,
  timeout_s, profiler_path, cwd, input_format, submitted_at)
  VALUES (7, 1000, 1000, '[]', 'ann', 'old sweep', 0, '[]', 0, 0, -1, '/opt/ck', '/', 'ir', 1.0);
INSERT INTO tasks (id, job_id, position, rank, op, config, est_cost, state, pgid)
  VALUES (40, 7, 1, 1, 'profile_grouped_conv_fwd', '{}', 1.0, 'running', 4242);
PRAGMA user_version = 1;
)SQL";
  char* err = nullptr;
  ASSERT_EQ(sqlite3_exec(db, v1, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_close(db);

  for (int open = 0; open < 2; ++open) {  // migrated once, then opened as it is
    auto store = Store::Open(dir.path(), false);
    ASSERT_TRUE(store.ok()) << store.error();
    std::vector<JobRecord> jobs;
    ASSERT_TRUE((*store)->ForEachJob([&](JobRecord&& j) { jobs.push_back(std::move(j)); }).ok());
    ASSERT_EQ(jobs.size(), 1u);
    EXPECT_EQ(jobs[0].name, "old sweep");
    EXPECT_EQ(jobs[0].order, TaskOrder::kRank);
    // Schema 3: a job from before repeats ran each config once.
    EXPECT_EQ(jobs[0].repeat, 1);
    EXPECT_DOUBLE_EQ(jobs[0].noise_threshold, 0.05);
    EXPECT_EQ(jobs[0].on_end, "");  // schema 4
    EXPECT_TRUE(jobs[0].reuse);     // schema 5
    auto tasks = (*store)->JobTasks(jobs[0].id);
    ASSERT_TRUE(tasks.ok()) << tasks.error();
    ASSERT_EQ(tasks->size(), 1u);
    EXPECT_EQ((*tasks)[0].run, 0);
    // Schema 5: an old task has no problem key, so it is neither reused nor in the table.
    EXPECT_EQ((*tasks)[0].problem, "");
    EXPECT_EQ((*tasks)[0].reused_from, 0);
    // Schema 8: the pgid column is the attempt's handle, its value kept.
    EXPECT_EQ((*tasks)[0].handle, 4242);
    std::vector<TaskRecord> brief;
    ASSERT_TRUE((*store)->ForEachTaskBrief([&](TaskRecord&& t) { brief.push_back(t); }).ok());
    ASSERT_EQ(brief.size(), 1u);
    EXPECT_EQ(brief[0].handle, 4242);
    EXPECT_EQ(brief[0].state, TaskState::kRunning);
    EXPECT_EQ(brief[0].config, "");  // the brief rows leave the texts out
    auto best = (*store)->Best({});
    ASSERT_TRUE(best.ok()) << best.error();
    EXPECT_TRUE(best->empty());
  }
  // Schema 6: the next ids continue above the largest the old database held, also once its
  // jobs are removed (`clean`).
  {
    auto store = Store::Open(dir.path(), false);
    ASSERT_TRUE(store.ok()) << store.error();
    ASSERT_TRUE((*store)->DeleteJobs({7}).ok());
    JobRecord job;
    job.owner = "bob";
    std::vector<TaskRecord> tasks(2);
    for (auto& t : tasks) {
      t.position = 1;
      t.op = "profile_grouped_conv_fwd";
      t.config = "{}";
    }
    job.env = {"A=1", "B=x=y"};  // schema 7: a job's --env
    job.after = {7};             // schema 10: its --after and --after-ok jobs
    job.after_ok = {3, 5};
    ASSERT_TRUE((*store)->InsertJob(&job, &tasks).ok());
    EXPECT_EQ(job.id, 8);
    EXPECT_EQ(tasks[0].id, 41);
    EXPECT_EQ(tasks[1].id, 42);
  }
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(q, 0), 10);
  sqlite3_finalize(q);
  for (const char* table : {"tasks", "attempts"}) {
    const std::string sql =
        std::string("SELECT count(*) FROM pragma_table_info('") + table + "') WHERE name='handle'";
    ASSERT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &q, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int(q, 0), 1) << table;
    sqlite3_finalize(q);
  }
  sqlite3_close(db);
  auto store = Store::Open(dir.path(), false);
  ASSERT_TRUE(store.ok()) << store.error();
  // Schema 9: a job is held (ckprof hold) and released; an old job is not held.
  ASSERT_TRUE((*store)->SetJobHold(8, "alice", 1001).ok());
  std::vector<std::string> env;
  std::map<int64_t, std::pair<std::string, int64_t>> held;
  JobRecord eight;
  auto load = [&] {
    return (*store)->ForEachJob([&](JobRecord&& j) {
      if (j.id == 8) env = j.env;
      held[j.id] = {j.held_by, j.held_by_uid};
      if (j.id == 8) eight = j;
    });
  };
  ASSERT_TRUE(load().ok());
  EXPECT_EQ(env, (std::vector<std::string>{"A=1", "B=x=y"}));
  EXPECT_EQ(eight.after, std::vector<int64_t>{7});
  EXPECT_EQ(eight.after_ok, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(eight.cancel_reason, "");
  // Schema 10: why a job was cancelled, kept with it; a retry's revival clears it.
  ASSERT_TRUE((*store)->SetJobCancelled(8, true, "job 5 failed").ok());
  ASSERT_TRUE(load().ok());
  EXPECT_TRUE(eight.cancelled);
  EXPECT_EQ(eight.cancel_reason, "job 5 failed");
  ASSERT_TRUE((*store)->SetJobCancelled(8, false, "ignored").ok());
  ASSERT_TRUE(load().ok());
  EXPECT_FALSE(eight.cancelled);
  EXPECT_EQ(eight.cancel_reason, "");
  EXPECT_EQ(held[8], std::make_pair(std::string("alice"), int64_t{1001}));
  ASSERT_TRUE((*store)->SetJobHold(8, "", 1001).ok());
  ASSERT_TRUE(load().ok());
  EXPECT_EQ(held[8], std::make_pair(std::string(), int64_t{-1}));
}

// A job's id (and its tasks') is never given twice: not after its job was removed (`clean`,
// keep_finished_days), not after every job was, not after the store is opened again.
TEST(StoreSchema, IdsAreNeverGivenTwice) {
  TempDir dir;
  int64_t last_job = 0, last_task = 0;
  for (int open = 0; open < 2; ++open) {
    auto store = Store::Open(dir.path(), false);
    ASSERT_TRUE(store.ok()) << store.error();
    for (int round = 0; round < 3; ++round) {
      SCOPED_TRACE("open " + std::to_string(open) + ", round " + std::to_string(round));
      JobRecord job;
      job.owner = "ann";
      std::vector<TaskRecord> tasks(3);
      for (size_t i = 0; i < tasks.size(); ++i) {
        tasks[i].position = static_cast<int64_t>(i) + 1;
        tasks[i].op = "profile_grouped_conv_fwd";
        tasks[i].config = "{}";
      }
      ASSERT_TRUE((*store)->InsertJob(&job, &tasks).ok());
      EXPECT_GT(job.id, last_job);
      EXPECT_GT(tasks[0].id, last_task);
      auto stored = (*store)->JobTasks(job.id);
      ASSERT_TRUE(stored.ok()) << stored.error();
      ASSERT_EQ(stored->size(), 3u);
      for (size_t i = 0; i < 3; ++i) EXPECT_EQ((*stored)[i].id, tasks[i].id);
      last_job = job.id;
      last_task = tasks[2].id;
      ASSERT_TRUE((*store)->DeleteJobs({job.id}).ok());  // every job gone
    }
  }
  EXPECT_EQ(last_job, 6);
  EXPECT_EQ(last_task, 18);
}

}  // namespace
}  // namespace ckprof

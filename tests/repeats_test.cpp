// MergeRepeats (common/repeats.h): the runs of a config become one result with the right
// median, spread and coefficient of variation.
#include "common/repeats.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/results_file.h"

namespace ckprof {
namespace {

TaskResult MakeRun(int64_t position, int run, TaskState state, double ms, int gpu,
                   const std::string& kernel = "k1") {
  TaskResult t;
  t.task_id = position * 100 + run;
  t.job_id = 7;
  t.position = position;
  t.priority_rank = position;
  t.operation = "profile_grouped_conv_fwd";
  t.run = run;
  t.state = state;
  t.gpu = gpu;
  t.attempts = 1;
  t.elapsed_s = 2;
  if (state == TaskState::kSucceeded) {
    t.avg_ms = ms;
    t.tflops = 10.0 / ms;  // the same work in every run: TFlops go as 1/time
    t.gbps = 20.0 / ms;
    t.best_name = kernel;
  } else {
    t.error = "exit 1";
  }
  return t;
}

TEST(Repeats, MedianAndSampleCvOfAnOddCount) {
  // 1.0, 1.2, 0.8, 1.1, 0.9: median 1.0, mean 1.0, sample std sqrt(0.1/4) = 0.158114.
  std::vector<TaskResult> runs;
  const double ms[] = {1.0, 1.2, 0.8, 1.1, 0.9};
  for (int k = 0; k < 5; ++k)
    runs.push_back(MakeRun(1, k + 1, TaskState::kSucceeded, ms[k], k % 2));
  auto merged = MergeRepeats(runs, 0.05);
  ASSERT_EQ(merged.size(), 1u);
  const TaskResult& r = merged[0];
  ASSERT_TRUE(r.repeats.has_value());
  EXPECT_EQ(r.state, TaskState::kSucceeded);
  EXPECT_EQ(r.run, 0);
  EXPECT_DOUBLE_EQ(r.avg_ms, 1.0);
  EXPECT_DOUBLE_EQ(r.repeats->median_ms, 1.0);
  EXPECT_DOUBLE_EQ(r.repeats->min_ms, 0.8);
  EXPECT_DOUBLE_EQ(r.repeats->max_ms, 1.2);
  EXPECT_NEAR(r.repeats->cv, std::sqrt(0.1 / 4), 1e-12);
  EXPECT_TRUE(r.repeats->noisy);  // 15.8% > 5%
  EXPECT_TRUE(r.noisy());
  EXPECT_EQ(r.repeats->runs, 5);
  EXPECT_EQ(r.repeats->succeeded, 5);
  EXPECT_EQ(r.repeats->finished, 5);
  EXPECT_EQ(r.repeats->same_best, 5);
  EXPECT_EQ(r.repeats->times_ms, (std::vector<double>{1.0, 1.2, 0.8, 1.1, 0.9}));
  EXPECT_EQ(r.repeats->gpus, (std::vector<int>{0, 1, 0, 1, 0}));
  // The result is the median run (run 1, on GPU 0), its TFlops those of the median time.
  EXPECT_EQ(r.task_id, 101);
  EXPECT_EQ(r.gpu, 0);
  EXPECT_DOUBLE_EQ(r.tflops, 10.0);
  EXPECT_DOUBLE_EQ(r.gbps, 20.0);
  // What the config cost: every run's attempts and time.
  EXPECT_EQ(r.attempts, 5);
  EXPECT_DOUBLE_EQ(r.elapsed_s, 10);
}

TEST(Repeats, EvenCountTakesTheMeanOfTheMiddleTwoAndScalesTflops) {
  std::vector<TaskResult> runs = {MakeRun(3, 1, TaskState::kSucceeded, 2.0, 0, "a"),
                                  MakeRun(3, 2, TaskState::kSucceeded, 1.0, 1, "b"),
                                  MakeRun(3, 3, TaskState::kSucceeded, 4.0, 0, "a"),
                                  MakeRun(3, 4, TaskState::kSucceeded, 3.0, 1, "a")};
  auto merged = MergeRepeats(runs, 0.05);
  ASSERT_EQ(merged.size(), 1u);
  const TaskResult& r = merged[0];
  EXPECT_DOUBLE_EQ(r.avg_ms, 2.5);
  // Kernel and GPU of the lower middle run (2.0 ms, run 1); TFlops for 2.5 ms.
  EXPECT_EQ(r.best_name, "a");
  EXPECT_EQ(r.task_id, 301);
  EXPECT_DOUBLE_EQ(r.tflops, 10.0 / 2.5);
  EXPECT_EQ(r.repeats->same_best, 3);  // run 2's best kernel was another
  // mean 2.5, sample std sqrt(5/3).
  EXPECT_NEAR(r.repeats->cv, std::sqrt(5.0 / 3.0) / 2.5, 1e-12);
}

TEST(Repeats, SteadyRunsAreNotNoisyAndTheThresholdIsTheJobs) {
  std::vector<TaskResult> runs = {MakeRun(1, 1, TaskState::kSucceeded, 1.00, 0),
                                  MakeRun(1, 2, TaskState::kSucceeded, 1.02, 1),
                                  MakeRun(1, 3, TaskState::kSucceeded, 0.98, 0)};
  auto quiet = MergeRepeats(runs, 0.05);
  EXPECT_NEAR(quiet[0].repeats->cv, 0.02, 1e-12);
  EXPECT_FALSE(quiet[0].repeats->noisy);
  EXPECT_DOUBLE_EQ(quiet[0].repeats->noise_threshold, 0.05);
  // The same runs under a stricter threshold.
  EXPECT_TRUE(MergeRepeats(runs, 0.01)[0].repeats->noisy);
}

TEST(Repeats, FailedRunsAreLeftOutOfTheStatisticsAndAllFailedSaysSo) {
  std::vector<TaskResult> runs = {
      MakeRun(1, 1, TaskState::kFailed, 0, 0),      MakeRun(1, 2, TaskState::kSucceeded, 2.0, 1),
      MakeRun(1, 3, TaskState::kSucceeded, 4.0, 0), MakeRun(2, 1, TaskState::kTimedOut, 0, 0),
      MakeRun(2, 2, TaskState::kCrashed, 0, 1),     MakeRun(2, 3, TaskState::kTimedOut, 0, 0)};
  auto merged = MergeRepeats(runs, 0.05);
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].state, TaskState::kSucceeded);
  EXPECT_TRUE(merged[0].error.empty());
  EXPECT_DOUBLE_EQ(merged[0].avg_ms, 3.0);
  EXPECT_EQ(merged[0].repeats->succeeded, 2);
  EXPECT_EQ(merged[0].repeats->runs, 3);
  EXPECT_EQ(merged[1].position, 2);
  EXPECT_EQ(merged[1].state, TaskState::kTimedOut);  // the first run's end
  EXPECT_EQ(merged[1].repeats->succeeded, 0);
  EXPECT_DOUBLE_EQ(merged[1].repeats->cv, 0);
  EXPECT_FALSE(merged[1].repeats->noisy);
  EXPECT_EQ(merged[1].error, "all 3 runs ended without success; the first: exit 1");
}

TEST(Repeats, AConfigWithARunStillToGoIsNotFinished) {
  std::vector<TaskResult> runs = {MakeRun(1, 1, TaskState::kSucceeded, 1.0, 0),
                                  MakeRun(1, 2, TaskState::kRunning, 0, 1),
                                  MakeRun(1, 3, TaskState::kQueued, 0, -1)};
  auto merged = MergeRepeats(runs, 0.05);
  EXPECT_EQ(merged[0].state, TaskState::kRunning);
  EXPECT_FALSE(merged[0].finished());
  EXPECT_EQ(merged[0].repeats->finished, 1);
  // A partial job's results say so, counted once per config.
  EXPECT_TRUE(ComputeStats(merged).partial());
}

TEST(Repeats, OneContendedRunTaintsTheConfigAndOrderIsKept) {
  std::vector<TaskResult> runs = {MakeRun(2, 1, TaskState::kSucceeded, 1.0, 0),
                                  MakeRun(2, 2, TaskState::kSucceeded, 1.0, 1)};
  runs[1].contended.push_back(GpuUser{4242, 1000, "ann", "python3 train.py"});
  TaskResult single = MakeRun(1, 0, TaskState::kSucceeded, 5.0, 0);
  runs.insert(runs.begin(), single);
  auto merged = MergeRepeats(runs, 0.05);
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].position, 1);  // a task that is not a run passes through as it is
  EXPECT_FALSE(merged[0].repeats.has_value());
  EXPECT_EQ(merged[1].position, 2);
  ASSERT_EQ(merged[1].contended.size(), 1u);
  EXPECT_EQ(merged[1].contended[0].pid, 4242);
}

TEST(Repeats, MedianAndCvHelpers) {
  EXPECT_DOUBLE_EQ(Median({}), 0);
  EXPECT_DOUBLE_EQ(Median({3}), 3);
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(CoefficientOfVariation({}), 0);
  EXPECT_DOUBLE_EQ(CoefficientOfVariation({2}), 0);
  EXPECT_DOUBLE_EQ(CoefficientOfVariation({0, 0}), 0);
  EXPECT_NEAR(CoefficientOfVariation({1, 3}), std::sqrt(2.0) / 2, 1e-12);
}

TEST(Repeats, ResultsFormatsCarryTheSpread) {
  std::vector<TaskResult> runs = {MakeRun(1, 1, TaskState::kSucceeded, 1.0, 0),
                                  MakeRun(1, 2, TaskState::kSucceeded, 2.0, 1),
                                  MakeRun(1, 3, TaskState::kSucceeded, 1.5, 0)};
  auto merged = MergeRepeats(runs, 0.05);
  auto file = ResultsFileJson(merged, "ann", "2026-12-02T10:00:00");
  const auto& r = file["results"][0];
  EXPECT_DOUBLE_EQ(r["avg_time_ms"].get<double>(), 1.5);
  EXPECT_TRUE(r["noisy"].get<bool>());
  EXPECT_EQ(r["repeats"]["runs"], 3);
  EXPECT_DOUBLE_EQ(r["repeats"]["min_ms"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(r["repeats"]["max_ms"].get<double>(), 2.0);
  EXPECT_EQ(file["stats"]["total"], 1);  // one config, not three runs
  const std::string csv = ResultsCsv(merged);
  EXPECT_NE(csv.find(",run,runs,runs_succeeded,min_ms,max_ms,cv,noisy,"), std::string::npos);
  EXPECT_NE(csv.find(",,3,3,1,2,0.333333,true,,,,,,,\n"), std::string::npos) << csv;
  const std::string table = ResultsTable(merged);
  EXPECT_NE(table.find("median ms"), std::string::npos) << table;
  EXPECT_NE(table.find("succeeded~"), std::string::npos) << table;
  EXPECT_NE(table.find("33.3%"), std::string::npos) << table;
  EXPECT_NE(table.find("~ noisy: its runs' coefficient of variation is above 5%"),
            std::string::npos)
      << table;
  // A job run once keeps its table.
  EXPECT_EQ(ResultsTable({MakeRun(1, 0, TaskState::kSucceeded, 1.0, 0)}).find("CV"),
            std::string::npos);
}

}  // namespace
}  // namespace ckprof

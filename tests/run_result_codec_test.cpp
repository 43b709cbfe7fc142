#include "daemon/run_result_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "daemon/task_result_codec.h"

namespace ckprof {
namespace {

using json = nlohmann::json;

TEST(RunResultCodec, EveryFieldGoesAndComesBack) {
  RunResult r;
  r.outcome.kind = Outcome::Kind::kTimedOut;
  r.outcome.signal = 9;
  r.outcome.reason = "timed out after 0.2 s";
  r.perf.has_best = true;
  r.perf.best_name = "DeviceGroupedConvFwd<256>";
  r.perf.avg_ms = 0.125;
  r.perf.tflops = 88.5;
  r.perf.gbps = 1234.25;
  r.perf.split_k = "4 (best occupancy)";
  r.perf.valids = 3;
  r.perf.instances_found = 40;
  r.perf.instances_tried = 12;
  r.perf.instances_supported = 9;
  r.perf.top = {{"a", 0.125, 88.5, 1234.25, "4"},
                {"b", std::numeric_limits<double>::infinity(), 0, 0, ""}};
  r.perf.verification_failed = true;
  r.perf.usage_printed = true;
  r.perf.best_from_summary = true;
  r.perf.lines = 77;
  r.perf.truncated_lines = 2;
  r.stdout_capture = "out\n\x1b[2J";
  r.stderr_capture = "err";
  r.stdout_bytes = 5000000000ULL;
  r.stderr_bytes = 3;
  r.pid = 4242;
  r.started_at = std::chrono::system_clock::time_point(std::chrono::seconds(1764547200));
  r.ended_at = r.started_at + std::chrono::milliseconds(1500);
  r.elapsed_s = 1.5;
  r.cpu_s = 0.75;
  r.peak_memory_bytes = 1 << 30;
  r.usage_from = "cgroup";

  auto back = RunResultFromJson(json::parse(RunResultToJson(r).dump()));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->outcome.kind, r.outcome.kind);
  EXPECT_EQ(back->outcome.signal, 9);
  EXPECT_EQ(back->outcome.reason, r.outcome.reason);
  EXPECT_EQ(back->perf.best_name, r.perf.best_name);
  EXPECT_EQ(back->perf.avg_ms, 0.125);
  EXPECT_EQ(back->perf.gbps, 1234.25);
  EXPECT_EQ(back->perf.split_k, r.perf.split_k);
  EXPECT_EQ(back->perf.valids, 3);
  EXPECT_EQ(back->perf.instances_found, 40);
  EXPECT_EQ(back->perf.instances_tried, 12);
  EXPECT_EQ(back->perf.instances_supported, 9);
  ASSERT_EQ(back->perf.top.size(), 2u);
  EXPECT_EQ(back->perf.top[0].split_k, "4");
  EXPECT_TRUE(std::isnan(back->perf.top[1].avg_ms));  // JSON has no inf: null, read as nan
  EXPECT_TRUE(back->perf.verification_failed);
  EXPECT_FALSE(back->perf.not_implemented);
  EXPECT_TRUE(back->perf.usage_printed);
  EXPECT_TRUE(back->perf.best_from_summary);
  EXPECT_EQ(back->perf.lines, 77u);
  EXPECT_EQ(back->perf.truncated_lines, 2u);
  EXPECT_EQ(back->stdout_capture, r.stdout_capture);
  EXPECT_EQ(back->stdout_bytes, 5000000000ULL);
  EXPECT_EQ(back->pid, 4242);
  EXPECT_EQ(back->started_at, r.started_at);
  EXPECT_EQ(back->ended_at, r.ended_at);
  EXPECT_EQ(back->cpu_s, 0.75);
  EXPECT_EQ(back->peak_memory_bytes, uint64_t{1} << 30);
  EXPECT_EQ(back->usage_from, "cgroup");

  RunResult bare;  // no usage known
  auto bare_back = RunResultFromJson(RunResultToJson(bare));
  ASSERT_TRUE(bare_back.ok());
  EXPECT_FALSE(bare_back->cpu_s.has_value());
  EXPECT_FALSE(bare_back->peak_memory_bytes.has_value());
}

TEST(RunResultCodec, ErrorsNameTheField) {
  json good = RunResultToJson(RunResult{});
  struct Case {
    const char* path;
    json value;
    const char* error;
  };
  const Case cases[] = {
      {"/outcome/kind", "exploded",
       "run result's outcome field 'kind' is not an outcome: 'exploded'"},
      {"/outcome/signal", "9", "run result's outcome field 'signal' must be an integer"},
      {"/perf/valids", 1.5, "run result's perf field 'valids' must be an integer"},
      {"/perf/top", json::object(), "run result's perf field 'top' must be an array"},
      {"/perf/top", json::array({{{"name", 3}}}),
       "run result's perf.top[0] field 'name' must be a string"},
      {"/stdout_bytes", -1, "run result field 'stdout_bytes' must not be negative"},
      {"/elapsed_s", "1", "run result field 'elapsed_s' must be a number"},
  };
  for (const auto& c : cases) {
    json j = good;
    j[json::json_pointer(c.path)] = c.value;
    auto r = RunResultFromJson(j);
    ASSERT_FALSE(r.ok()) << c.path;
    EXPECT_EQ(r.error(), c.error) << c.path;
  }
  json no_outcome = good;
  no_outcome.erase("outcome");
  EXPECT_EQ(RunResultFromJson(no_outcome).error(), "run result field 'outcome' is missing");
  EXPECT_EQ(RunResultFromJson(json::array()).error(), "run result must be an object");
}

// Where a remote run ran is stored with its result and read back as the result's placement and
// GPU; a result stored by an earlier release (its Slurm executor's "slurm" object) reads the same.
TEST(TaskResultCodec, PlacementIsReadBackAlsoFromAnEarlierReleasesSlurmObject) {
  RunResult r;
  r.outcome.kind = Outcome::Kind::kSucceeded;
  r.placement = Placement{"slurm", 4242, "COMPLETED", "node7", "3"};
  TaskRecord t;
  t.state = TaskState::kSucceeded;
  t.result = ResultJson(r.outcome, "ckProfiler ...", 0, &r);
  TaskResult now = TaskResultFromRecord(t, false);
  ASSERT_TRUE(now.placement.has_value()) << t.result;
  EXPECT_EQ(now.placement->executor, "slurm");
  EXPECT_EQ(now.placement->job_id, 4242);
  EXPECT_EQ(now.placement->state, "COMPLETED");
  EXPECT_EQ(now.placement->node, "node7");
  EXPECT_EQ(now.gpu, 3);

  json earlier = json::parse(t.result);
  earlier.erase("placement");
  earlier["slurm"] = {{"job_id", 4242}, {"state", "COMPLETED"}, {"node", "node7"}, {"gpus", "3"}};
  t.result = earlier.dump();
  TaskResult then = TaskResultFromRecord(t, false);
  ASSERT_TRUE(then.placement.has_value()) << t.result;
  EXPECT_EQ(then.placement->executor, "slurm");
  EXPECT_EQ(then.placement->job_id, 4242);
  EXPECT_EQ(then.placement->node, "node7");
  EXPECT_EQ(then.gpu, 3);

  // A run here has none.
  RunResult local;
  local.outcome.kind = Outcome::Kind::kSucceeded;
  t.result = ResultJson(local.outcome, "ckProfiler ...", 1, &local);
  EXPECT_FALSE(TaskResultFromRecord(t, false).placement.has_value()) << t.result;
}

}  // namespace
}  // namespace ckprof

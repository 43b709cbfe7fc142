// Issue 19.3 end to end: `submit --repeat N` on a real ckprofd with two GPUs, one of them
// slower (the emulator's CKEMU_GPU_SLOWDOWN): each config runs N times, spread over the job's
// GPUs; `results` gives one row per config, the median of its runs with min, max and the
// coefficient of variation, noisy above the daemon's noise_threshold; `--runs` gives each run;
// `compare` shows the spread.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "common/json_util.h"
#include "common/repeats.h"
#include "tests/util/commands.h"
#include "tests/util/daemon_fixture.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"
#include "tests/util/requests.h"

namespace ckprof {
namespace {

using json = nlohmann::json;

class RepeatsTest : public testing::EmulatorDaemonTest {
 protected:
  void SetUp() override {
    EmulatorDaemonTest::SetUp();
    daemon_.ExpectCleanStop();
  }
  // Two GPUs; GPU 1 takes 1.5 times as long.
  void StartTwoGpus(const std::string& config_json = "") {
    auto o = EmulatorOptions("0-1", config_json);
    o.env.push_back("CKEMU_GPU_SLOWDOWN=1=1.5");
    o.env.push_back("CKEMU_TIME_SCALE=10");
    Start(o);
  }
  testing::CommandResult Ckprof(std::vector<std::string> args) {
    args.insert(args.begin(), {testing::BinPath("ckprof"), "--socket", daemon_.socket()});
    return testing::RunCommand(args, {}, dir_.path());
  }
  // Submits `configs` configs with `extra` options through the client; waits for the end.
  std::string SubmitAndWait(int configs, std::vector<std::string> extra) {
    const std::string file = dir_.File("configs.json");
    testing::WriteFile(file, testing::FwdConfigsText(configs));
    extra.insert(extra.begin(), {"submit", file});
    auto submitted = Ckprof(extra);
    EXPECT_EQ(submitted.exit_code, 0) << submitted.err;
    std::string job = submitted.out.substr(0, submitted.out.find('\n'));
    auto waited = Ckprof({"wait", job});
    EXPECT_EQ(waited.exit_code, 0) << waited.err;
    return job;
  }
  json ResultsJson(const std::string& job, bool runs) {
    std::vector<std::string> args = {"results", job, "--format", "json"};
    if (runs) args.push_back("--runs");
    auto r = Ckprof(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto j = ParseJson(r.out);
    return j.ok() ? (*j)["results"] : json::array();
  }
};

TEST_F(RepeatsTest, EachConfigRunsNTimesOverBothGpusAndItsResultIsTheMedian) {
  StartTwoGpus();
  const std::string job = SubmitAndWait(4, {"--repeat", "3"});
  const json runs = ResultsJson(job, true);
  const json merged = ResultsJson(job, false);
  ASSERT_EQ(runs.size(), 12u) << runs.dump(1);
  ASSERT_EQ(merged.size(), 4u) << merged.dump(1);

  // Each run: its config's position, run 1..3; the times of one config by GPU.
  std::map<int64_t, std::vector<double>> times;
  std::map<int64_t, std::set<int>> gpus;
  std::map<int64_t, std::set<int>> run_numbers;
  std::map<int, std::map<int64_t, double>> ms_on;  // GPU -> position -> ms
  for (const json& r : runs) {
    ASSERT_TRUE(r["success"].get<bool>()) << r.dump();
    const int64_t pos = r["position"].get<int64_t>();
    const int gpu = r["gpu"].get<int>();
    times[pos].push_back(r["avg_time_ms"].get<double>());
    gpus[pos].insert(gpu);
    run_numbers[pos].insert(r["run"].get<int>());
    ms_on[gpu][pos] = r["avg_time_ms"].get<double>();
    EXPECT_TRUE(r["repeats"].is_null());
  }
  std::set<int> all_gpus;
  int spread = 0;
  for (const auto& [pos, g] : gpus) {
    EXPECT_EQ(run_numbers[pos], (std::set<int>{1, 2, 3})) << "config #" << pos;
    all_gpus.insert(g.begin(), g.end());
    spread += g.size() > 1 ? 1 : 0;
  }
  EXPECT_EQ(all_gpus, (std::set<int>{0, 1}));
  // Runs 1 and 2 of the first config start at once, one per free GPU.
  EXPECT_GE(spread, 1);
  // The slower GPU's times are 1.5 times the other's, for a config measured on both.
  for (const auto& [pos, ms] : ms_on[0]) {
    if (ms_on[1].count(pos)) {
      EXPECT_NEAR(ms_on[1][pos] / ms, 1.5, 1e-3) << "config #" << pos;
    }
  }

  int noisy = 0;
  for (const json& m : merged) {
    const int64_t pos = m["position"].get<int64_t>();
    SCOPED_TRACE("config #" + std::to_string(pos));
    ASSERT_TRUE(m["repeats"].is_object()) << m.dump();
    const json& rep = m["repeats"];
    EXPECT_TRUE(m["run"].is_null());
    EXPECT_EQ(rep["runs"], 3);
    EXPECT_EQ(rep["succeeded"], 3);
    EXPECT_EQ(m["attempts"], 3);
    const std::vector<double>& t = times[pos];
    EXPECT_DOUBLE_EQ(m["avg_time_ms"].get<double>(), Median(t));
    EXPECT_DOUBLE_EQ(rep["median_ms"].get<double>(), Median(t));
    EXPECT_DOUBLE_EQ(rep["min_ms"].get<double>(), *std::min_element(t.begin(), t.end()));
    EXPECT_DOUBLE_EQ(rep["max_ms"].get<double>(), *std::max_element(t.begin(), t.end()));
    EXPECT_NEAR(rep["cv"].get<double>(), CoefficientOfVariation(t), 1e-9);
    EXPECT_DOUBLE_EQ(rep["noise_threshold"].get<double>(), 0.05);
    // On one GPU the emulator's times agree; across a 1.5x slower GPU they are far apart.
    const bool both = gpus[pos].size() > 1;
    EXPECT_EQ(rep["noisy"].get<bool>(), both);
    EXPECT_EQ(m["noisy"].get<bool>(), both);
    noisy += both ? 1 : 0;
  }
  EXPECT_EQ(noisy, spread);

  // The table: medians, runs, CV, noisy marked and explained.
  auto table = Ckprof({"results", job, "--format", "table"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("median ms"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("3/3"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("succeeded~"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("~ noisy"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("4 config(s), 3 runs each: 4 succeeded"), std::string::npos)
      << table.out;
  auto per_run = Ckprof({"results", job, "--format", "table", "--runs"});
  EXPECT_NE(per_run.out.find("#1 run 3"), std::string::npos) << per_run.out;

  // compare shows each side's spread.
  auto compared = Ckprof({"compare", job, job});
  EXPECT_EQ(compared.exit_code, 0) << compared.err;
  EXPECT_NE(compared.out.find(" ±"), std::string::npos) << compared.out;
  // Runs alike to the last digit: "±0%", never rounding noise such as "±1.76e-14%".
  if (spread < 4) {
    EXPECT_NE(compared.out.find(" ±0%"), std::string::npos) << compared.out;
  }
  EXPECT_EQ(compared.out.find("e-1"), std::string::npos) << compared.out;
  EXPECT_NE(compared.out.find("coefficient of variation"), std::string::npos) << compared.out;
  auto compared_json = Ckprof({"compare", job, job, "--json"});
  auto cj = ParseJson(compared_json.out);
  ASSERT_TRUE(cj.ok()) << compared_json.out;
  for (const json& row : (*cj)["rows"]) {
    EXPECT_EQ(row["a_runs"], 3);
    EXPECT_TRUE(row["within_spread"].get<bool>());
  }
}

TEST_F(RepeatsTest, TheDaemonsNoiseThresholdDecidesAndBadRepeatsAreRefused) {
  StartTwoGpus(R"({"noise_threshold": 1.0})");  // 100%: nothing here is that noisy
  const std::string job = SubmitAndWait(2, {"--repeat", "2"});
  const json merged = ResultsJson(job, false);
  ASSERT_EQ(merged.size(), 2u);
  for (const json& m : merged) {
    EXPECT_DOUBLE_EQ(m["repeats"]["noise_threshold"].get<double>(), 1.0);
    EXPECT_FALSE(m["noisy"].get<bool>()) << m.dump();
  }
  auto status = Ckprof({"status", job, "--json"});
  auto sj = ParseJson(status.out);
  ASSERT_TRUE(sj.ok() && (*sj)["jobs"].size() == 1) << status.out;
  sj = (*sj)["jobs"][0];  // the jobs named
  EXPECT_EQ((*sj)["repeat"], 2) << status.out;
  EXPECT_EQ((*sj)["total"], 4) << status.out;

  auto shown = Ckprof({"status", job});
  EXPECT_NE(shown.out.find("repeat: each config 2 times (2 configs, 4 runs)"), std::string::npos)
      << shown.out;

  const std::string file = dir_.File("configs.json");
  for (const char* bad : {"0", "-1", "1001", "two"}) {
    auto r = Ckprof({"submit", file, "--repeat", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--repeat must be an integer from 1 to 1000, got '" + std::string(bad)),
              std::string::npos)
        << r.err;
  }
  // The daemon checks too, for clients other than ours.
  auto refused = testing::SubmitContent(daemon_.socket(), testing::FwdConfigsText(1),
                                        [](SubmitOptions& s) { s.repeat = 0; });
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("repeat"), std::string::npos) << refused.error();
}

}  // namespace
}  // namespace ckprof

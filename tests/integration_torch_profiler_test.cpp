// tools/torch-conv-profiler through a real ckprofd, without a GPU: the same configs run once
// with the CK emulator and once with the PyTorch baseline profiler in its TORCH_CONV_FAKE_MS
// mode, pinned with CUDA_VISIBLE_DEVICES. ckprofd must parse the tool's output unchanged, each
// run must see exactly its task's GPU, and `ckprof compare` must pair the two jobs config by
// config. (The GPU run itself is the lead's, on the device machine.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/util/commands.h"
#include "tests/util/files.h"
#include "tests/util/launched_daemon.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using testing::BinPath;
using testing::CommandResult;
using testing::DataPath;
using testing::LaunchedDaemon;
using testing::RunCommand;
using testing::TempDir;

const std::string kScript = std::string(CKPROF_SOURCE_DIR) + "/tools/torch-conv-profiler";

TEST(TorchProfilerDaemonTest, CkJobAndTorchJobCompare) {
  TempDir dir;
  LaunchedDaemon daemon;
  daemon.ExpectCleanStop();
  LaunchedDaemon::Options o;
  o.dir = dir.path();
  o.gpus = "0-1";
  o.args = {"--pin-env", "CUDA_VISIBLE_DEVICES"};
  o.env = {"CKEMU_TIME_SCALE=0", "TORCH_CONV_FAKE_MS=0.05"};
  std::string error;
  ASSERT_TRUE(daemon.Start(o, &error)) << error;
  auto ckprof = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {BinPath("ckprof"), "--socket", daemon.socket()});
    return RunCommand(args, {}, dir.path());
  };

  const std::string input = DataPath("conv_repros_ir.json");
  std::string jobs[2];
  const std::string profilers[2] = {BinPath("ckprofiler-emu"), kScript};
  for (int i = 0; i < 2; ++i) {
    CommandResult sub = ckprof(
        {"submit", input, "--profiler-path", profilers[i], "--name", i == 0 ? "ck" : "torch"});
    ASSERT_EQ(sub.exit_code, 0) << sub.err;
    jobs[i] = sub.out.substr(0, sub.out.find('\n'));
  }
  for (const std::string& job : jobs) {
    CommandResult wait = ckprof({"wait", job});
    ASSERT_EQ(wait.exit_code, 0) << "job " << job << ": " << wait.out << wait.err;
  }

  // The torch job: every task parsed as CK output, on the GPU it was pinned to.
  CommandResult res = ckprof({"results", jobs[1], "--format", "json"});
  ASSERT_EQ(res.exit_code, 0) << res.err;
  json results = json::parse(res.out);
  ASSERT_EQ(results["stats"]["total"], 32);
  EXPECT_EQ(results["stats"]["success"], 32);
  std::set<int> gpus;
  for (const json& r : results["results"]) {
    EXPECT_EQ(r["avg_time_ms"], 0.05) << r["description"];
    EXPECT_EQ(r["best_instance"].get<std::string>().rfind("PyTorch_fake<", 0), 0u)
        << r["best_instance"];
    const int gpu = r["gpu"].get<int>();
    gpus.insert(gpu);
    const std::string out = r["stdout"].get<std::string>();
    EXPECT_NE(out.find(" CUDA_VISIBLE_DEVICES=" + std::to_string(gpu) + " device "),
              std::string::npos)
        << out.substr(0, 200);
  }
  EXPECT_EQ(gpus, (std::set<int>{0, 1}));

  // Both jobs, config by config.
  CommandResult cmp = ckprof({"compare", jobs[0], jobs[1], "--json"});
  ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
  json c = json::parse(cmp.out);
  EXPECT_EQ(c["a"]["label"], "job " + jobs[0] + " (ck)");
  EXPECT_EQ(c["b"]["label"], "job " + jobs[1] + " (torch)");
  EXPECT_EQ(c["summary"]["compared"], 32);
  EXPECT_EQ(c["summary"]["only_a"], 0);
  EXPECT_EQ(c["summary"]["only_b"], 0);
  for (const json& row : c["rows"]) {
    EXPECT_EQ(row["position_a"], row["position_b"]) << row["description"];
    EXPECT_NEAR(row["speedup"].get<double>(), row["a_ms"].get<double>() / 0.05, 1e-9);
  }
  CommandResult table = ckprof({"compare", jobs[0], jobs[1]});
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("Compared: 32 config(s)"), std::string::npos) << table.out;
}

}  // namespace
}  // namespace ckprof

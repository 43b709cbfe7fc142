#include "tests/util/emulator.h"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/json_util.h"
#include "tests/util/files.h"

namespace ckprof::testing {

CkConfig Conv3x3(ConvOp op, int64_t n, int64_t k, int64_t c, int64_t spatial) {
  CkConfig config;
  config.op = op;
  if (op == ConvOp::kFwd) config.index_type = 0;
  config.num_dim_spatial = 2;
  config.G = 1;
  config.N = n;
  config.K = k;
  config.C = c;
  config.filter_spatial = {3, 3};
  config.input_spatial = {spatial, spatial};
  config.strides = {1, 1};
  config.dilations = {1, 1};
  config.left_pads = {1, 1};
  config.right_pads = {1, 1};
  return config;
}

std::string FwdConfigsText(int n, int magic_n, int every, int64_t spatial) {
  std::vector<CkConfig> configs;
  for (int i = 1; i <= n; ++i) {
    CkConfig c =
        Conv3x3(ConvOp::kFwd, (magic_n && i % every == 0) ? magic_n : 2, 8 + i, 8, spatial);
    c.metadata["priority_rank"] = i;
    c.metadata["description"] = Describe(c);
    configs.push_back(c);
  }
  return ConfigsToText(configs);
}

std::vector<std::string> EmulatorArgv(int n) {
  std::vector<std::string> argv = {BinPath("ckprofiler-emu"),
                                   "grouped_conv_fwd",
                                   "1",
                                   "1",
                                   "0",
                                   "0",
                                   "1",
                                   "0",
                                   "1",
                                   "2",
                                   "1",
                                   std::to_string(n),
                                   "64",
                                   "32"};
  // 3x3 filter over 14x14, stride, dilation and padding 1.
  for (const char* a : {"3", "3", "14", "14", "1", "1", "1", "1", "1", "1", "1", "1"}) {
    argv.push_back(a);
  }
  return argv;
}

std::vector<EmuRun> ReadEmuRuns(const std::string& log_path) {
  std::vector<EmuRun> runs;
  std::map<std::pair<int, double>, size_t> index;  // (pid, start) -> runs[i]
  std::ifstream in(log_path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = ParseJson(line);
    if (!j.ok() || !j->is_object()) continue;
    const std::pair<int, double> key = {j->value("pid", 0), j->value("start", 0.0)};
    auto [it, added] = index.emplace(key, runs.size());
    if (added) runs.emplace_back();
    EmuRun& r = runs[it->second];
    r.pid = key.first;
    r.start = key.second;
    r.pgid = j->value("pgid", 0);
    r.uid = j->value("uid", -1);
    r.gid = j->value("gid", -1);
    r.argv = j->value("argv", std::vector<std::string>{});
    r.env.clear();
    const nlohmann::json env = j->value("env", nlohmann::json::object());
    for (const auto& [name, value] : env.items()) {
      if (value.is_string()) r.env[name] = value.get<std::string>();
    }
    auto gpu = r.env.find("HIP_VISIBLE_DEVICES");
    r.gpu = gpu == r.env.end() ? "" : gpu->second;
    if (j->value("event", "") == "end") {
      r.end = j->value("end", 0.0);
      r.outcome = j->value("outcome", "");
    }
  }
  return runs;
}

std::vector<EmuRun> WaitForEmuRuns(const std::string& log_path, size_t n, double timeout_s) {
  // The directory is watched: the log may not exist yet, and a write to it is a modify there.
  std::vector<EmuRun> runs;
  WaitInDir(
      std::filesystem::path(log_path).parent_path().string(), IN_MODIFY | IN_CREATE,
      [&] { return (runs = ReadEmuRuns(log_path)).size() >= n; }, timeout_s);
  return runs;
}

}  // namespace ckprof::testing

// Tests of `ckprof compare` on results files: the per-config table ranked by priority_rank, the
// speedups and their geometric mean, matching (by problem, description or position), configs on
// one side only or without a time, the JSON and CSV forms, and the errors a user meets.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/util/commands.h"
#include "tests/util/files.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using testing::BinPath;
using testing::CommandResult;
using testing::RunCommand;
using testing::TempDir;

// One entry of a profiler_results.json; avg_ms < 0: a failure.
json ResultJson(int64_t position, int64_t rank, const std::string& op,
                const std::string& description, double avg_ms, int stride = 1) {
  json r = {{"operation", "profile_grouped_conv_" + op},
            {"description", description},
            {"priority_rank", rank},
            {"success", avg_ms >= 0},
            {"returncode", avg_ms >= 0 ? 0 : 1},
            {"position", position},
            {"status", avg_ms >= 0 ? "succeeded" : "failed"},
            {"best_instance", avg_ms >= 0 ? json("Kernel<" + op + ">") : json(nullptr)},
            {"avg_time_ms", avg_ms >= 0 ? json(avg_ms) : json(nullptr)}};
  r["config"] = {{"operation_type", "profile_grouped_conv_" + op},
                 {"profiler_args",
                  {{"data_type", op == "bwd_weight" ? 5 : 2},  // bf16: CK's enums per operation
                   {"layout", op == "bwd_weight" ? 4 : 3},     // NCHW
                   {"num_dim_spatial", 2},
                   {"G", 1},
                   {"N", 10},
                   {"K", 64},
                   {"C", 64},
                   {"filter_spatial", {3, 3}},
                   {"input_spatial", {56, 56}},
                   {"strides", {stride, stride}},
                   {"dilations", {1, 1}},
                   {"left_pads", {1, 1}},
                   {"right_pads", {1, 1}}}}};
  return r;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class CompareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // ck.json: five configs; torch.json: the same problems in another order, one config of
    // its own, one of ck.json's missing. Two configs share a description (strides differ).
    json a = json::array({
        ResultJson(1, 1, "fwd", "Forward conv: problem one", 1.0),
        ResultJson(2, 2, "bwd_data", "Backward data conv: problem two", 2.0),
        ResultJson(3, 3, "bwd_weight", "Backward weight conv: problem three", 0.5),
        ResultJson(4, 4, "fwd", "Forward conv: problem four", -1),  // failed on A
        ResultJson(5, 5, "fwd", "Forward conv: only in ck", 1.0),
        ResultJson(6, 6, "fwd", "Forward conv: same words", 3.0, /*stride=*/1),
        ResultJson(7, 7, "fwd", "Forward conv: same words", 1.5, /*stride=*/2),
    });
    json b = json::array({
        ResultJson(1, 7, "fwd", "Forward conv: same words", 0.5, /*stride=*/2),      // speedup 3
        ResultJson(2, 3, "bwd_weight", "Backward weight conv: problem three", 2.0),  // 0.25
        ResultJson(3, 1, "fwd", "Forward conv: problem one", 0.5),                   // 2
        ResultJson(4, 2, "bwd_data", "Backward data conv: problem two", 0.5),        // 4
        ResultJson(5, 4, "fwd", "Forward conv: problem four", 1.0),
        ResultJson(6, 6, "fwd", "Forward conv: same words", 3.0, /*stride=*/1),  // 1: a tie
        ResultJson(7, 8, "bwd_data", "Backward data conv: only in torch", 1.0),
    });
    testing::WriteFile(dir_.File("ck.json"),
                       json({{"timestamp", "2026-01-19T05:48:00"}, {"results", a}}).dump(2));
    testing::WriteFile(dir_.File("torch.json"), json({{"results", b}}).dump(2));
  }

  CommandResult Ckprof(std::vector<std::string> args) {
    args.insert(args.begin(), BinPath("ckprof"));
    return RunCommand(args, {"CKPROF_SOCKET=" + dir_.File("no-daemon.sock")}, dir_.path());
  }

  TempDir dir_;
};

TEST_F(CompareTest, TableRanksConfigsAndSummarizes) {
  CommandResult r = Ckprof({"compare", "ck.json", "torch.json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_GE(lines.size(), 14u) << r.out;
  EXPECT_EQ(lines[0], "A: ck.json: data type bf16, layout nchw");
  EXPECT_EQ(lines[1], "B: torch.json: data type bf16, layout nchw");
  EXPECT_EQ(r.err, "");  // the same types and layouts: no warning
  EXPECT_EQ(lines[2], "speedup = A ms / B ms (above 1: B is faster)");
  EXPECT_TRUE(Contains(lines[4], "ck.json ms")) << lines[4];
  EXPECT_TRUE(Contains(lines[4], "torch.json ms")) << lines[4];
  // Rows, ranked by priority_rank: A's time, B's time, speedup, the faster side.
  struct Row {
    const char* rank;
    const char* problem;
    const char* a_ms;
    const char* b_ms;
    const char* speedup;
    const char* faster;
  } rows[] = {
      {"1", "problem one", "1", "0.5", "2x", "torch.json"},
      {"2", "problem two", "2", "0.5", "4x", "torch.json"},
      {"3", "problem three", "0.5", "2", "0.25x", "ck.json"},
      {"4", "problem four", "failed", "1", "-", "not compared"},
      {"5", "only in ck", "1", "-", "-", "only in ck.json"},
      {"6", "same words", "3", "3", "1x", "tie"},
      {"7", "same words", "1.5", "0.5", "3x", "torch.json"},
      {"8", "only in torch", "-", "1", "-", "only in torch.json"},
  };
  for (size_t i = 0; i < std::size(rows); ++i) {
    const Row& w = rows[i];
    std::istringstream line(lines[5 + i]);
    std::string rank, op;
    line >> rank >> op;
    EXPECT_EQ(rank, w.rank) << lines[5 + i];
    EXPECT_TRUE(Contains(lines[5 + i], w.problem)) << lines[5 + i];
    // The columns after the problem.
    const size_t at = lines[5 + i].find(w.problem);
    ASSERT_NE(at, std::string::npos) << lines[5 + i];
    std::istringstream rest(lines[5 + i].substr(at + std::string(w.problem).size()));
    std::string a_ms, b_ms, speedup, faster;
    rest >> a_ms >> b_ms >> speedup;
    std::getline(rest >> std::ws, faster);
    EXPECT_EQ(a_ms, w.a_ms) << lines[5 + i];
    EXPECT_EQ(b_ms, w.b_ms) << lines[5 + i];
    EXPECT_EQ(speedup, w.speedup) << lines[5 + i];
    EXPECT_EQ(faster, w.faster) << lines[5 + i];
  }
  // Speedups 2, 4, 0.25, 1, 3: geometric mean 6^(1/5) = 1.431.
  EXPECT_TRUE(Contains(r.out, "\nCompared: 5 config(s) that succeeded on both sides\n")) << r.out;
  EXPECT_TRUE(Contains(r.out,
                       "Geometric mean speedup (A ms / B ms): 1.431x (torch.json faster "
                       "on average)\n"))
      << r.out;
  EXPECT_TRUE(Contains(r.out, "Faster: ck.json 1, torch.json 3, ties 1\n")) << r.out;
  EXPECT_TRUE(Contains(r.out,
                       "Not compared: 1 without a time in ck.json, 0 without a time in "
                       "torch.json, 1 only in ck.json, 1 only in torch.json\n"))
      << r.out;
}

// The table fits the terminal (COLUMNS where stdout is no terminal): the problem gives way,
// the numbers do not; --wide cuts nothing.
TEST_F(CompareTest, TableFitsTheWidthAndWideCutsNothing) {
  const std::string problem =
      "G=1, N=256, K=1024, C=1024, [3, 3] kernel, [112, 112] input, stride [2, 2], dilation [1, 1]";
  testing::WriteFile(
      dir_.File("a.json"),
      json::array({ResultJson(1, 1, "fwd", "Forward conv: " + problem, 1.25)}).dump());
  testing::WriteFile(
      dir_.File("b.json"),
      json::array({ResultJson(1, 1, "fwd", "Forward conv: " + problem, 0.5)}).dump());
  CommandResult fitted =
      RunCommand({BinPath("ckprof"), "compare", "a.json", "b.json"}, {"COLUMNS=80"}, dir_.path());
  ASSERT_EQ(fitted.exit_code, 0) << fitted.err;
  const std::vector<std::string> lines = Lines(fitted.out);
  ASSERT_GE(lines.size(), 6u) << fitted.out;
  for (size_t i = 4; i < 6; ++i) EXPECT_LE(lines[i].size(), 80u) << lines[i];
  EXPECT_TRUE(Contains(lines[5], "...")) << lines[5];
  EXPECT_TRUE(Contains(lines[5], "1.25")) << lines[5];
  EXPECT_TRUE(Contains(lines[5], "2.5x")) << lines[5];
  CommandResult wide = RunCommand({BinPath("ckprof"), "compare", "a.json", "b.json", "--wide"},
                                  {"COLUMNS=80"}, dir_.path());
  ASSERT_EQ(wide.exit_code, 0) << wide.err;
  EXPECT_TRUE(Contains(wide.out, problem)) << wide.out;
  // Piped without COLUMNS: nothing is cut either.
  CommandResult piped =
      RunCommand({BinPath("ckprof"), "compare", "a.json", "b.json"}, {"COLUMNS="}, dir_.path());
  EXPECT_TRUE(Contains(piped.out, problem)) << piped.out;
}

TEST_F(CompareTest, JsonHasExactNumbers) {
  CommandResult r = Ckprof({"compare", "ck.json", "torch.json", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["a"]["name"], "ck.json");
  EXPECT_TRUE(j["a"]["job_id"].is_null());
  const json& s = j["summary"];
  EXPECT_EQ(s["compared"], 5);
  EXPECT_NEAR(s["geomean_speedup"].get<double>(), std::pow(6.0, 1.0 / 5), 1e-12);
  EXPECT_EQ(s["a_faster"], 1);
  EXPECT_EQ(s["b_faster"], 3);
  EXPECT_EQ(s["ties"], 1);
  EXPECT_EQ(s["a_without_time"], 1);
  EXPECT_EQ(s["b_without_time"], 0);
  EXPECT_EQ(s["only_a"], 1);
  EXPECT_EQ(s["only_b"], 1);
  const json& rows = j["rows"];
  ASSERT_EQ(rows.size(), 8u);
  EXPECT_EQ(rows[0]["priority_rank"], 1);
  EXPECT_EQ(rows[0]["speedup"], 2.0);
  EXPECT_EQ(rows[0]["faster"], "b");
  EXPECT_EQ(rows[0]["a_best"], "Kernel<fwd>");
  EXPECT_EQ(rows[2]["faster"], "a");
  EXPECT_EQ(rows[3]["a_status"], "failed");
  EXPECT_TRUE(rows[3]["speedup"].is_null());
  // Same description, different strides: paired by problem, not by order.
  EXPECT_EQ(rows[6]["position_a"], 7);
  EXPECT_EQ(rows[6]["position_b"], 1);
  EXPECT_EQ(rows[6]["speedup"], 3.0);
  EXPECT_FALSE(rows[7]["matched"]);
  EXPECT_TRUE(rows[7]["a_ms"].is_null());
}

TEST_F(CompareTest, WithoutConfigsDuplicatesPairByPosition) {
  // The original tool's results: no config, no position key (the index counts).
  json a = json::array({ResultJson(1, 1, "fwd", "Forward conv: twin", 1.0),
                        ResultJson(2, 2, "fwd", "Forward conv: twin", 4.0)});
  json b = json::array({ResultJson(1, 1, "fwd", "Forward conv: twin", 2.0),
                        ResultJson(2, 2, "fwd", "Forward conv: twin", 1.0)});
  for (json* side : {&a, &b}) {
    for (json& r : *side) {
      r.erase("config");
      r.erase("position");
    }
  }
  testing::WriteFile(dir_.File("a.json"), json({{"results", a}}).dump());
  testing::WriteFile(dir_.File("b.json"), json({{"results", b}}).dump());
  CommandResult r = Ckprof({"compare", "a.json", "b.json", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["speedup"], 0.5);
  EXPECT_EQ(j["rows"][1]["speedup"], 4.0);
  EXPECT_NEAR(j["summary"]["geomean_speedup"].get<double>(), std::sqrt(2.0), 1e-12);
}

TEST_F(CompareTest, CsvHasOneRowPerConfig) {
  CommandResult r = Ckprof({"compare", "ck.json", "torch.json", "--format", "csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 9u) << r.out;
  EXPECT_EQ(lines[0],
            "priority_rank,operation,description,a_ms,b_ms,speedup,faster,a_status,b_status,"
            "a_best,b_best");
  EXPECT_EQ(lines[1],
            "1,fwd,Forward conv: problem one,1,0.5,2,b,succeeded,succeeded,"
            "Kernel<fwd>,Kernel<fwd>");
}

TEST_F(CompareTest, NothingInCommonStillReports) {
  testing::WriteFile(dir_.File("empty.json"), R"({"results": []})");
  CommandResult r = Ckprof({"compare", "ck.json", "empty.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "Geometric mean speedup: - (no config succeeded on both sides)"))
      << r.out;
  EXPECT_TRUE(Contains(r.out, "7 only in ck.json, 0 only in empty.json")) << r.out;
}

TEST_F(CompareTest, ErrorsNameTheProblem) {
  // A missing file: exit 1, the file named.
  CommandResult missing = Ckprof({"compare", "ck.json", "nope.json"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(Contains(missing.err, "nope.json")) << missing.err;
  EXPECT_EQ(missing.out, "");
  // Not JSON, or JSON without results: exit 1, the file named.
  testing::WriteFile(dir_.File("bad.json"), "{not json");
  testing::WriteFile(dir_.File("configs.json"), R"({"something": 1})");
  CommandResult bad = Ckprof({"compare", "bad.json", "ck.json"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(Contains(bad.err, "bad.json: not valid JSON")) << bad.err;
  CommandResult no_results = Ckprof({"compare", "configs.json", "ck.json"});
  EXPECT_EQ(no_results.exit_code, 1);
  EXPECT_TRUE(Contains(no_results.err, "configs.json: no \"results\" array")) << no_results.err;
  // Usage errors: exit 2.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"compare", "ck.json"},
           {"compare", "ck.json", "torch.json", "--format", "xml"},
           {"compare", "ck.json", "torch.json", "--bogus"},
           {"compare", "0", "ck.json"},
           {"compare", "ck.json", "torch.json", "--json", "--format", "csv"}}) {
    CommandResult r = Ckprof(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.err;
    EXPECT_TRUE(Contains(r.err, "ckprof compare")) << r.err;
  }
  // A job id with no daemon: the client's "unreachable" exit, the socket named.
  CommandResult job = Ckprof({"compare", "12", "ck.json"});
  EXPECT_EQ(job.exit_code, 2) << job.err;
  EXPECT_TRUE(Contains(job.err, "no-daemon.sock")) << job.err;
}

TEST_F(CompareTest, HelpHasAnExample) {
  CommandResult r = Ckprof({"compare", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.out, "ckprof compare 12 13")) << r.out;
  CommandResult top = Ckprof({"--help"});
  EXPECT_TRUE(Contains(top.out, "  compare ")) << top.out;
}

// Issue 17.21: each side's data type and layout are shown, and a difference is warned about.
TEST_F(CompareTest, ShowsEachSidesDataTypeAndLayoutAndWarnsWhenTheyDiffer) {
  json a = json::array({ResultJson(1, 1, "fwd", "Forward conv: one", 1.0),
                        ResultJson(2, 2, "bwd_weight", "Backward weight conv: two", 2.0)});
  json b = a;
  // B: fp16 (1 for every operation) and channels-last (1 for fwd, 2 for bwd_weight).
  b[0]["config"]["profiler_args"]["data_type"] = 1;
  b[0]["config"]["profiler_args"]["layout"] = 1;
  b[1]["config"]["profiler_args"]["data_type"] = 1;
  b[1]["config"]["profiler_args"]["layout"] = 2;
  testing::WriteFile(dir_.File("bf16.json"), json({{"results", a}}).dump());
  testing::WriteFile(dir_.File("fp16.json"), json({{"results", b}}).dump());
  CommandResult r = Ckprof({"compare", "bf16.json", "fp16.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[0], "A: bf16.json: data type bf16, layout nchw");
  EXPECT_EQ(lines[1], "B: fp16.json: data type fp16, layout nhwc");
  EXPECT_EQ(r.err,
            "ckprof compare: warning: A and B differ in data type (A: bf16; B: fp16) and layout "
            "(A: nchw; B: nhwc), in 2 of the 2 matched configs: their speedups compare different "
            "problems\n");
  CommandResult j = Ckprof({"compare", "bf16.json", "fp16.json", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  json doc = json::parse(j.out);
  EXPECT_EQ(doc["a"]["data_type"], "bf16");
  EXPECT_EQ(doc["b"]["layout"], "nhwc");
  ASSERT_EQ(doc["warnings"].size(), 1u);
  EXPECT_EQ(doc["rows"][0]["a_data_type"], "bf16");
  EXPECT_EQ(doc["rows"][0]["b_data_type"], "fp16");
  EXPECT_EQ(doc["rows"][1]["a_layout"], "nchw");
  EXPECT_EQ(doc["rows"][1]["b_layout"], "nhwc");
  // A mixed side is counted; files without configs say "unknown" and warn of nothing.
  b[0]["config"]["profiler_args"]["data_type"] = 2;
  testing::WriteFile(dir_.File("mixed.json"), json({{"results", b}}).dump());
  CommandResult mixed = Ckprof({"compare", "mixed.json", "fp16.json"});
  EXPECT_EQ(Lines(mixed.out)[0], "A: mixed.json: data type bf16 (1), fp16 (1), layout nhwc");
  EXPECT_NE(mixed.err.find("in 1 of the 2 matched configs"), std::string::npos) << mixed.err;
  for (json* side : {&a, &b}) {
    for (json& e : *side) e.erase("config");
  }
  testing::WriteFile(dir_.File("a.json"), json({{"results", a}}).dump());
  testing::WriteFile(dir_.File("b.json"), json({{"results", b}}).dump());
  CommandResult unknown = Ckprof({"compare", "a.json", "b.json"});
  EXPECT_EQ(Lines(unknown.out)[0], "A: a.json: data type unknown, layout unknown");
  EXPECT_EQ(unknown.err, "");
}

}  // namespace
}  // namespace ckprof

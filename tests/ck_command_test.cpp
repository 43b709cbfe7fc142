// Tests of profiler resolution and command building: the exact argv ck-profiler.md describes,
// for every operation and dimensionality, in both profiler forms; rejections name the field.
#include "common/ck_command.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/profiler_path.h"
#include "tests/util/files.h"

namespace ckprof {
namespace {

using Json = nlohmann::ordered_json;
using Args = std::vector<std::string>;

CkConfig MakeConfig(ConvOp op, int nd) {
  CkConfig c;
  c.op = op;
  c.data_type = 1;
  c.layout = op == ConvOp::kBwdWeight ? 4 : 3;
  if (op == ConvOp::kFwd) c.index_type = 0;
  c.num_dim_spatial = nd;
  c.G = 2;
  c.N = 8;
  c.K = 16;
  c.C = 32;
  for (int d = 0; d < nd; ++d) {
    c.filter_spatial.push_back(3);
    c.input_spatial.push_back(20 + d);
    c.strides.push_back(1 + d);
    c.dilations.push_back(1);
    c.left_pads.push_back(1);
    c.right_pads.push_back(d);
  }
  if (op != ConvOp::kFwd) c.split_k = "all";
  c.metadata["priority_rank"] = 7;
  return c;
}

ProfilerTarget CkProfilerAt(const std::string& path) {
  ProfilerTarget t;
  t.form = ProfilerTarget::Form::kCkProfiler;
  t.path = path;
  return t;
}

ProfilerTarget PerOpIn(const std::string& dir) {
  ProfilerTarget t;
  t.form = ProfilerTarget::Form::kPerOpExecutables;
  t.path = dir;
  return t;
}

TEST(BuildCommand, EveryOperationAndDimension) {
  struct {
    ConvOp op;
    int nd;
    Args expected_args;
  } cases[] = {
      {ConvOp::kFwd,
       1,
       {"1", "3", "0", "0", "1", "0", "1", "1", "2", "8", "16", "32", "3", "20", "1", "1", "1",
        "0"}},
      {ConvOp::kFwd, 2, {"1", "3", "0",  "0",  "1", "0", "1", "2", "2", "8", "16", "32",
                         "3", "3", "20", "21", "1", "2", "1", "1", "1", "1", "0",  "1"}},
      {ConvOp::kFwd, 3, {"1",  "3",  "0", "0", "1", "0",  "1",  "3",  "2", "8",
                         "16", "32", "3", "3", "3", "20", "21", "22", "1", "2",
                         "3",  "1",  "1", "1", "1", "1",  "1",  "0",  "1", "2"}},
      {ConvOp::kBwdData,
       1,
       {"1", "3", "0", "1", "0", "1", "1", "2", "8", "16", "32", "3", "20", "1", "1", "1", "0",
        "-1"}},
      {ConvOp::kBwdData, 2, {"1", "3",  "0",  "1", "0", "1", "2", "2", "8", "16", "32", "3",
                             "3", "20", "21", "1", "2", "1", "1", "1", "1", "0",  "1",  "-1"}},
      {ConvOp::kBwdData, 3, {"1",  "3", "0", "1", "0",  "1",  "3",  "2", "8", "16",
                             "32", "3", "3", "3", "20", "21", "22", "1", "2", "3",
                             "1",  "1", "1", "1", "1",  "1",  "0",  "1", "2", "-1"}},
      {ConvOp::kBwdWeight,
       1,
       {"1", "4", "0", "1", "0", "1", "1", "2", "8", "16", "32", "3", "20", "1", "1", "1", "0",
        "all"}},
      {ConvOp::kBwdWeight, 2, {"1", "4",  "0",  "1", "0", "1", "2", "2", "8", "16", "32", "3",
                               "3", "20", "21", "1", "2", "1", "1", "1", "1", "0",  "1",  "all"}},
      {ConvOp::kBwdWeight, 3, {"1",  "4", "0", "1", "0",  "1",  "3",  "2", "8", "16",
                               "32", "3", "3", "3", "20", "21", "22", "1", "2", "3",
                               "1",  "1", "1", "1", "1",  "1",  "0",  "1", "2", "all"}},
  };
  for (const auto& c : cases) {
    const CkConfig config = MakeConfig(c.op, c.nd);
    const std::string name = std::string(ShortOpName(c.op)) + " " + std::to_string(c.nd) + "d";
    // CK's argc: 10 + 4 + 6*nd counting argv[0] and the operation.
    EXPECT_EQ(c.expected_args.size() + 2, 14u + 6 * c.nd) << name;

    auto ck = BuildCommand(CkProfilerAt("/opt/ck/bin/ckProfiler"), config);
    ASSERT_TRUE(ck.ok()) << name << ": " << ck.error();
    Args expected = {"/opt/ck/bin/ckProfiler", std::string(CkOperationName(c.op))};
    expected.insert(expected.end(), c.expected_args.begin(), c.expected_args.end());
    EXPECT_EQ(*ck, expected) << name;

    auto per_op = BuildCommand(PerOpIn("/ck/build/bin"), config);
    ASSERT_TRUE(per_op.ok()) << name << ": " << per_op.error();
    expected = {"/ck/build/bin/" + std::string(OperationTypeName(c.op))};
    expected.insert(expected.end(), c.expected_args.begin(), c.expected_args.end());
    EXPECT_EQ(*per_op, expected) << name;
  }
}

TEST(BuildCommand, SplitKAndIndexType) {
  CkConfig c = MakeConfig(ConvOp::kBwdData, 2);
  c.split_k = "4";
  EXPECT_EQ(BuildProfilerArgs(c)->back(), "4");
  c.split_k = "";  // unset means "all": -1 for bwd_data
  EXPECT_EQ(BuildProfilerArgs(c)->back(), "-1");
  c.split_k = "four";
  auto bad = BuildProfilerArgs(c);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(),
            "config (rank 7) profile_grouped_conv_bwd_data: field split_k must be \"all\" or an "
            "integer >= -1, got \"four\"");

  CkConfig w = MakeConfig(ConvOp::kBwdWeight, 2);
  w.split_k = "-1";
  EXPECT_EQ(BuildProfilerArgs(w)->back(), "-1");

  CkConfig f = MakeConfig(ConvOp::kFwd, 2);
  f.index_type = 1;
  EXPECT_EQ((*BuildProfilerArgs(f))[2], "1");
  f.split_k = "8";  // ignored: fwd takes no split_k
  EXPECT_EQ(BuildProfilerArgs(f)->size(), 8u + 4 + 12);
}

TEST(BuildCommand, RejectsListsThatDoNotMatchNumDimSpatial) {
  CkConfig c = MakeConfig(ConvOp::kFwd, 2);
  c.dilations = {1, 1, 1};
  auto r = BuildCommand(CkProfilerAt("/ck"), c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(),
            "config (rank 7) profile_grouped_conv_fwd: field dilations has 3 entries but "
            "num_dim_spatial is 2");
  c = MakeConfig(ConvOp::kFwd, 2);
  c.num_dim_spatial = 4;
  r = BuildCommand(CkProfilerAt("/ck"), c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(),
            "config (rank 7) profile_grouped_conv_fwd: field num_dim_spatial must be 1, 2 or 3, "
            "got 4");
}

Json FwdJson() {
  return Json::parse(R"({"operation_type": "grouped_conv_fwd",
 "profiler_args": {"data_type": 1, "layout": 3, "index_type": 0, "verify": 0, "init": 1, "log": 0,
   "time": 1, "num_dim_spatial": 2, "G": 32, "N": 32, "K": 4, "C": 4, "filter_spatial": [3, 3],
   "input_spatial": [200, 200], "strides": [1, 1], "dilations": [1, 1], "left_pads": [1, 1],
   "right_pads": [1, 1]}, "metadata": {"priority_rank": 1}})");
}

TEST(BuildCommandFromJson, PrefixOptionalAndErrorsNameConfigAndField) {
  const std::string expected =
      "./build/bin/ckProfiler grouped_conv_fwd 1 3 0 0 1 0 1 2 32 32 4 4 3 3 200 200 1 1 1 1 1 1 "
      "1 1";  // conversion.md's example
  Json j = FwdJson();
  auto a = BuildCommandFromJson(CkProfilerAt("./build/bin/ckProfiler"), j, 0);
  ASSERT_TRUE(a.ok()) << a.error();
  EXPECT_EQ(FormatCommandLine(*a), expected);
  j["operation_type"] = "profile_grouped_conv_fwd";
  a = BuildCommandFromJson(CkProfilerAt("./build/bin/ckProfiler"), j, 0);
  ASSERT_TRUE(a.ok()) << a.error();
  EXPECT_EQ(FormatCommandLine(*a), expected);

  j["profiler_args"]["G"] = 2.5;
  a = BuildCommandFromJson(CkProfilerAt("/ck"), j, 3);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error(), "config 4: field profiler_args.G must be an integer, got 2.5");

  j = FwdJson();
  j["profiler_args"]["strides"] = {1, 1, 1};
  a = BuildCommandFromJson(CkProfilerAt("/ck"), j, 4);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error(),
            "config 5: field profiler_args.strides has 3 entries but num_dim_spatial is 2");

  j = FwdJson();
  j["profiler_args"]["left_pads"] = {1, "1"};
  a = BuildCommandFromJson(CkProfilerAt("/ck"), j, 5);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error(), "config 6: field profiler_args.left_pads must hold integers, got \"1\"");
}

TEST(FormatCommandLine, QuotesOnlyWhereNeeded) {
  EXPECT_EQ(FormatCommandLine({"/a/ckProfiler", "grouped_conv_fwd", "1", "-1", "all"}),
            "/a/ckProfiler grouped_conv_fwd 1 -1 all");
  EXPECT_EQ(FormatCommandLine({"/my dir/ck", "it's", "", "a*b", "x=1,2"}),
            "'/my dir/ck' 'it'\\''s' '' 'a*b' x=1,2");
}

void MakeExecutable(const std::string& path) {
  testing::WriteFile(path, "#!/bin/sh\nexit 0\n");
  ASSERT_EQ(chmod(path.c_str(), 0755), 0);
}

TEST(ResolveProfiler, FindsEachFormOrSaysWhatWasLookedFor) {
  testing::TempDir dir;
  // Nothing there.
  auto r = ResolveProfiler(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "no CK profiler in " + dir.path() + ": looked for " + dir.path() +
                           "/ckProfiler and " + dir.path() +
                           "/profile_grouped_conv_{fwd,bwd_data,bwd_weight} (executable files)");
  // A missing path.
  r = ResolveProfiler(dir.File("nope"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find(dir.File("nope") + ": No such file or directory"), std::string::npos)
      << r.error();
  // A file that is not executable.
  testing::WriteFile(dir.File("plain"), "x");
  r = ResolveProfiler(dir.File("plain"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("is not executable"), std::string::npos) << r.error();

  // Per-operation executables, some missing.
  MakeExecutable(dir.File("profile_grouped_conv_fwd"));
  MakeExecutable(dir.File("profile_grouped_conv_bwd_weight"));
  r = ResolveProfiler(dir.path() + "/");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->form, ProfilerTarget::Form::kPerOpExecutables);
  EXPECT_EQ(r->path, dir.path());
  EXPECT_EQ(r->Describe(), "per-operation executables in " + dir.path() +
                               " (profile_grouped_conv_fwd, profile_grouped_conv_bwd_weight; "
                               "missing profile_grouped_conv_bwd_data)");
  auto cmd = BuildCommand(*r, MakeConfig(ConvOp::kBwdData, 2));
  ASSERT_FALSE(cmd.ok());
  EXPECT_NE(cmd.error().find("has no profile_grouped_conv_bwd_data"), std::string::npos);
  cmd = BuildCommand(*r, MakeConfig(ConvOp::kFwd, 2));
  ASSERT_TRUE(cmd.ok());
  EXPECT_EQ((*cmd)[0], dir.File("profile_grouped_conv_fwd"));
  // One per-operation executable given directly resolves to its directory.
  r = ResolveProfiler(dir.File("profile_grouped_conv_fwd"));
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->form, ProfilerTarget::Form::kPerOpExecutables);

  // ckProfiler in the directory wins.
  MakeExecutable(dir.File("ckProfiler"));
  r = ResolveProfiler(dir.path());
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->form, ProfilerTarget::Form::kCkProfiler);
  EXPECT_EQ(r->path, dir.File("ckProfiler"));
  EXPECT_EQ(r->Describe(), "ckProfiler " + dir.File("ckProfiler"));

  // Any executable file is taken as ckProfiler; a symlink keeps its own name (argv[0]).
  ASSERT_EQ(symlink(testing::BinPath("ckprofiler-emu").c_str(), dir.File("ck-link").c_str()), 0);
  r = ResolveProfiler(dir.File("ck-link"));
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->form, ProfilerTarget::Form::kCkProfiler);
  EXPECT_EQ(r->path, dir.File("ck-link"));

  // Relative paths become absolute.
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(chdir(dir.path().c_str()), 0);
  r = ResolveProfiler("./ckProfiler");
  ASSERT_EQ(chdir(cwd), 0);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->path, dir.File("ckProfiler"));
}

}  // namespace
}  // namespace ckprof

// Tests of tools/torch-conv-profiler that need no GPU and no PyTorch: CK's command line (argument
// counts with CK's help text, enums, std::stoi aborts, unknown operations, links named like CK's
// executables) checked before torch is imported, the one-line error without torch, and — through
// the TORCH_CONV_FAKE_MS test hook — CK's output format, fed to our own CK output parser.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "common/ck_output.h"
#include "tests/util/commands.h"
#include "tests/util/files.h"

namespace ckprof {
namespace {

using testing::BinPath;
using testing::CommandResult;
using testing::RunCommand;
using testing::TempDir;

const std::string kScript = std::string(CKPROF_SOURCE_DIR) + "/tools/torch-conv-profiler";
constexpr const char* kTorchImported = "FAKE TORCH IMPORTED";

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class TorchProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A `torch` package that announces its import and exits 99: the argument checks must
    // finish before the script imports torch, whether or not a real torch is installed.
    ASSERT_EQ(mkdir(fake_torch_.File("torch").c_str(), 0755), 0);
    testing::WriteFile(
        fake_torch_.File("torch/__init__.py"),
        std::string("import sys\nsys.stderr.write('") + kTorchImported + "\\n')\nsys.exit(99)\n");
  }

  // Runs the script with python3 and CK's argv layout (operation first); `args` split on spaces.
  CommandResult Run(const std::string& args, std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {"python3", kScript};
    for (auto& a : Split(args)) argv.push_back(a);
    return RunWith(argv, std::move(env));
  }

  CommandResult RunWith(const std::vector<std::string>& argv, std::vector<std::string> env) {
    env.push_back("PYTHONPATH=" + fake_torch_.path());
    bool fake_ms_given = false;
    for (const auto& e : env)
      fake_ms_given = fake_ms_given || e.rfind("TORCH_CONV_FAKE_MS=", 0) == 0;
    if (!fake_ms_given) env.push_back("TORCH_CONV_FAKE_MS=");
    return RunCommand(argv, env);
  }

  CommandResult Fake(const std::string& args, const std::string& ms = "0.5") {
    return Run(args, {"TORCH_CONV_FAKE_MS=" + ms, "CUDA_VISIBLE_DEVICES=1"});
  }

  TempDir fake_torch_;
};

TEST_F(TorchProfilerTest, NoArgumentsListsTheOperations) {
  CommandResult r = Run("");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* op : {"grouped_conv_fwd: Grouped Convolution Forward",
                         "grouped_conv_bwd_data: Grouped Convolution Backward Data",
                         "grouped_conv_bwd_weight: Grouped Convolution Backward Weight"}) {
    EXPECT_TRUE(Contains(r.out, op)) << r.out;
  }
  CommandResult emu = RunCommand({BinPath("ckprofiler-emu")});
  EXPECT_EQ(r.out, emu.out);
}

// A wrong argument count prints CK's help text, exactly as the emulator (CK's text) does.
TEST_F(TorchProfilerTest, WrongArgumentCountPrintsCkHelpAndExits1) {
  const char* const fwd_ok =
      "grouped_conv_fwd 1 3 0 0 1 0 1 2 32 32 4 4 3 3 200 200 1 1 1 1 1 1 1 1";
  const char* const bwd_ok =
      "grouped_conv_bwd_data 2 3 0 1 0 1 2 1 10 64 64 3 3 56 56 1 1 1 1 1 1 1 1 -1";
  struct Case {
    std::string args;
    const char* help;
  } cases[] = {
      {"grouped_conv_fwd", "(grouped_conv_fwd: Grouped Convolution Forward)"},
      {"grouped_conv_fwd 1 3 0 0 1 0 1", "(grouped_conv_fwd: Grouped Convolution Forward)"},
      {std::string(fwd_ok) + " 1", "(grouped_conv_fwd: Grouped Convolution Forward)"},
      {std::string(fwd_ok).substr(0, std::string(fwd_ok).size() - 2),
       "(grouped_conv_fwd: Grouped Convolution Forward)"},
      // bwd_data without split_k (older CK's count): current CK wants it.
      {std::string(bwd_ok).substr(0, std::string(bwd_ok).size() - 3),
       "(grouped_conv_bwd_data: Grouped Convolution Backward Data)"},
      {"grouped_conv_bwd_weight 5 4 0 1 0 1 2 1 10 64 64 3 3 56 56 1 1 1 1 1 1 1 1",
       "(grouped_conv_bwd_weight: Grouped Convolution Backward Weight)"},
      // num_dim_spatial 3 with 2-D lists.
      {"grouped_conv_bwd_weight 5 4 0 1 0 1 3 1 10 64 64 3 3 56 56 1 1 1 1 1 1 1 1 all",
       "(grouped_conv_bwd_weight: Grouped Convolution Backward Weight)"},
  };
  for (const auto& c : cases) {
    CommandResult r = Run(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.out << r.err;
    EXPECT_TRUE(Contains(r.out, std::string("arg1: tensor operation ") + c.help)) << c.args;
    EXPECT_FALSE(Contains(r.err, kTorchImported)) << c.args;
    std::vector<std::string> emu_argv = {BinPath("ckprofiler-emu")};
    for (auto& a : Split(c.args)) emu_argv.push_back(a);
    CommandResult emu = RunCommand(emu_argv, {"CKEMU_CK_VERSION=", "CKEMU_FAULT="});
    EXPECT_EQ(emu.exit_code, 1) << c.args;
    EXPECT_EQ(r.out, emu.out) << c.args;
  }
}

TEST_F(TorchProfilerTest, UnknownOperationIsReported) {
  CommandResult r = Run("grouped_conv_bwd 1 2 3");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.err, "cannot find operation: grouped_conv_bwd")) << r.err;
  EXPECT_FALSE(Contains(r.err, kTorchImported));
}

// Real CK parses bwd_data's split_k with std::stoi: "all" throws and aborts the process.
TEST_F(TorchProfilerTest, NonNumbersAbortLikeStdStoi) {
  struct Case {
    const char* args;
    const char* exception;
  } cases[] = {
      {"grouped_conv_bwd_data 2 3 0 1 0 1 2 1 10 64 64 3 3 56 56 1 1 1 1 1 1 1 1 all",
       "std::invalid_argument"},
      {"grouped_conv_fwd x 3 0 0 1 0 1 2 32 32 4 4 3 3 200 200 1 1 1 1 1 1 1 1",
       "std::invalid_argument"},
      {"grouped_conv_fwd 1 3 0 0 1 0 1 2 32 99999999999999999999 4 4 3 3 200 200 1 1 1 1 1 1 1 1",
       "std::out_of_range"},
  };
  for (const auto& c : cases) {
    CommandResult r = Run(c.args);
    EXPECT_EQ(r.term_signal, SIGABRT) << c.args << "\n" << r.out << r.err;
    EXPECT_TRUE(Contains(
        r.err, std::string("terminate called after throwing an instance of '") + c.exception + "'"))
        << r.err;
    EXPECT_FALSE(Contains(r.err, kTorchImported));
  }
  // bwd_weight accepts "all"; stoi ignores what follows the number, as CK does.
  EXPECT_EQ(Fake("grouped_conv_bwd_weight 5 4 0 1 0 1 2 1 10 64 64 3 3 56 56 1 1 1 1 1 1 1 1 all")
                .exit_code,
            0);
  EXPECT_EQ(Fake("grouped_conv_fwd 1 3 0 0 1 0 1 2 1 2 8 8 3 3 16 16 1 1 1 1 1 1 1x 1").exit_code,
            0);
}

TEST_F(TorchProfilerTest, UnsupportedTypesAndLayoutsAreNotImplemented) {
  const char* const cases[] = {
      // fwd layouts 0 and 2 (GKYXC weights), int8, an unknown enum, index_type 2, 4-D.
      "grouped_conv_fwd 1 0 0 0 1 0 1 2 1 2 8 8 3 3 16 16 1 1 1 1 1 1 1 1",
      "grouped_conv_fwd 1 2 0 0 1 0 1 2 1 2 8 8 3 3 16 16 1 1 1 1 1 1 1 1",
      "grouped_conv_fwd 3 3 0 0 1 0 1 2 1 2 8 8 3 3 16 16 1 1 1 1 1 1 1 1",
      "grouped_conv_fwd 7 3 0 0 1 0 1 2 1 2 8 8 3 3 16 16 1 1 1 1 1 1 1 1",
      "grouped_conv_fwd 1 3 2 0 1 0 1 2 1 2 8 8 3 3 16 16 1 1 1 1 1 1 1 1",
      "grouped_conv_fwd 1 3 0 0 1 0 1 4 1 2 8 8 3 3 3 3 16 16 16 16 1 1 1 1 1 1 1 1 1 1 1 1 1 1 "
      "1 1",
      // bwd_data layout 4 does not exist; bwd_weight NCHW is 4, so its 3 (GKYXC) is not ours.
      "grouped_conv_bwd_data 1 4 0 1 0 1 2 1 2 8 8 3 3 16 16 1 1 1 1 1 1 1 1 1",
      "grouped_conv_bwd_weight 5 3 0 1 0 1 2 1 2 8 8 3 3 16 16 1 1 1 1 1 1 1 1 1",
      // bwd_weight int8 (4); bwd_weight bf16 is 5, and bwd_data has no 5.
      "grouped_conv_bwd_weight 4 2 0 1 0 1 2 1 2 8 8 3 3 16 16 1 1 1 1 1 1 1 1 1",
      "grouped_conv_bwd_data 5 3 0 1 0 1 2 1 2 8 8 3 3 16 16 1 1 1 1 1 1 1 1 1",
  };
  for (const char* args : cases) {
    CommandResult r = Run(args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.out << r.err;
    EXPECT_EQ(r.out, "this data_type & layout is not implemented\n") << args;
    EXPECT_FALSE(Contains(r.err, kTorchImported)) << args;
  }
}

// A valid command line goes on to import torch (the fake one here: exit 99)...
TEST_F(TorchProfilerTest, ValidCommandLineImportsTorchOnlyAfterTheChecks) {
  CommandResult r = Run("grouped_conv_fwd 2 3 0 0 1 0 1 2 1 2 8 8 3 3 16 16 1 1 1 1 1 1 1 1");
  EXPECT_EQ(r.exit_code, 99) << r.out << r.err;
  EXPECT_TRUE(Contains(r.err, kTorchImported)) << r.err;
}

// ...and without torch it fails in one clear line.
TEST_F(TorchProfilerTest, WithoutTorchOneClearLine) {
  // -I -S: no site-packages, no PYTHONPATH: no torch, whatever this machine has installed.
  CommandResult r = RunCommand({"python3", "-I", "-S", kScript, "grouped_conv_fwd",
                                "2",       "3",  "0",  "0",     "1",
                                "0",       "1",  "2",  "1",     "2",
                                "8",       "8",  "3",  "3",     "16",
                                "16",      "1",  "1",  "1",     "1",
                                "1",       "1",  "1",  "1"},
                               {"TORCH_CONV_FAKE_MS="});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  ASSERT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("torch-conv-profiler: PyTorch is not installed (", 0), 0u) << r.err;
}

TEST_F(TorchProfilerTest, BadFakeTimeIsAnError) {
  CommandResult r =
      Fake("grouped_conv_fwd 2 3 0 0 1 0 1 2 1 2 8 8 3 3 16 16 1 1 1 1 1 1 1 1", "fast");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err,
                       "TORCH_CONV_FAKE_MS must be a number of milliseconds >= 0, got "
                       "'fast'"))
      << r.err;
}

int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// What iostream prints for a float, read back: the value our parser must report.
double Printed(float v) {
  std::ostringstream s;
  s << v;
  return std::stod(s.str());
}

// The fake mode prints CK's full format; our parser reads it as it reads CK.
TEST_F(TorchProfilerTest, FakeOutputParsesAsCk) {
  struct Case {
    const char* args;
    std::string name;
    bool backward;
    int64_t G, N, K, C;
    std::vector<int64_t> filter, input, out;
    int in_bytes, wei_bytes, out_bytes;
  } cases[] = {
      {"grouped_conv_fwd 2 3 0 0 1 0 1 2 32 32 4 4 3 3 200 200 1 1 1 1 1 1 1 1",
       "PyTorch_fake<bf16, NCHW, benchmark=1>",
       false,
       32,
       32,
       4,
       4,
       {3, 3},
       {200, 200},
       {200, 200},
       2,
       2,
       2},
      {"grouped_conv_fwd 0 1 1 0 2 0 1 1 2 8 16 24 5 100 2 1 2 2",
       "PyTorch_fake<fp32, NWC, benchmark=1>",
       false,
       2,
       8,
       16,
       24,
       {5},
       {100},
       {50},
       4,
       4,
       4},
      {"grouped_conv_bwd_data 1 1 0 1 0 1 2 1 10 64 64 3 3 56 56 2 2 1 1 1 1 1 1 -1",
       "PyTorch_fake<fp16, NHWC, benchmark=1>",
       true,
       1,
       10,
       64,
       64,
       {3, 3},
       {56, 56},
       {28, 28},
       2,
       2,
       2},
      {"grouped_conv_bwd_weight 5 4 0 1 0 1 3 4 2 8 8 3 3 3 8 16 16 1 1 1 1 1 1 1 1 1 1 1 1 all",
       "PyTorch_fake<bf16, NCDHW, benchmark=1>",
       true,
       4,
       2,
       8,
       8,
       {3, 3, 3},
       {8, 16, 16},
       {8, 16, 16},
       2,
       2,
       2},
      {"grouped_conv_bwd_weight 2 2 0 1 0 1 2 1 4 32 16 1 1 7 7 1 1 1 1 0 0 0 0 -1",
       "PyTorch_fake<bf16_fp32w, NHWC, benchmark=1>",
       true,
       1,
       4,
       32,
       16,
       {1, 1},
       {7, 7},
       {7, 7},
       2,
       4,
       2},
  };
  for (const auto& c : cases) {
    CommandResult r = Fake(c.args);
    ASSERT_EQ(r.exit_code, 0) << c.args << "\n" << r.out << r.err;
    EXPECT_FALSE(Contains(r.err, kTorchImported));
    const std::vector<std::string> lines = Lines(r.out);
    ASSERT_GE(lines.size(), 10u) << r.out;
    EXPECT_EQ(lines[0].rfind("torch-conv-profiler: pid ", 0), 0u) << lines[0];
    EXPECT_TRUE(Contains(lines[0], " CUDA_VISIBLE_DEVICES=1 ")) << lines[0];

    CkOutputParser parser;
    parser.Feed(r.out);
    parser.FeedStderr(r.err);
    parser.Finish();
    const CkPerf& perf = parser.perf();
    const int64_t flop = 2 * c.G * c.N * c.K * c.C * Product(c.out) * Product(c.filter);
    const int64_t bytes = c.in_bytes * c.G * c.N * c.C * Product(c.input) +
                          c.wei_bytes * c.G * c.K * c.C * Product(c.filter) +
                          c.out_bytes * c.G * c.N * c.K * Product(c.out);
    const float avg = 0.5f;
    const float tflops = static_cast<float>(flop) / 1.E9 / avg;  // as CK computes them
    const float gbps = static_cast<double>(bytes) / 1.E6 / avg;
    EXPECT_TRUE(perf.has_best) << c.args;
    EXPECT_TRUE(perf.best_from_summary) << c.args;
    EXPECT_EQ(perf.best_name, c.name) << c.args;
    EXPECT_EQ(perf.avg_ms, 0.5) << c.args;
    EXPECT_EQ(perf.tflops, Printed(tflops)) << c.args;
    EXPECT_EQ(perf.gbps, Printed(gbps)) << c.args;
    EXPECT_EQ(perf.split_k, c.backward ? "1" : "") << c.args;
    EXPECT_EQ(perf.valids, 1) << c.args;
    EXPECT_EQ(perf.instances_found, 1) << c.args;
    EXPECT_EQ(perf.instances_supported, 1) << c.args;
    ASSERT_EQ(perf.top.size(), 1u) << c.args;
    EXPECT_EQ(perf.top[0].name, c.name) << c.args;
    EXPECT_EQ(perf.top[0].tflops, perf.tflops) << c.args;
    EXPECT_FALSE(perf.verification_failed || perf.not_implemented || perf.usage_printed);
    EXPECT_EQ(ClassifyExit(false, r.exit_code, perf, r.err).kind, Outcome::Kind::kSucceeded);

    // The tensor descriptors are CK's (the emulator prints CK's) for the same problem.
    std::vector<std::string> emu_argv = {BinPath("ckprofiler-emu")};
    for (auto& a : Split(c.args)) emu_argv.push_back(a);
    CommandResult emu = RunCommand(emu_argv, {"CKEMU_TIME_SCALE=0", "CKEMU_FAULT="});
    ASSERT_EQ(emu.exit_code, 0) << c.args << emu.out << emu.err;
    const std::vector<std::string> emu_lines = Lines(emu.out);
    for (size_t i = 1; i <= 3; ++i) EXPECT_EQ(lines[i], emu_lines[i]) << c.args;
  }
}

// The exact lines, for one problem of ck-profiler.md.
TEST_F(TorchProfilerTest, FakeOutputExactFormat) {
  CommandResult r =
      Fake("grouped_conv_bwd_weight 5 4 0 1 0 1 2 32 32 4 4 3 3 200 200 1 1 1 1 1 1 1 1 all");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string tail = r.out.substr(r.out.find('\n') + 1);
  EXPECT_EQ(tail,
            "input: dim 5, lengths {32, 32, 4, 200, 200}, strides {160000, 5120000, 40000, 200, "
            "1}\n"
            "weight: dim 5, lengths {32, 4, 4, 3, 3}, strides {144, 36, 9, 3, 1}\n"
            "output: dim 5, lengths {32, 32, 4, 200, 200}, strides {160000, 5120000, 40000, 200, "
            "1}\n"
            "found 1 instances\n"
            "Perf:        0.5 ms, 23.593 TFlops, 1310.74 GB/s, PyTorch_fake<bf16, NCHW, "
            "benchmark=1>, SplitK 1\n"
            "\033[36mvalids: 1\033[0m\n"
            "Best configuration parameters:\n"
            "name: PyTorch_fake<bf16, NCHW, benchmark=1> (instance 0)\n"
            "avg_time: 0.5\n"
            "tflops: 23.593\n"
            "GB/s: 1310.74, SplitK 1\n");
}

TEST_F(TorchProfilerTest, TimeZeroPrintsZeroAndInfLikeCk) {
  CommandResult r =
      Fake("grouped_conv_bwd_data 2 3 0 1 0 0 2 1 10 64 64 3 3 56 56 1 1 1 1 1 1 1 1 -1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out,
                       "Perf:          0 ms, inf TFlops, inf GB/s, PyTorch_fake<bf16, "
                       "NCHW, benchmark=1>, SplitK 1\n"))
      << r.out;
  EXPECT_TRUE(Contains(r.out, "name: PyTorch_fake<bf16, NCHW, benchmark=1>\navg_time: 0\n"))
      << r.out;  // bwd_data: no "(instance i)"
  CkOutputParser parser;
  parser.Feed(r.out);
  parser.Finish();
  EXPECT_TRUE(std::isinf(parser.perf().tflops));
  EXPECT_EQ(ClassifyExit(false, 0, parser.perf()).kind, Outcome::Kind::kSucceeded);
}

TEST_F(TorchProfilerTest, ProblemWithoutWorkIsUnsupported) {
  // A 3x3 filter on a 2x2 input without padding: no output.
  CommandResult r = Fake("grouped_conv_fwd 2 3 0 0 1 0 1 2 1 2 8 8 3 3 2 2 1 1 1 1 0 0 0 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out,
                       "PyTorch_fake<bf16, NCHW, benchmark=1> does not support this "
                       "problem\n"))
      << r.out;
  CkOutputParser parser;
  parser.Feed(r.out);
  parser.Finish();
  EXPECT_EQ(parser.perf().valids, 0);
  EXPECT_EQ(ClassifyExit(false, 0, parser.perf()).kind, Outcome::Kind::kUnsupported);
}

// Links named like CK's executables: ckProfiler (operation first), profile_grouped_conv_<op>
// (arguments directly).
TEST_F(TorchProfilerTest, WorksThroughLinksNamedLikeCk) {
  TempDir dir;
  ASSERT_EQ(symlink(kScript.c_str(), dir.File("ckProfiler").c_str()), 0);
  ASSERT_EQ(symlink(kScript.c_str(), dir.File("profile_grouped_conv_bwd_weight").c_str()), 0);
  const std::vector<std::string> env = {"TORCH_CONV_FAKE_MS=0.25"};
  const std::string args = "5 4 0 1 0 1 2 1 10 64 64 3 3 56 56 1 1 1 1 1 1 1 1 all";
  std::vector<std::string> ck = {dir.File("ckProfiler"), "grouped_conv_bwd_weight"};
  std::vector<std::string> per_op = {dir.File("profile_grouped_conv_bwd_weight")};
  for (auto& a : Split(args)) {
    ck.push_back(a);
    per_op.push_back(a);
  }
  CommandResult a = RunWith(ck, env);
  CommandResult b = RunWith(per_op, env);
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  EXPECT_EQ(a.out.substr(a.out.find('\n')), b.out.substr(b.out.find('\n')));  // but the pid line
  EXPECT_TRUE(Contains(a.out, "Perf:       0.25 ms, ")) << a.out;
  // The per-operation form with no arguments: a wrong count.
  CommandResult c = RunWith({dir.File("profile_grouped_conv_bwd_weight")}, {});
  EXPECT_EQ(c.exit_code, 1);
  EXPECT_TRUE(Contains(c.out, "arg1: tensor operation (grouped_conv_bwd_weight")) << c.out;
}

}  // namespace
}  // namespace ckprof

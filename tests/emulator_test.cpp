// Tests of ckprofiler-emu: it must reject what real CK rejects (argc, enums, holes, "all" for
// bwd_data), accept what our command builder produces where CK does, print CK's format with
// figures that follow ck-profiler.md's formulas, and misbehave on request.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/ck_command.h"
#include "common/ck_output.h"
#include "common/profiler_path.h"
#include "tests/util/commands.h"
#include "tests/util/files.h"

namespace ckprof {
namespace {

using testing::BinPath;
using testing::CommandResult;
using testing::RunCommand;

const std::vector<std::string> kInstant = {"CKEMU_TIME_SCALE=0"};

CkConfig Config(ConvOp op, int nd, Layout layout = Layout::kNchw, DataType type = DataType::kFp16) {
  CkConfig c;
  c.op = op;
  c.data_type = EncodeDataType(op, type);
  c.layout = EncodeLayout(op, layout);
  if (op == ConvOp::kFwd) c.index_type = 0;
  c.num_dim_spatial = nd;
  c.G = 1;
  c.N = 4;
  c.K = 64;
  c.C = 32;
  for (int d = 0; d < nd; ++d) {
    c.filter_spatial.push_back(3);
    c.input_spatial.push_back(14);
    c.strides.push_back(1);
    c.dilations.push_back(1);
    c.left_pads.push_back(1);
    c.right_pads.push_back(1);
  }
  if (op != ConvOp::kFwd) c.split_k = "all";
  return c;
}

std::vector<std::string> Command(const CkConfig& c) {
  auto target = ResolveProfiler(BinPath("ckprofiler-emu"));
  EXPECT_TRUE(target.ok()) << target.error();
  auto argv = BuildCommand(*target, c);
  EXPECT_TRUE(argv.ok()) << argv.error();
  return *argv;
}

CkPerf Parse(const CommandResult& r) {
  CkOutputParser p;
  p.Feed(r.out);
  p.FeedStderr(r.err);
  p.Finish();
  return p.perf();
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

TEST(Emulator, NoArgumentsListsOperationsUnknownOperationFails) {
  testing::TempDir dir;
  const std::string link = dir.File("ckProfiler");
  ASSERT_EQ(symlink(BinPath("ckprofiler-emu").c_str(), link.c_str()), 0);
  CommandResult r = RunCommand({link});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(StartsWith(r.out, "arg1: tensor operation (grouped_conv_fwd:")) << r.out;
  EXPECT_NE(r.out.find("grouped_conv_bwd_weight"), std::string::npos);

  r = RunCommand({link, "gemm"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "cannot find operation: gemm\n");
  EXPECT_EQ(r.out, "");
}

TEST(Emulator, ArgumentCountsAreExact) {
  for (ConvOp op : {ConvOp::kFwd, ConvOp::kBwdData, ConvOp::kBwdWeight}) {
    for (int nd : {1, 2, 3}) {
      const std::string name = std::string(ShortOpName(op)) + " " + std::to_string(nd) + "d";
      // Channels-last exists for every op and dimension except 1-D bwd_data; 1-D has layouts
      // 0 and 1 only (for bwd_weight, 1 is GNWC: take that).
      CkConfig c = Config(op, nd, Layout::kNhwc);
      if (op == ConvOp::kBwdWeight && nd == 1) c.layout = 1;
      std::vector<std::string> argv = Command(c);
      ASSERT_EQ(argv.size(), 14u + 6 * nd) << name;  // CK's argc, whatever the op
      CommandResult ok = RunCommand(argv, kInstant);
      if (op == ConvOp::kBwdData && nd == 1) {
        EXPECT_EQ(ok.exit_code, 1) << name;
        EXPECT_EQ(ok.out, "this data_type & layout is not implemented\n") << name;
      } else {
        EXPECT_EQ(ok.exit_code, 0) << name << "\n" << ok.out << ok.err;
      }
      for (int delta : {-1, +1}) {
        std::vector<std::string> bad = argv;
        if (delta < 0)
          bad.pop_back();
        else
          bad.push_back("1");
        CommandResult r = RunCommand(bad, kInstant);
        EXPECT_EQ(r.exit_code, 1) << name << " delta " << delta;
        EXPECT_TRUE(
            StartsWith(r.out, "arg1: tensor operation (" + std::string(CkOperationName(op)) + ":"))
            << name << "\n"
            << r.out;
        EXPECT_TRUE(Parse(r).usage_printed);
      }
    }
  }
  // Too few to read num_dim_spatial at all.
  CommandResult r = RunCommand({BinPath("ckprofiler-emu"), "grouped_conv_fwd", "1", "3"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(StartsWith(r.out, "arg1: tensor operation (grouped_conv_fwd:"));
}

TEST(Emulator, BuiltCommandsAcceptedWhereCkImplementsThem) {
  for (ConvOp op : {ConvOp::kFwd, ConvOp::kBwdData, ConvOp::kBwdWeight}) {
    for (int nd : {1, 2, 3}) {
      for (Layout layout : {Layout::kNchw, Layout::kNhwc}) {
        for (DataType type : {DataType::kFp32, DataType::kFp16, DataType::kBf16}) {
          const std::string name = std::string(ShortOpName(op)) + " " + std::to_string(nd) + "d " +
                                   std::string(LayoutName(layout)) + " " +
                                   std::string(DataTypeName(type));
          // The holes of ck-profiler.md: 1-D only in layouts 0/1 (so not NCHW, and for
          // bwd_weight not channels-last, which is 2 there), no 1-D bwd_data, no 3-D NCHW
          // bwd_data.
          const bool implemented = !(nd == 1 && layout == Layout::kNchw) &&
                                   !(op == ConvOp::kBwdWeight && nd == 1) &&
                                   !(op == ConvOp::kBwdData && nd == 1) &&
                                   !(op == ConvOp::kBwdData && nd == 3 && layout == Layout::kNchw);
          CommandResult r = RunCommand(Command(Config(op, nd, layout, type)), kInstant);
          if (!implemented) {
            EXPECT_EQ(r.exit_code, 1) << name;
            EXPECT_EQ(r.out, "this data_type & layout is not implemented\n") << name;
            continue;
          }
          ASSERT_EQ(r.exit_code, 0) << name << "\n" << r.out << r.err;
          CkPerf perf = Parse(r);
          EXPECT_TRUE(perf.has_best) << name;
          EXPECT_GT(perf.valids, 0) << name;
          EXPECT_EQ(ClassifyExit(false, 0, perf).kind, Outcome::Kind::kSucceeded) << name;
        }
      }
    }
  }
}

TEST(Emulator, EnumRangesAndHoles) {
  auto run_with = [](ConvOp op, int nd, int data_type, int layout) {
    CkConfig c = Config(op, nd);
    c.data_type = data_type;
    c.layout = layout;
    return RunCommand(Command(c), kInstant);
  };
  struct {
    ConvOp op;
    int nd, data_type, layout;
    bool implemented;
  } cases[] = {
      {ConvOp::kFwd, 2, 1, 2, true},        {ConvOp::kFwd, 3, 1, 2, false},
      {ConvOp::kFwd, 2, 5, 1, false},       {ConvOp::kFwd, 2, 1, 4, false},
      {ConvOp::kFwd, 2, 3, 1, true},        {ConvOp::kFwd, 2, 8, 1, true},
      {ConvOp::kBwdData, 2, 3, 1, true},    {ConvOp::kBwdData, 2, 4, 1, false},
      {ConvOp::kBwdData, 3, 1, 3, false},   {ConvOp::kBwdData, 3, 1, 2, true},
      {ConvOp::kBwdWeight, 2, 2, 2, true},  {ConvOp::kBwdWeight, 2, 0, 3, false},
      {ConvOp::kBwdWeight, 2, 5, 3, true},  {ConvOp::kBwdWeight, 2, 0, 4, true},
      {ConvOp::kBwdWeight, 2, 3, 2, false}, {ConvOp::kBwdWeight, 2, 1, 5, false},
      {ConvOp::kBwdWeight, 1, 1, 1, true},  {ConvOp::kBwdWeight, 1, 1, 2, false},
  };
  for (const auto& c : cases) {
    CommandResult r = run_with(c.op, c.nd, c.data_type, c.layout);
    const std::string name = std::string(ShortOpName(c.op)) + " nd " + std::to_string(c.nd) +
                             " type " + std::to_string(c.data_type) + " layout " +
                             std::to_string(c.layout);
    EXPECT_EQ(r.exit_code, c.implemented ? 0 : 1) << name;
    EXPECT_EQ(r.out == "this data_type & layout is not implemented\n", !c.implemented) << name;
  }
  // index_type other than 0/1.
  std::vector<std::string> argv = Command(Config(ConvOp::kFwd, 2));
  argv[4] = "2";
  EXPECT_EQ(RunCommand(argv, kInstant).exit_code, 1);
}

TEST(Emulator, NonNumbersAbortLikeStoi) {
  std::vector<std::string> argv = Command(Config(ConvOp::kBwdData, 2));
  ASSERT_EQ(argv.back(), "-1");  // what our builder passes for "all"
  argv.back() = "all";           // what real CK aborts on
  CommandResult r = RunCommand(argv, kInstant);
  EXPECT_EQ(r.term_signal, SIGABRT);
  EXPECT_NE(r.err.find("std::invalid_argument"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("what():  stoi"), std::string::npos) << r.err;
  EXPECT_EQ(ClassifyExit(true, r.term_signal, Parse(r)).Summary(), "crashed (SIGABRT)");

  argv = Command(Config(ConvOp::kFwd, 2));
  argv[10] = "G";  // G
  r = RunCommand(argv, kInstant);
  EXPECT_EQ(r.term_signal, SIGABRT);

  // bwd_weight takes "all" (and stoi's prefix parsing: "4x" is 4).
  argv = Command(Config(ConvOp::kBwdWeight, 2));
  EXPECT_EQ(argv.back(), "all");
  EXPECT_EQ(RunCommand(argv, kInstant).exit_code, 0);
  argv.back() = "4x";
  r = RunCommand(argv, kInstant);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(Parse(r).split_k, "4");
}

TEST(Emulator, OutputFollowsTheFormulas) {
  for (ConvOp op : {ConvOp::kFwd, ConvOp::kBwdData, ConvOp::kBwdWeight}) {
    CkConfig c = Config(op, 2, Layout::kNhwc, DataType::kBf16);
    c.G = 2;
    c.N = 8;
    c.strides = {2, 2};
    CommandResult r = RunCommand(Command(c), kInstant);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const std::string name(ShortOpName(op));
    // Header lines name the tensors.
    EXPECT_NE(r.out.find(op == ConvOp::kBwdData ? "\nout: dim 5, lengths {2, 8, 64, 7, 7}"
                                                : "\noutput: dim 5, lengths {2, 8, 64, 7, 7}"),
              std::string::npos)
        << name << "\n"
        << r.out;
    CkOutputParser parser(1000);
    parser.Feed(r.out);
    parser.Finish();
    const CkPerf& perf = parser.perf();
    ASSERT_GT(perf.instances_supported, 1) << name;
    EXPECT_GT(perf.instances_tried, perf.instances_supported) << name << ": some unsupported";
    EXPECT_EQ(perf.valids, perf.instances_supported) << name;
    const double flops = c.Flops(), bytes = c.Bytes(2);
    double best_tflops = 0;
    for (const InstancePerf& i : perf.top) {
      EXPECT_NEAR(i.tflops, flops / 1e9 / i.avg_ms, i.tflops * 2e-5) << name << " " << i.name;
      EXPECT_NEAR(i.gbps, bytes / 1e6 / i.avg_ms, i.gbps * 2e-5) << name << " " << i.name;
      EXPECT_NE(i.name.find('<'), std::string::npos);
      EXPECT_EQ(i.split_k.empty(), op == ConvOp::kFwd) << name;
      best_tflops = std::max(best_tflops, i.tflops);
    }
    EXPECT_EQ(perf.tflops, best_tflops) << name;
    EXPECT_EQ(perf.best_name, perf.top[0].name) << name;
    // "(instance i)" on fwd and bwd_weight only.
    EXPECT_EQ(r.out.find(" (instance ") != std::string::npos, op != ConvOp::kBwdData) << name;
    EXPECT_NE(r.out.find("\033[36mvalids: " + std::to_string(perf.valids) + "\033[0m\n"),
              std::string::npos);
    if (op == ConvOp::kBwdWeight) {
      EXPECT_NE(r.out.find(" (best occupancy)\n"), std::string::npos);
    }
  }
}

TEST(Emulator, DeterministicAndTimeOffPrintsInf) {
  std::vector<std::string> argv = Command(Config(ConvOp::kFwd, 2));
  CommandResult a = RunCommand(argv, kInstant), b = RunCommand(argv, kInstant);
  ASSERT_EQ(a.exit_code, 0);
  EXPECT_EQ(a.out.substr(a.out.find('\n')), b.out.substr(b.out.find('\n')));  // but the pid line

  CkConfig c = Config(ConvOp::kFwd, 2);
  c.time = 0;
  CommandResult r = RunCommand(Command(c), kInstant);
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Perf:          0 ms, inf TFlops, inf GB/s, "), std::string::npos) << r.out;
  CkPerf perf = Parse(r);
  EXPECT_TRUE(std::isinf(perf.tflops));
  EXPECT_EQ(ClassifyExit(false, 0, perf).kind, Outcome::Kind::kSucceeded);
}

TEST(Emulator, PerOperationLinkNames) {
  testing::TempDir dir;
  for (ConvOp op : {ConvOp::kFwd, ConvOp::kBwdData, ConvOp::kBwdWeight}) {
    const std::string link = dir.File(std::string(OperationTypeName(op)));
    ASSERT_EQ(symlink(BinPath("ckprofiler-emu").c_str(), link.c_str()), 0);
  }
  auto target = ResolveProfiler(dir.path());
  ASSERT_TRUE(target.ok()) << target.error();
  ASSERT_EQ(target->form, ProfilerTarget::Form::kPerOpExecutables);
  for (ConvOp op : {ConvOp::kFwd, ConvOp::kBwdData, ConvOp::kBwdWeight}) {
    auto argv = BuildCommand(*target, Config(op, 2));
    ASSERT_TRUE(argv.ok());
    CommandResult r = RunCommand(*argv, kInstant);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_TRUE(Parse(r).has_best);
    // With the operation name in front, a per-operation executable reads it as data_type:
    // std::stoi throws and CK aborts.
    std::vector<std::string> extra = *argv;
    extra.insert(extra.begin() + 1, std::string(CkOperationName(op)));
    EXPECT_EQ(RunCommand(extra, kInstant).term_signal, SIGABRT);
  }
}

TEST(Emulator, HeaderPinsAndInvocationLog) {
  testing::TempDir dir;
  const std::string log = dir.File("emu.jsonl");
  std::vector<std::string> argv = Command(Config(ConvOp::kFwd, 2));
  CommandResult r = RunCommand(
      argv, {"CKEMU_TIME_SCALE=0", "HIP_VISIBLE_DEVICES=3", "CKEMU_LOG=" + log}, dir.path());
  ASSERT_EQ(r.exit_code, 0);
  const std::string first = r.out.substr(0, r.out.find('\n'));
  EXPECT_TRUE(StartsWith(first, "ckprofiler-emu: pid ")) << first;
  EXPECT_NE(first.find(" uid " + std::to_string(getuid()) + " gid " + std::to_string(getgid())),
            std::string::npos)
      << first;
  EXPECT_NE(first.find(" HIP_VISIBLE_DEVICES=3"), std::string::npos) << first;

  // A crash also logs its end.
  CkConfig crash = Config(ConvOp::kFwd, 2);
  crash.N = 9002;
  CommandResult c = RunCommand(Command(crash), {"CKEMU_TIME_SCALE=0", "CKEMU_LOG=" + log});
  EXPECT_EQ(c.term_signal, SIGSEGV);

  std::istringstream lines(testing::ReadFile(log));
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(lines, line);) records.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0]["event"], "start");
  EXPECT_EQ(records[1]["event"], "end");
  EXPECT_EQ(records[1]["argv"].get<std::vector<std::string>>(), argv);
  EXPECT_EQ(records[1]["env"], nlohmann::json({{"HIP_VISIBLE_DEVICES", "3"}}));
  EXPECT_EQ(records[1]["cwd"], dir.path());
  EXPECT_EQ(records[1]["uid"], getuid());
  EXPECT_EQ(records[1]["outcome"], "succeeded");
  EXPECT_EQ(records[1]["exit_code"], 0);
  EXPECT_EQ(records[1]["pid"], records[1]["pgid"].get<int>() == records[1]["pid"].get<int>()
                                   ? records[1]["pgid"]
                                   : records[1]["pid"]);
  EXPECT_LE(records[1]["start"].get<double>(), records[1]["end"].get<double>());
  EXPECT_EQ(records[3]["outcome"], "crashed");
  EXPECT_EQ(records[3]["signal"], SIGSEGV);
  EXPECT_EQ(records[3]["env"], nlohmann::json::object());
}

TEST(Emulator, InjectedFaults) {
  auto run = [](int64_t n, std::vector<std::string> env) {
    CkConfig c = Config(ConvOp::kBwdWeight, 2);
    c.N = n;
    env.push_back("CKEMU_TIME_SCALE=0");
    return RunCommand(Command(c), env);
  };
  CommandResult r = run(9002, {});
  EXPECT_EQ(r.term_signal, SIGSEGV);
  EXPECT_EQ(Parse(r).instances_tried, 3);  // a few instances printed first

  r = run(9003, {"CKEMU_FAIL_CODE=7"});
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(ClassifyExit(false, r.exit_code, Parse(r), r.err).reason,
            "exit code 7: HIP error: hipErrorIllegalAddress (injected by ckprofiler-emu)");

  r = run(9004, {});
  EXPECT_EQ(r.exit_code, 0);
  CkPerf perf = Parse(r);
  EXPECT_EQ(perf.valids, 0);
  EXPECT_NE(r.out.find("\nname: \navg_time: 0\n"), std::string::npos) << r.out;
  EXPECT_EQ(ClassifyExit(false, 0, perf).kind, Outcome::Kind::kUnsupported);

  r = run(9007, {});
  EXPECT_EQ(r.term_signal, SIGABRT);

  r = run(9008, {});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(ClassifyExit(false, 1, Parse(r)).reason,
            "exit code 1: verification failed (Error: Incorrect results!)");

  auto t0 = std::chrono::steady_clock::now();
  r = run(9006, {"CKEMU_SLOW_START_MS=300"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(300));

  // By environment, for any problem.
  r = run(4, {"CKEMU_FAULT=unsupported"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(Parse(r).valids, 0);
  r = run(4, {"CKEMU_FAULT=huge-output", "CKEMU_HUGE_BYTES=3M"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_GT(r.out.size(), 3u << 20);
  EXPECT_TRUE(Parse(r).has_best);
}

TEST(Emulator, OlderCkFormat) {
  std::vector<std::string> argv = Command(Config(ConvOp::kBwdData, 2));
  const std::vector<std::string> old = {"CKEMU_TIME_SCALE=0", "CKEMU_CK_VERSION=2024"};
  EXPECT_EQ(RunCommand(argv, old).exit_code, 1);  // older bwd_data takes no split_k
  argv.pop_back();
  CommandResult r = RunCommand(argv, old);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.find("valids:"), std::string::npos);
  EXPECT_EQ(r.out.find("SplitK"), std::string::npos);
  CkPerf perf = Parse(r);
  EXPECT_EQ(perf.valids, -1);
  EXPECT_TRUE(perf.has_best);
  EXPECT_EQ(ClassifyExit(false, 0, perf).kind, Outcome::Kind::kSucceeded);
}

TEST(Emulator, HelpDocumentsFaultsAndEnvironment) {
  CommandResult r = RunCommand({BinPath("ckprofiler-emu"), "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* word : {"CKEMU_FAULT", "CKEMU_TIME_SCALE", "CKEMU_LOG", "CKEMU_HUGE_BYTES",
                           "N=9001  hang", "N=9010  hang-noterm", "fork-child"}) {
    EXPECT_NE(r.out.find(word), std::string::npos) << word;
  }
}

}  // namespace
}  // namespace ckprof

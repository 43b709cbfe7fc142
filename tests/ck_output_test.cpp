// Tests of CK output parsing and outcome classification, over samples in the formats of
// ck-profiler.md: fwd, bwd_data, bwd_weight; current and older CK; no valid instance;
// verification failure; inf and exponents; ANSI escapes; streaming in arbitrary chunks.
#include "common/ck_output.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace ckprof {
namespace {

const char kFwdName4[] =
    "DeviceGroupedConvFwdMultipleABD_Xdl_CShuffle<256, 128, 128, 32, Default, 32, 32, 2, 2, 4, "
    "4, 4, 1, 1>";

// Current CK, grouped_conv_fwd: header, Perf lines, unsupported lines, valids, best block.
const std::string kFwdCurrent =
    std::string(
        "input: dim 5, lengths {32, 32, 4, 200, 200}, strides {160000, 5120000, 40000, 200, 1}\n"
        "weight: dim 5, lengths {32, 4, 4, 3, 3}, strides {144, 36, 9, 3, 1}\n"
        "output: dim 5, lengths {32, 32, 4, 200, 200}, strides {160000, 5120000, 40000, 200, 1}\n"
        "found 12 instances\n"
        "DeviceGroupedConvFwdMultipleABD_Xdl_CShuffle<256, 256, 128, 32, Default, 32, 32, 4, 2, 8, "
        "8, 8, 1, 1> does not support this problem\n"
        "Perf:   0.337758 ms, 34.9259 TFlops, 1940.35 GB/s, DeviceGroupedConvFwdMultipleABD_Xdl_"
        "CShuffle<64, 64, 32, 32, Default, 32, 32, 2, 1, 2, 2, 2, 1, 1>\n"
        "Perf:   0.229744 ms, 51.3463 TFlops, 2852.61 GB/s, ") +
    kFwdName4 +
    "\n"
    "Perf:   0.585378 ms, 20.1519 TFlops, 1119.57 GB/s, DeviceGroupedConvFwdMultipleABD_Xdl_"
    "CShuffle<64, 64, 64, 32, Default, 32, 32, 2, 2, 1, 1, 1, 1, 1>\n"
    "DeviceGroupedConvFwdMultipleABD_Wmma_CShuffle<128, 64, 64, 32, Default, 16, 16, 2, 2, 8, "
    "8, 8, 1, 1> does not support this problem\n"
    "\033[36mvalids: 3\033[0m\n"
    "Best configuration parameters:\n"
    "name: " +
    kFwdName4 +
    " (instance 4)\n"
    "avg_time: 0.229744\n"
    "tflops: 51.3463\n"
    "GB/s: 2852.61\n";

// Older CK fwd: no valids line, no "(instance i)".
const std::string kFwdOlder = std::string(
    "input: dim 5, lengths {1, 16, 64, 56, 56}, strides {200704, 200704, 1, 3584, 64}\n"
    "Perf:  0.0421 ms, 35.1 TFlops, 612.5 GB/s, DeviceGroupedConvFwdMultipleD_Xdl_CShuffle"
    "<256, 128, 256, 32, Default, 8, 8>\n"
    "Perf:  0.0398 ms, 37.12 TFlops, 647.9 GB/s, DeviceGroupedConvFwdMultipleD_Xdl_CShuffle"
    "<256, 256, 128, 32, Filter1x1Pad0, 8, 8>\n"
    "Best configuration parameters:\n"
    "name: DeviceGroupedConvFwdMultipleD_Xdl_CShuffle<256, 256, 128, 32, Filter1x1Pad0, 8, 8>\n"
    "avg_time: 0.0398\n"
    "tflops: 37.12\n"
    "GB/s: 647.9\n");

const char kBwdDataBest[] =
    "DeviceGroupedConvBwdDataMultipleD_Xdl_CShuffle_v1<256, 128, 256, 32, Default, 8, 2, 32, "
    "32, 2, 4, 8, 8, 1, 1>";

// Current bwd_data: ", SplitK k" on Perf lines and on the GB/s line, no "(instance i)".
const std::string kBwdDataCurrent =
    std::string(
        "out: dim 5, lengths {1, 10, 512, 7, 7}, strides {25088, 25088, 49, 7, 1}\n"
        "wei: dim 5, lengths {1, 512, 256, 3, 3}, strides {1179648, 2304, 9, 3, 1}\n"
        "in: dim 5, lengths {1, 10, 256, 14, 14}, strides {50176, 50176, 196, 14, 1}\n"
        "Perf:  0.0123457 ms, 94.0721 TFlops, 321.5 GB/s, DeviceGroupedConvBwdDataMultipleD_Xdl_"
        "CShuffle_v1<256, 256, 128, 32, Default, 8, 2, 32, 32, 4, 2, 8, 8, 1, 1>, SplitK 1\n"
        "Perf:  0.0101 ms, 114.987 TFlops, 392.9 GB/s, ") +
    kBwdDataBest +
    ", SplitK 2\n"
    "DeviceGroupedConvBwdDataMultipleD_Wmma_CShuffle<128, 64, 64, 32, Default, 8, 16, 16, 2, 2, "
    "8, 8, 1, 1> does not support this problem\n"
    "\033[36mvalids: 2\033[0m\n"
    "Best configuration parameters:\n"
    "name: " +
    kBwdDataBest +
    "\n"
    "avg_time: 0.0101\n"
    "tflops: 114.987\n"
    "GB/s: 392.9, SplitK 2\n";

// Older bwd_data: no split_k anywhere, no valids; the best comes from the block.
const std::string kBwdDataOlder =
    "Perf: 0.25 ms, 10.5 TFlops, 100 GB/s, DeviceGroupedConvBwdDataMultipleD_Xdl_CShuffle_v1"
    "<256, 128, 128, 32, Default, 8, 2>\n"
    "Perf: 0.5 ms, 5.25 TFlops, 50 GB/s, DeviceGroupedConvBwdDataMultipleD_Xdl_CShuffle_v1"
    "<64, 64, 64, 32, Default, 1, 1>\n"
    "Best configuration parameters:\n"
    "name: DeviceGroupedConvBwdDataMultipleD_Xdl_CShuffle_v1<256, 128, 128, 32, Default, 8, 2>\n"
    "avg_time: 0.25\n"
    "tflops: 10.5\n"
    "GB/s: 100\n";

const char kBwdWeightBest[] =
    "DeviceGroupedConvBwdWeight_Xdl_CShuffleV3<256, 128, 128, 32, Default, 8, 32, 32, 2, 2, 8, "
    "8, 8, BlkGemmPipelineScheduler: Intrawave, BlkGemmPipelineVersion: v1>";

// bwd_weight with split_k "all": "(best occupancy)" for -1, several split-K per instance.
const std::string kBwdWeightAll =
    std::string(
        "input: dim 5, lengths {1, 10, 256, 14, 14}, strides {50176, 50176, 1, 3584, 256}\n"
        "Perf:  0.00812 ms, 142.5 TFlops, 568.1 GB/s, ") +
    kBwdWeightBest +
    ", SplitK 8 (best occupancy)\n"
    "Perf:  0.0201 ms, 57.55 TFlops, 229.6 GB/s, " +
    kBwdWeightBest +
    ", SplitK 1\n"
    "Perf:  0.00631771 ms, 182.987 TFlops, 730.838 GB/s, " +
    kBwdWeightBest +
    ", SplitK 8\n"
    "DeviceGroupedConvBwdWeight_Xdl_CShuffle<256, 64, 128, 4, Default, 8, 32, 32, 1, 2, 2, 2, 2> "
    "does not support this problem\n"
    "\033[36mvalids: 3\033[0m\n"
    "Best configuration parameters:\n"
    "name: " +
    kBwdWeightBest +
    " (instance 5)\n"
    "avg_time: 0.00631771\n"
    "tflops: 182.987\n"
    "GB/s: 730.838, SplitK 8\n";

// No instance supports the problem: exit 0, valids 0, empty name.
const std::string kNoValid =
    "input: dim 4, lengths {1, 1, 3, 7}, strides {21, 21, 7, 1}\n"
    "DeviceGroupedConvFwdMultipleABD_Xdl_CShuffle<256, 256, 128, 32, Default, 32, 32, 4, 2, 8, "
    "8, 8, 1, 1> does not support this problem\n"
    "DeviceGroupedConvFwdMultipleABD_Xdl_CShuffle<64, 64, 64, 32, Default, 32, 32, 2, 2, 1, 1, "
    "1, 1, 1> does not support this problem\n"
    "\033[36mvalids: 0\033[0m\n"
    "Best configuration parameters:\n"
    "name: \n"
    "avg_time: 0\n"
    "tflops: 0\n"
    "GB/s: 0\n";

// time=0: times print as 0, TFlops and GB/s as inf; the first instance stays best.
const std::string kTimeOff =
    "Perf:          0 ms, inf TFlops, inf GB/s, InstA<64, 64>\n"
    "Perf:          0 ms, inf TFlops, inf GB/s, InstB<128, 128>\n"
    "\033[36mvalids: 2\033[0m\n"
    "Best configuration parameters:\n"
    "name: InstA<64, 64> (instance 0)\n"
    "avg_time: 0\n"
    "tflops: inf\n"
    "GB/s: inf\n";

// Tiny problems: exponents. No summary block (cut short): best from the Perf lines.
const std::string kExponents =
    "Perf: 1.2e-05 ms, 0.0001 TFlops, 3.5e+02 GB/s, Tiny<32, 1, Default>\n"
    "Perf: 9.5e-06 ms, 1.5e-04 TFlops, 4.4e+02 GB/s, Tinier<64, 2, OddC>\n";

// The one-line summary of older profilers.
const std::string kBestPerfLine =
    "Perf: 0.3 ms, 20 TFlops, 30 GB/s, Old<1, 2>\n"
    "Perf: 0.2 ms, 30 TFlops, 45 GB/s, Old<3, 4>\n"
    "Best Perf: 0.2 ms, 30 TFlops, 45 GB/s, Old<3, 4>\n";

struct OutputCase {
  const char* name;
  std::string out, err;
  bool signaled;
  int code;
  // Expected:
  bool has_best;
  std::string best_name;
  double avg_ms, tflops, gbps;
  std::string split_k;
  int valids, tried, supported;
  Outcome::Kind kind;
};

const double kInf = std::numeric_limits<double>::infinity();

std::vector<OutputCase> Cases() {
  using K = Outcome::Kind;
  return {
      {"fwd_current", kFwdCurrent, "", false, 0, true, kFwdName4, 0.229744, 51.3463, 2852.61, "", 3,
       5, 3, K::kSucceeded},
      {"fwd_older", kFwdOlder, "", false, 0, true,
       "DeviceGroupedConvFwdMultipleD_Xdl_CShuffle<256, 256, 128, 32, Filter1x1Pad0, 8, 8>", 0.0398,
       37.12, 647.9, "", -1, 2, 2, K::kSucceeded},
      {"bwd_data_current", kBwdDataCurrent, "", false, 0, true, kBwdDataBest, 0.0101, 114.987,
       392.9, "2", 2, 3, 2, K::kSucceeded},
      {"bwd_data_older", kBwdDataOlder, "", false, 0, true,
       "DeviceGroupedConvBwdDataMultipleD_Xdl_CShuffle_v1<256, 128, 128, 32, Default, 8, 2>", 0.25,
       10.5, 100, "", -1, 2, 2, K::kSucceeded},
      {"bwd_weight_all", kBwdWeightAll, "", false, 0, true, kBwdWeightBest, 0.00631771, 182.987,
       730.838, "8", 3, 4, 3, K::kSucceeded},
      {"no_valid_instance", kNoValid, "", false, 0, false, "", 0, 0, 0, "", 0, 2, 0,
       K::kUnsupported},
      {"verification_failure", kFwdCurrent,
       "Error: Incorrect results! out[17] != ref[17]: 1.5 != 1.25\n"
       "max err: 0.25, number of errors: 1, 0.0061% wrong values\n",
       false, 1, true, kFwdName4, 0.229744, 51.3463, 2852.61, "", 3, 5, 3, K::kFailed},
      {"time_off_inf", kTimeOff, "", false, 0, true, "InstA<64, 64>", 0, kInf, kInf, "", 2, 2, 2,
       K::kSucceeded},
      {"exponents", kExponents, "", false, 0, true, "Tinier<64, 2, OddC>", 9.5e-06, 1.5e-04, 440,
       "", -1, 2, 2, K::kSucceeded},
      {"best_perf_line", kBestPerfLine, "", false, 0, true, "Old<3, 4>", 0.2, 30, 45, "", -1, 2, 2,
       K::kSucceeded},
      {"not_implemented", "this data_type & layout is not implemented\n", "", false, 1, false, "",
       0, 0, 0, "", -1, 0, 0, K::kFailed},
      {"crash_midway", kExponents.substr(0, kExponents.find('\n') + 1), "", true, 11, true,
       "Tiny<32, 1, Default>", 1.2e-05, 0.0001, 350, "", -1, 1, 1, K::kCrashed},
      {"empty_output_exit0", "", "", false, 0, false, "", 0, 0, 0, "", -1, 0, 0, K::kUnsupported},
  };
}

void ExpectNear(double actual, double expected, const char* what, const char* name) {
  if (std::isinf(expected)) {
    EXPECT_TRUE(std::isinf(actual)) << name << ": " << what;
  } else {
    EXPECT_DOUBLE_EQ(actual, expected) << name << ": " << what;
  }
}

CkPerf ParseAll(const std::string& out, const std::string& err, size_t chunk) {
  CkOutputParser p;
  for (size_t i = 0; i < out.size(); i += chunk) p.Feed(std::string_view(out).substr(i, chunk));
  for (size_t i = 0; i < err.size(); i += chunk) {
    p.FeedStderr(std::string_view(err).substr(i, chunk));
  }
  p.Finish();
  return p.perf();
}

TEST(CkOutputParser, RealFormatSamples) {
  for (const OutputCase& c : Cases()) {
    for (size_t chunk : {size_t{1}, size_t{7}, size_t{4096}}) {
      CkPerf perf = ParseAll(c.out, c.err, chunk);
      SCOPED_TRACE(std::string(c.name) + " chunk " + std::to_string(chunk));
      EXPECT_EQ(perf.has_best, c.has_best);
      EXPECT_EQ(perf.best_name, c.best_name);
      ExpectNear(perf.avg_ms, c.avg_ms, "avg_ms", c.name);
      ExpectNear(perf.tflops, c.tflops, "tflops", c.name);
      ExpectNear(perf.gbps, c.gbps, "gbps", c.name);
      EXPECT_EQ(perf.split_k, c.split_k);
      EXPECT_EQ(perf.valids, c.valids);
      EXPECT_EQ(perf.instances_tried, c.tried);
      EXPECT_EQ(perf.instances_supported, c.supported);
      Outcome o = ClassifyExit(c.signaled, c.code, perf, c.err);
      EXPECT_EQ(OutcomeKindName(o.kind), OutcomeKindName(c.kind));
    }
  }
}

TEST(CkOutputParser, HeaderAndFlags) {
  CkPerf perf = ParseAll(kFwdCurrent, "", 64);
  EXPECT_EQ(perf.instances_found, 12);
  EXPECT_TRUE(perf.best_from_summary);
  EXPECT_FALSE(perf.verification_failed);
  EXPECT_EQ(perf.lines, 15u);

  perf = ParseAll(kFwdCurrent, "Error: Incorrect results!\n", 64);
  EXPECT_TRUE(perf.verification_failed);
  Outcome o = ClassifyExit(false, 1, perf);
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_EQ(o.reason, "exit code 1: verification failed (Error: Incorrect results!)");
  EXPECT_EQ(o.Summary(), "failed (exit 1): verification failed (Error: Incorrect results!)");
}

TEST(CkOutputParser, TopKFastestBestFirst) {
  CkPerf perf = ParseAll(kBwdWeightAll, "", 4096);
  ASSERT_EQ(perf.top.size(), 3u);
  EXPECT_DOUBLE_EQ(perf.top[0].tflops, 182.987);
  EXPECT_EQ(perf.top[0].split_k, "8");
  EXPECT_DOUBLE_EQ(perf.top[1].tflops, 142.5);
  EXPECT_EQ(perf.top[1].split_k, "8 (best occupancy)");
  EXPECT_EQ(perf.top[1].name, kBwdWeightBest);
  EXPECT_DOUBLE_EQ(perf.top[2].avg_ms, 0.0201);

  CkOutputParser two(2);
  std::string many;
  for (int i = 1; i <= 50; ++i) {
    many += "Perf: " + std::to_string(100.0 / i) + " ms, " + std::to_string(i) +
            " TFlops, 1 GB/s, Inst<" + std::to_string(i) + ", x>\n";
  }
  two.Feed(many);
  two.Finish();
  ASSERT_EQ(two.perf().top.size(), 2u);
  EXPECT_EQ(two.perf().top[0].name, "Inst<50, x>");
  EXPECT_EQ(two.perf().top[1].name, "Inst<49, x>");
  EXPECT_EQ(two.perf().best_name, "Inst<50, x>");
  EXPECT_EQ(two.perf().instances_supported, 50);
}

TEST(CkOutputParser, NamesAreNeverSplitOnCommas) {
  InstancePerf p;
  ASSERT_TRUE(ParsePerfLine(
      "Perf:   0.5 ms, 1 TFlops, 2 GB/s, A<1, 2, SplitK, 3>, B, C, SplitK 4 (best occupancy)", &p));
  EXPECT_EQ(p.name, "A<1, 2, SplitK, 3>, B, C");
  EXPECT_EQ(p.split_k, "4 (best occupancy)");
  ASSERT_TRUE(ParsePerfLine("Perf: 1 ms, 2 TFlops, 3 GB/s, X<a, b>, SplitK -1", &p));
  EXPECT_EQ(p.name, "X<a, b>");
  EXPECT_EQ(p.split_k, "-1");
  EXPECT_FALSE(ParsePerfLine("Perf: fast ms, 2 TFlops, 3 GB/s, X", &p));
  EXPECT_FALSE(ParsePerfLine("Perf: 1 ms, 2 TFlops, 3 GB/s, ", &p));
  EXPECT_FALSE(ParsePerfLine("Performance is great", &p));
}

TEST(CkOutputParser, AnsiAndCarriageReturns) {
  EXPECT_EQ(StripAnsi("\033[36mvalids: 3\033[0m"), "valids: 3");
  EXPECT_EQ(StripAnsi("a\033[1;31mb\033[0mc\033(Bd"), "abcd");
  CkOutputParser p;
  p.Feed("\033[32mPerf:\033[0m 1 ms, 2 TFlops, 3 GB/s, \033[1mN<1, 2>\033[0m\r\n");
  p.Feed("\033[36mvalids: 1\033[0m\r\n");
  p.Finish();
  EXPECT_EQ(p.perf().best_name, "N<1, 2>");
  EXPECT_EQ(p.perf().valids, 1);
}

TEST(CkOutputParser, HugeLinesStayBounded) {
  CkOutputParser p;
  std::string mib(1 << 20, '7');
  p.Feed("in_host : ");
  for (int i = 0; i < 32; ++i) p.Feed(mib);  // one 32 MiB line
  p.Feed("\nPerf: 2 ms, 3 TFlops, 4 GB/s, After<1, 2>\n");
  p.Finish();
  EXPECT_EQ(p.perf().truncated_lines, 1u);
  EXPECT_EQ(p.perf().best_name, "After<1, 2>");
  EXPECT_DOUBLE_EQ(p.perf().avg_ms, 2);
}

TEST(CkOutputParser, UnterminatedLastLineCountsAtFinish) {
  CkOutputParser p;
  p.Feed("Perf: 2 ms, 3 TFlops, 4 GB/s, Last<1>");
  EXPECT_FALSE(p.perf().has_best);
  p.Finish();
  EXPECT_TRUE(p.perf().has_best);
  EXPECT_EQ(p.perf().best_name, "Last<1>");
}

TEST(ClassifyExit, Reasons) {
  CkPerf none;
  Outcome crashed = ClassifyExit(true, 11, none);
  EXPECT_EQ(crashed.kind, Outcome::Kind::kCrashed);
  EXPECT_EQ(crashed.signal, 11);
  EXPECT_EQ(crashed.reason, "SIGSEGV");
  EXPECT_EQ(crashed.Summary(), "crashed (SIGSEGV)");

  Outcome shell_abort = ClassifyExit(false, 134, none);
  EXPECT_EQ(shell_abort.kind, Outcome::Kind::kFailed);
  EXPECT_EQ(shell_abort.reason, "exit code 134: as a shell reports death by SIGABRT");

  Outcome stderr_line = ClassifyExit(false, 3, none, "warning\nHIP error: no device\n\n");
  EXPECT_EQ(stderr_line.reason, "exit code 3: HIP error: no device");
  EXPECT_EQ(stderr_line.Summary(), "failed (exit 3): HIP error: no device");

  CkPerf usage;
  usage.usage_printed = true;
  EXPECT_EQ(ClassifyExit(false, 1, usage).reason,
            "exit code 1: wrong arguments: the profiler printed its usage");

  CkOutputParser p;
  p.FeedStderr("cannot find operation: grouped_conv_fwdd\n");
  p.Finish();
  EXPECT_EQ(ClassifyExit(false, 1, p.perf()).reason,
            "exit code 1: the profiler does not know this operation (cannot find operation)");

  CkPerf unsupported = ParseAll(kNoValid, "", 4096);
  Outcome u = ClassifyExit(false, 0, unsupported);
  EXPECT_EQ(u.Summary(), "unsupported: no instance supports this problem (valids: 0)");
  EXPECT_FALSE(u.ok());
}

TEST(Outcome, NamesRoundTrip) {
  using K = Outcome::Kind;
  const std::pair<K, const char*> names[] = {
      {K::kSucceeded, "succeeded"},     {K::kUnsupported, "unsupported"},
      {K::kFailed, "failed"},           {K::kCrashed, "crashed"},
      {K::kTimedOut, "timed_out"},      {K::kCancelled, "cancelled"},
      {K::kInterrupted, "interrupted"}, {K::kSpawnFailed, "spawn_failed"}};
  for (const auto& [kind, name] : names) {
    EXPECT_EQ(OutcomeKindName(kind), name);
    EXPECT_EQ(ParseOutcomeKindName(name), kind) << name;
  }
  EXPECT_EQ(ParseOutcomeKindName("success"), std::nullopt);
  EXPECT_EQ(SignalName(9), "SIGKILL");
  EXPECT_EQ(FormatSeconds(30), "30 s");
  EXPECT_EQ(FormatSeconds(0.2), "0.2 s");
  Outcome t{Outcome::Kind::kTimedOut, 0, 15, "timed out after 30 s"};
  EXPECT_EQ(t.Summary(), "timed out after 30 s");
  Outcome s{Outcome::Kind::kSpawnFailed, 0, 0, "cannot execute /x: No such file or directory"};
  EXPECT_EQ(s.Summary(), "spawn failed: cannot execute /x: No such file or directory");
}

}  // namespace
}  // namespace ckprof

// ckprofiler-emu: the profiling itself. A deterministic set of instances per operation (named
// like CK's, some unsupported), simulated times from the problem's FLOPs and bytes, CK's output
// format, and the injected faults.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/emulator/emu.h"

namespace ckemu {
namespace {

enum class Spec { kDefault, k1x1Stride1Pad0, k1x1Pad0, kOddC, kNever };

const char* SpecName(Spec s) {
  switch (s) {
    case Spec::k1x1Stride1Pad0:
      return "Filter1x1Stride1Pad0";
    case Spec::k1x1Pad0:
      return "Filter1x1Pad0";
    case Spec::kOddC:
      return "OddC";
    default:
      return "Default";
  }
}

struct Instance {
  std::string name;
  int va = 1;  // vector width along the channels read (fwd: C; bwd: K)
  int vb = 1;  // vector width along the channels written (fwd: K; bwd: C)
  Spec spec = Spec::kDefault;
  double factor = 1.0;  // slowness relative to the ideal kernel
  bool picky = false;   // rejects about a quarter of problems (deterministically)
  int m_per_block = 128, n_per_block = 128;
};

// "<256, 128, 128, 32, Default, ...>": block sizes, specialisation, then the rest.
std::string Params(std::initializer_list<int> head, Spec spec, std::initializer_list<int> tail,
                   const std::string& extra = "") {
  std::string s = "<";
  for (int v : head) s += std::to_string(v) + ", ";
  s += SpecName(spec);
  for (int v : tail) s += ", " + std::to_string(v);
  if (!extra.empty()) s += ", " + extra;
  return s + ">";
}

std::vector<Instance> FwdInstances() {
  const std::string xdl = "DeviceGroupedConvFwdMultipleABD_Xdl_CShuffle";
  const std::string v3 = "DeviceGroupedConvFwdMultipleABD_Xdl_CShuffle_V3";
  using S = Spec;
  return {
      {xdl + Params({256, 256, 128, 32}, S::kDefault, {32, 32, 4, 2, 8, 8, 8, 1, 1}), 8, 8,
       S::kDefault, 1.00, false, 256, 128},
      {xdl + Params({256, 128, 256, 32}, S::kDefault, {32, 32, 2, 4, 8, 8, 8, 1, 1}), 8, 8,
       S::kDefault, 1.06, false, 128, 256},
      {xdl + Params({256, 128, 128, 32}, S::k1x1Stride1Pad0, {32, 32, 2, 2, 8, 8, 8, 1, 1}), 8, 8,
       S::k1x1Stride1Pad0, 0.84, false, 128, 128},
      {xdl + Params({128, 128, 64, 32}, S::k1x1Pad0, {32, 32, 2, 2, 8, 8, 8, 1, 1}), 8, 8,
       S::k1x1Pad0, 0.93, false, 128, 64},
      {xdl + Params({256, 128, 128, 32}, S::kDefault, {32, 32, 2, 2, 4, 4, 4, 1, 1}), 4, 4,
       S::kDefault, 1.27, false, 128, 128},
      {xdl + Params({64, 64, 32, 32}, S::kDefault, {32, 32, 2, 1, 2, 2, 2, 1, 1}), 2, 2,
       S::kDefault, 1.92, false, 64, 32},
      {xdl + Params({64, 64, 64, 32}, S::kDefault, {32, 32, 2, 2, 1, 1, 1, 1, 1}), 1, 1,
       S::kDefault, 3.21, false, 64, 64},
      {v3 + Params({256, 256, 256, 64}, S::kDefault, {16, 16, 8, 8, 8, 8, 8, 1, 2},
                   "BlkGemmPipelineScheduler: Intrawave, BlkGemmPipelineVersion: v3"),
       8, 8, S::kDefault, 0.91, true, 256, 256},
      {v3 + Params({256, 128, 128, 64}, S::kDefault, {16, 16, 4, 4, 8, 8, 8, 1, 1},
                   "BlkGemmPipelineScheduler: Interwave, BlkGemmPipelineVersion: v1"),
       8, 8, S::kDefault, 1.12, true, 128, 128},
      {"DeviceGroupedConvFwdMultipleABD_Wmma_CShuffle" +
           Params({128, 64, 64, 32}, S::kDefault, {16, 16, 2, 2, 8, 8, 8, 1, 1}),
       8, 8, S::kNever, 1.0, false, 64, 64},
      {xdl + Params({256, 256, 128, 32}, S::kOddC, {32, 32, 4, 2, 1, 8, 8, 1, 1}), 1, 8, S::kOddC,
       2.48, false, 256, 128},
      {"DeviceGroupedConvFwdMultipleD_Xdl_CShuffle_Large_Tensor" +
           Params({256, 128, 128, 32}, S::kDefault, {32, 32, 2, 2, 8, 8, 8, 1, 1}),
       8, 8, S::kDefault, 1.41, false, 128, 128},
  };
}

std::vector<Instance> BwdDataInstances() {
  const std::string v1 = "DeviceGroupedConvBwdDataMultipleD_Xdl_CShuffle_v1";
  using S = Spec;
  return {
      {v1 + Params({256, 256, 128, 32}, S::kDefault, {8, 2, 32, 32, 4, 2, 8, 8, 1, 1}), 8, 8,
       S::kDefault, 1.00, false, 256, 128},
      {v1 + Params({256, 128, 256, 32}, S::kDefault, {8, 2, 32, 32, 2, 4, 8, 8, 1, 1}), 8, 8,
       S::kDefault, 1.08, false, 128, 256},
      {v1 + Params({256, 128, 128, 64}, S::k1x1Stride1Pad0, {8, 2, 32, 32, 2, 2, 8, 8, 1, 1}), 8, 8,
       S::k1x1Stride1Pad0, 0.81, false, 128, 128},
      {v1 + Params({128, 128, 64, 32}, S::kDefault, {8, 2, 32, 32, 2, 2, 4, 4, 1, 1}), 4, 4,
       S::kDefault, 1.31, false, 128, 64},
      {v1 + Params({64, 64, 32, 32}, S::kDefault, {8, 2, 32, 32, 2, 1, 2, 2, 1, 1}), 2, 2,
       S::kDefault, 2.02, false, 64, 32},
      {v1 + Params({64, 64, 64, 32}, S::kDefault, {8, 2, 32, 32, 2, 2, 1, 1, 1, 1}), 1, 1,
       S::kDefault, 3.37, false, 64, 64},
      {v1 + Params({256, 256, 256, 32}, S::kDefault, {8, 8, 32, 32, 4, 4, 8, 8, 1, 1}), 8, 8,
       S::kDefault, 0.92, true, 256, 256},
      {"DeviceGroupedConvBwdDataMultipleD_Wmma_CShuffle" +
           Params({128, 64, 64, 32}, S::kDefault, {8, 16, 16, 2, 2, 8, 8, 1, 1}),
       8, 8, S::kNever, 1.0, false, 64, 64},
      {v1 + Params({256, 128, 128, 32}, S::kDefault, {8, 2, 16, 16, 4, 4, 8, 8, 1, 1}), 8, 8,
       S::kDefault, 1.16, true, 128, 128},
      {v1 + Params({128, 64, 128, 32}, S::kDefault, {8, 2, 32, 32, 1, 2, 8, 8, 1, 1}), 8, 8,
       S::kDefault, 1.22, false, 64, 128},
  };
}

std::vector<Instance> BwdWeightInstances() {
  const std::string xdl = "DeviceGroupedConvBwdWeight_Xdl_CShuffle";
  using S = Spec;
  return {
      {xdl + Params({256, 256, 128, 4}, S::kDefault, {8, 32, 32, 4, 2, 8, 8, 8}), 8, 8, S::kDefault,
       1.00, false, 256, 128},
      {xdl + Params({256, 128, 256, 4}, S::kDefault, {8, 32, 32, 2, 4, 8, 8, 8}), 8, 8, S::kDefault,
       1.07, false, 128, 256},
      {xdl + Params({128, 128, 128, 4}, S::k1x1Stride1Pad0, {8, 32, 32, 4, 2, 8, 8, 8}), 8, 8,
       S::k1x1Stride1Pad0, 0.86, false, 128, 128},
      {xdl + Params({64, 64, 64, 4}, S::kDefault, {8, 32, 32, 2, 2, 1, 1, 1}), 1, 1, S::kDefault,
       3.05, false, 64, 64},
      {xdl + Params({128, 128, 64, 4}, S::kDefault, {8, 32, 32, 2, 2, 4, 4, 4}), 4, 4, S::kDefault,
       1.33, false, 128, 64},
      {"DeviceGroupedConvBwdWeight_Xdl_CShuffleV3" +
           Params({256, 128, 128, 32}, S::kDefault, {8, 32, 32, 2, 2, 8, 8, 8},
                  "BlkGemmPipelineScheduler: Intrawave, BlkGemmPipelineVersion: v1"),
       8, 8, S::kDefault, 0.90, true, 128, 128},
      {"DeviceGroupedConvBwdWeightTwoStage_Xdl_CShuffle" +
           Params({256, 128, 128, 32}, S::kDefault, {8, 32, 32, 2, 2, 4, 4, 4, 4}),
       4, 4, S::kDefault, 1.18, false, 128, 128},
      {"DeviceGroupedConvBwdWeightMultipleD_Xdl_CShuffle" +
           Params({256, 256, 128, 4}, S::kDefault, {8, 32, 32, 4, 2, 8, 8, 8}),
       8, 8, S::kDefault, 1.11, true, 256, 128},
      {"DeviceGroupedConvBwdWeight_Wmma_CShuffle" +
           Params({128, 64, 64, 4}, S::kDefault, {8, 16, 16, 2, 2, 8, 8, 8}),
       8, 8, S::kNever, 1.0, false, 64, 64},
      {xdl + Params({256, 64, 128, 4}, S::kDefault, {8, 32, 32, 1, 2, 2, 2, 2}), 2, 2, S::kDefault,
       1.79, false, 64, 128},
  };
}

uint64_t Hash(const std::string& s, uint64_t salt) {
  uint64_t h = 1469598103934665603ull ^ (salt * 0x9e3779b97f4a7c15ull);
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 32);
}

// Element sizes of (input, weight, output) for the operation's data_type enum.
struct ElementSizes {
  int in, wei, out;
  double peak_tflops;
};

ElementSizes Sizes(const Problem& p) {
  switch (p.op) {
    case Op::kFwd:
      switch (p.data_type) {
        case 0:
          return {4, 4, 4, 80};
        case 3:
          return {1, 1, 1, 800};
        case 8:
          return {4, 4, 4, 160};
        default:
          return {2, 2, 2, 400};
      }
    case Op::kBwdData:
      switch (p.data_type) {
        case 0:
          return {4, 4, 4, 80};
        case 3:
          return {4, 4, 4, 160};
        default:
          return {2, 2, 2, 400};
      }
    case Op::kBwdWeight:
      switch (p.data_type) {
        case 0:
          return {4, 4, 4, 80};
        case 2:
          return {2, 4, 2, 300};
        case 4:
          return {1, 1, 1, 800};
        case 6:
          return {4, 4, 4, 160};
        default:
          return {2, 2, 2, 400};
      }
  }
  return {2, 2, 2, 400};
}

int64_t Product(const std::vector<int64_t>& v) {
  int64_t r = 1;
  for (int64_t x : v) r *= x;
  return r;
}

// A tensor descriptor as CK's HostTensorDescriptor prints it. `lengths` are in CK's logical
// order (G, N, C, spatial...); `order` lists logical dimensions from outermost to innermost.
std::string Desc(const std::vector<int64_t>& lengths, const std::vector<int>& order) {
  std::vector<int64_t> strides(lengths.size(), 0);
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[static_cast<size_t>(*it)] = stride;
    stride *= lengths[static_cast<size_t>(*it)];
  }
  std::string s = "dim " + std::to_string(lengths.size()) + ", lengths {";
  for (size_t i = 0; i < lengths.size(); ++i) s += (i ? ", " : "") + std::to_string(lengths[i]);
  s += "}, strides {";
  for (size_t i = 0; i < strides.size(); ++i) s += (i ? ", " : "") + std::to_string(strides[i]);
  return s + "}";
}

// Memory orders (outermost first) over logical (G, N|K, C|K, spatial...) dims.
enum class Mem { kGNHWC, kNHWGC, kNGCHW, kGNCHW, kGKYXC, kGKCYX };

std::vector<int> Order(Mem m, int nd) {
  // Outer logical dims, then spatial dims (3..), then inner logical dims.
  const char* outer = "";
  const char* inner = "";
  switch (m) {
    case Mem::kGNHWC:
    case Mem::kGKYXC:
      outer = "01";
      inner = "2";
      break;
    case Mem::kNHWGC:
      outer = "1";
      inner = "02";
      break;
    case Mem::kNGCHW:
      outer = "102";
      break;
    case Mem::kGNCHW:
    case Mem::kGKCYX:
      outer = "012";
      break;
  }
  std::vector<int> o;
  for (const char* c = outer; *c; ++c) o.push_back(*c - '0');
  for (int i = 0; i < nd; ++i) o.push_back(3 + i);
  for (const char* c = inner; *c; ++c) o.push_back(*c - '0');
  return o;
}

// (activation layout, weight layout) for the operation's layout enum.
std::pair<Mem, Mem> Layouts(const Problem& p) {
  if (p.op == Op::kBwdWeight) {
    switch (p.layout) {
      case 0:
        return {Mem::kGNCHW, Mem::kGKCYX};
      case 1:
        return {Mem::kGNHWC, Mem::kGKYXC};
      case 2:
        return {Mem::kNHWGC, Mem::kGKYXC};
      case 3:
        return {Mem::kNGCHW, Mem::kGKYXC};
      default:
        return {Mem::kNGCHW, Mem::kGKCYX};
    }
  }
  switch (p.layout) {
    case 0:
      return {Mem::kGNHWC, Mem::kGKYXC};
    case 1:
      return {Mem::kNHWGC, Mem::kGKYXC};
    case 2:
      return {Mem::kNGCHW, Mem::kGKYXC};
    default:
      return {Mem::kNGCHW, Mem::kGKCYX};
  }
}

bool AllEqual(const std::vector<int64_t>& v, int64_t x) {
  return std::all_of(v.begin(), v.end(), [x](int64_t e) { return e == x; });
}

// Whether an instance can run the problem at all (before split-K).
bool Supports(const Instance& in, size_t index, const Problem& p, bool problem_ok) {
  if (!problem_ok || in.spec == Spec::kNever) return false;
  const int64_t read = p.op == Op::kFwd ? p.C : p.K;
  const int64_t written = p.op == Op::kFwd ? p.K : p.C;
  if (read % in.va != 0 || written % in.vb != 0) return false;
  const bool filter1 = AllEqual(p.filter, 1);
  const bool pad0 = AllEqual(p.left_pads, 0) && AllEqual(p.right_pads, 0);
  switch (in.spec) {
    case Spec::k1x1Stride1Pad0:
      if (!filter1 || !pad0 || !AllEqual(p.strides, 1)) return false;
      break;
    case Spec::k1x1Pad0:
      if (!filter1 || !pad0) return false;
      break;
    case Spec::kOddC:
      if (p.C % 2 == 0) return false;
      break;
    default:
      break;
  }
  return !in.picky || Hash(p.key, index + 101) % 4 != 0;
}

// CK's "best occupancy" split-K for bwd_weight: enough workgroups to fill 304 CUs twice.
int DeducedSplitK(const Instance& in, const Problem& p) {
  const int64_t gemm_m = p.K, gemm_n = p.C * Product(p.filter);
  const int64_t tiles = p.G * ((gemm_m + in.m_per_block - 1) / in.m_per_block) *
                        ((gemm_n + in.n_per_block - 1) / in.n_per_block);
  const int64_t gemm_k = p.N * Product(p.OutputSpatial());
  int k = 1;
  while (k < 128 && tiles * k * 2 <= 608 && gemm_k / (k * 2) >= 32) k *= 2;
  return k;
}

void PrintTensorDump(const char* name, int64_t count, int init) {
  std::cout << name << " : ";
  const int64_t shown = std::min<int64_t>(count, 64);
  for (int64_t i = 0; i < shown; ++i) {
    if (i) std::cout << ",";
    std::cout << (init == 0   ? 0.0
                  : init == 1 ? static_cast<double>((i * 7) % 5 - 2)
                              : ((i * 37) % 100) / 50.0 - 1.0);
  }
  if (count > shown) std::cout << ",... (" << count << " values)";
  std::cout << std::endl;
}

// CKEMU_HUGE_BYTES of tensor-dump lines (1 MiB each), as CK prints with log=1.
void PrintHuge(uint64_t bytes) {
  std::string line = "in_host : ";
  while (line.size() < (1u << 20) - 1) line += "0.5,-1.25,";
  line.resize((1u << 20) - 1);
  line += '\n';
  while (bytes > 0) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(bytes, line.size()));
    if (n < line.size()) {
      std::cout.write(line.data(), static_cast<std::streamsize>(n - 1)) << '\n';
    } else {
      std::cout.write(line.data(), static_cast<std::streamsize>(n));
    }
    bytes -= n;
  }
  std::cout.flush();
}

[[noreturn]] void Hang() {
  std::cout.flush();
  std::cerr.flush();
  for (;;) pause();
}

// Acts on a fault that strikes mid-run (after a few instances). Returns an exit code >= 0 when
// the run must end with it, -1 to go on.
int StrikeMidRun(Fault fault) {
  switch (fault) {
    case Fault::kHang:
    case Fault::kHangNoTerm:
      Hang();
    case Fault::kCrash:
      std::cout.flush();
      DieBySignal("crashed", SIGSEGV);
    case Fault::kAbort:
      std::cout.flush();
      std::cerr << "ckprofiler-emu: injected abort" << std::endl;
      DieBySignal("aborted", SIGABRT);
    case Fault::kFail:
      std::cerr << "HIP error: hipErrorIllegalAddress (injected by ckprofiler-emu)" << std::endl;
      return Exit("failed", GetSettings().fail_code);
    default:
      return -1;
  }
}

}  // namespace

int Profile(const Problem& p, Fault fault) {
  const Settings& settings = GetSettings();
  if (fault == Fault::kSlowStart) SleepMs(settings.slow_start_ms);
  if (fault == Fault::kHangNoTerm) signal(SIGTERM, SIG_IGN);
  if (fault == Fault::kForkChild) {
    pid_t child = fork();
    if (child == 0) {
      SleepMs(3600 * 1000.0);
      _exit(0);
    }
    std::cerr << "ckprofiler-emu: background child pid " << child << std::endl;
  }

  std::cout << HeaderLine() << std::endl;
  const std::vector<int64_t> out_spatial = p.OutputSpatial();
  const auto [act, wei] = Layouts(p);
  std::vector<int64_t> in_len = {p.G, p.N, p.C}, wei_len = {p.G, p.K, p.C},
                       out_len = {p.G, p.N, p.K};
  in_len.insert(in_len.end(), p.input.begin(), p.input.end());
  wei_len.insert(wei_len.end(), p.filter.begin(), p.filter.end());
  out_len.insert(out_len.end(), out_spatial.begin(), out_spatial.end());
  const std::string in_desc = Desc(in_len, Order(act, p.nd));
  const std::string wei_desc = Desc(wei_len, Order(wei, p.nd));
  const std::string out_desc = Desc(out_len, Order(act, p.nd));
  if (p.op == Op::kBwdData) {
    std::cout << "out: " << out_desc << "\nwei: " << wei_desc << "\nin: " << in_desc << std::endl;
  } else {
    std::cout << "input: " << in_desc << "\nweight: " << wei_desc << "\noutput: " << out_desc
              << std::endl;
  }

  const std::vector<Instance> instances = p.op == Op::kFwd       ? FwdInstances()
                                          : p.op == Op::kBwdData ? BwdDataInstances()
                                                                 : BwdWeightInstances();
  std::cout << "found " << instances.size() << " instances" << std::endl;
  if (fault == Fault::kDeviceError) {
    // CK's DeviceMem: hip_check_error throws, nobody catches (OnTerminate: SIGABRT).
    throw std::runtime_error(
        "HIP runtime error: hipErrorNoDevice (injected by ckprofiler-emu). "
        "library/src/utility/device_memory.cpp: 14in function: DeviceMem");
  }
  if (p.log) {
    PrintTensorDump("input", Product(in_len), p.init);
    PrintTensorDump("weight", Product(wei_len), p.init);
  }
  if (fault == Fault::kHugeOutput) PrintHuge(settings.huge_bytes);

  // The problem as CK measures it (ConvParam::GetFlops / GetByte).
  const ElementSizes sizes = Sizes(p);
  bool problem_ok = p.G > 0 && p.N > 0 && p.K > 0 && p.C > 0 && fault != Fault::kUnsupported;
  for (size_t d = 0; d < static_cast<size_t>(p.nd); ++d) {
    problem_ok = problem_ok && out_spatial[d] > 0 && p.filter[d] > 0 && p.input[d] > 0 &&
                 p.strides[d] > 0 && p.dilations[d] > 0;
  }
  const std::size_t flop = problem_ok
                               ? static_cast<std::size_t>(2 * p.G * p.N * p.K * p.C *
                                                          Product(out_spatial) * Product(p.filter))
                               : 0;
  const std::size_t num_btype = problem_ok ? static_cast<std::size_t>(sizes.in * Product(in_len) +
                                                                      sizes.wei * Product(wei_len) +
                                                                      sizes.out * Product(out_len))
                                           : 0;
  // Simulated GPU: peak TFlops for the type, 4 TB/s, 4 us launch overhead.
  const double ideal_ms = std::max(static_cast<double>(flop) / (sizes.peak_tflops * 1e9),
                                   static_cast<double>(num_btype) / 4e9) +
                          0.004;
  const int runs_per_instance = p.time ? 55 : 1;

  // Split-K values to try.
  std::vector<int> split_ks = {0};  // 0: no split-K argument (fwd, older bwd_data)
  if (p.op == Op::kBwdWeight) {
    if (p.split_k == "all") {
      split_ks = {-1, 1, 2, 4, 8, 16, 32, 64, 128};
    } else {
      split_ks = {std::stoi(p.split_k)};
    }
  } else if (p.op == Op::kBwdData && !p.split_k.empty()) {
    int k = std::stoi(p.split_k);
    if (k == 0 || k == -1) {
      split_ks = {1, 2, 4, 8, 16, 32, 64, 128};
    } else {
      split_ks = {k};
    }
  }

  int valids = 0, lines = 0;
  float best_avg_time = 0, best_tflops = 0, best_gb_per_sec = 0;
  std::string best_op_name, best_split_k;
  int best_op_id = -1;
  for (size_t idx = 0; idx < instances.size(); ++idx) {
    const Instance& in = instances[idx];
    const bool supports = Supports(in, idx, p, problem_ok);
    for (int k : split_ks) {
      if (lines == 3) {
        int code = StrikeMidRun(fault);
        if (code >= 0) return code;
      }
      ++lines;
      std::string split_str;
      double split_factor = 1.0;
      bool ok = supports;
      if (p.op == Op::kBwdWeight) {
        const int ideal = DeducedSplitK(in, p);
        const int gemm_k = static_cast<int>(std::min<int64_t>(p.N * Product(out_spatial), 1 << 30));
        if (k == -1) {
          split_str = std::to_string(ideal) + " (best occupancy)";
        } else {
          split_str = std::to_string(k);
          ok = ok && k >= 1 && gemm_k / k >= 32;
          if (ok) split_factor = 1.0 + 0.12 * std::fabs(std::log2(k) - std::log2(ideal));
        }
      } else if (p.op == Op::kBwdData && k != 0) {
        split_str = std::to_string(k);
        const int64_t gemm_k = p.K * Product(p.filter);
        ok = ok && k >= 1 && gemm_k / k >= 32;
        if (ok) split_factor = 1.0 + 0.1 * std::log2(k);
      }
      if (!ok) {
        std::cout << in.name << " does not support this problem" << std::endl;
        continue;
      }
      const double jitter =
          1.0 +
          0.1 *
              static_cast<double>(Hash(p.key, idx * 131 + 7 + static_cast<size_t>(k + 1)) % 1000) /
              1000.0;
      const double sim_ms = ideal_ms * in.factor * split_factor * jitter * PinSlowdown();
      SleepMs(sim_ms * runs_per_instance * settings.time_scale);
      const float avg_time = p.time ? static_cast<float>(sim_ms) : 0.0f;
      const float tflops = static_cast<float>(flop) / 1.E9 / avg_time;
      const float gb_per_sec = num_btype / 1.E6 / avg_time;
      std::cout << "Perf: " << std::setw(10) << avg_time << " ms, " << tflops << " TFlops, "
                << gb_per_sec << " GB/s, " << in.name;
      if (!split_str.empty()) std::cout << ", SplitK " << split_str;
      std::cout << std::endl;
      ++valids;
      if (tflops > best_tflops) {
        best_op_name = in.name;
        best_op_id = static_cast<int>(idx);
        best_avg_time = avg_time;
        best_tflops = tflops;
        best_gb_per_sec = gb_per_sec;
        best_split_k = split_str;
      }
    }
  }
  if (lines < 4) {  // fewer instances than the strike point: strike at the end
    int code = StrikeMidRun(fault);
    if (code >= 0) return code;
  }

  if (!settings.old_format) {
    std::cout << "\033[36mvalids: " << valids << "\033[0m" << std::endl;
  }
  const bool instance_suffix = !settings.old_format && p.op != Op::kBwdData;
  std::cout << "Best configuration parameters:\nname: " << best_op_name;
  if (instance_suffix && !best_op_name.empty()) std::cout << " (instance " << best_op_id << ")";
  std::cout << "\navg_time: " << best_avg_time << "\ntflops: " << best_tflops
            << "\nGB/s: " << best_gb_per_sec;
  if (p.op != Op::kFwd && !(p.op == Op::kBwdData && settings.old_format)) {
    std::cout << ", SplitK " << best_split_k;
  }
  std::cout << std::endl;

  if (fault == Fault::kVerifyFail) {
    std::cerr << "Error: Incorrect results! out[17] != ref[17]: 1.5 != 1.25" << std::endl;
    std::cerr << "max err: 0.25, number of errors: 1, 0.0061% wrong values" << std::endl;
    return Exit("verify_failed", 1);
  }
  if (fault == Fault::kForkChild) return Exit("succeeded", 0);
  return Exit(valids > 0 ? "succeeded" : "unsupported", 0);
}

}  // namespace ckemu

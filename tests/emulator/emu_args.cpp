// ckprofiler-emu: CK's argument handling for the grouped-convolution operations, reproduced:
// the argc checks with the help text, std::stoi/std::stol parsing (an uncaught exception
// aborts, as in CK), and the per-operation dispatch tables ("not implemented" holes).
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include "tests/emulator/emu.h"

namespace ckemu {
namespace {

const char* const kConvParamHelp =
    "Following arguments (depending on number of spatial dims):\n"
    " Number of spatial dimensions (1=Conv1d, 2=Conv2d, 3=Conv3d)\n"
    " G, N, K, C, \n"
    " <filter spatial dimensions>, (ie Y, X for 2D)\n"
    " <input image spatial dimensions>, (ie Hi, Wi for 2D)\n"
    " <strides>, (ie Sy, Sx for 2D)\n"
    " <dilations>, (ie Dy, Dx for 2D)\n"
    " <left padding>, (ie LeftPy, LeftPx for 2D)\n"
    " <right padding>, (ie RightPy, RightPx for 2D)\n";

void PrintHelp(Op op) {
  std::ostream& os = std::cout;
  switch (op) {
    case Op::kFwd:
      os << "arg1: tensor operation (grouped_conv_fwd: Grouped Convolution Forward)\n"
         << "arg2: data type (0: Input fp32, Weight fp32, Output fp32\n"
         << "                 1: Input fp16, Weight fp16, Output fp16\n"
         << "                 2: Input bf16, Weight bf16, Output bf16\n"
         << "                 3: Input int8, Weight int8, Output int8\n"
         << "                 8: Input tf32, Weight tf32, Output fp32)\n"
         << "arg3: tensor layout (0: Input[G, N, Hi, Wi, C], Weight[G, K, Y, X, C], Output[G, N, "
            "Ho, Wo, K]\n"
         << "                     1: Input[N, Hi, Wi, G, C], Weight[G, K, Y, X, C], Output[N, Ho, "
            "Wo, G, K]\n"
         << "                     2: Input[N, G, C, Hi, Wi], Weight[G, K, Y, X, C], Output[N, G, "
            "K, Ho, Wo]\n"
         << "                     3: Input[N, G, C, Hi, Wi], Weight[G, K, C, Y, X], Output[N, G, "
            "K, Ho, Wo])\n"
         << "arg4: indexing data type (0: 32-bit, 1: 64-bit)\n"
         << "arg5: verification (0: no, 1: yes)\n"
         << "arg6: initialization (0: no init, 1: integer value, 2: decimal value)\n"
         << "arg7: print tensor value (0: no; 1: yes)\n"
         << "arg8: time kernel (0: no, 1: yes)\n"
         << kConvParamHelp << std::endl;
      break;
    case Op::kBwdData:
      os << "arg1: tensor operation (grouped_conv_bwd_data: Grouped Convolution Backward Data)\n"
         << "arg2: data type (0: Output fp32, Weight fp32, Input fp32\n"
         << "                 1: Output fp16, Weight fp16, Input fp16\n"
         << "                 2: Output bf16, Weight bf16, Input bf16\n"
         << "                 3: Output tf32, Weight tf32, Input fp32)\n"
         << "arg3: tensor layout (0: Output[G, N, Ho, Wo, K], Weight[G, K, Y, X, C], Input[G, N, "
            "Hi, Wi, C]\n"
         << "                     1: Output[N, Ho, Wo, G, K], Weight[G, K, Y, X, C], Input[N, Hi, "
            "Wi, G, C]\n"
         << "                     2: Output[N, G, K, Ho, Wo], Weight[G, K, Y, X, C], Input[N, G, "
            "C, Hi, Wi]\n"
         << "                     3: Output[N, G, K, Ho, Wo], Weight[G, K, C, Y, X], Input[N, G, "
            "C, Hi, Wi])\n"
         << "arg4: verification (0: no, 1: yes)\n"
         << "arg5: initialization (0: no init, 1: integer value, 2: decimal value)\n"
         << "arg6: print tensor value (0: no; 1: yes)\n"
         << "arg7: time kernel (0: no, 1: yes)\n"
         << kConvParamHelp;
      if (!GetSettings().old_format) {
        os << " SplitK (-1 or 0 for a sweep over 1, 2, 4, ..., 128)\n";
      }
      os << std::endl;
      break;
    case Op::kBwdWeight:
      os << "arg1: tensor operation (grouped_conv_bwd_weight: Grouped Convolution Backward "
            "Weight)\n"
         << "arg2: data type (0: Input fp32, Weight fp32, Output fp32\n"
         << "                 1: Input fp16, Weight fp16, Output fp16\n"
         << "                 2: Input bf16, Weight fp32, Output bf16\n"
         << "                 4: Input int8, Weight int8, Output int8\n"
         << "                 5: Input bf16, Weight bf16, Output bf16\n"
         << "                 6: Input tf32, Weight fp32, Output tf32)\n"
         << "arg3: tensor layout (0: Input[G, N, C, Hi, Wi], Weight[G, K, C, Y, X], Output[G, N, "
            "K, Ho, Wo]\n"
         << "                     1: Input[G, N, Hi, Wi, C], Weight[G, K, Y, X, C], Output[G, N, "
            "Ho, Wo, K]\n"
         << "                     2: Input[N, Hi, Wi, G, C], Weight[G, K, Y, X, C], Output[N, Ho, "
            "Wo, G, K]\n"
         << "                     3: Input[N, G, C, Hi, Wi], Weight[G, K, Y, X, C], Output[N, G, "
            "K, Ho, Wo]\n"
         << "                     4: Input[N, G, C, Hi, Wi], Weight[G, K, C, Y, X], Output[N, G, "
            "K, Ho, Wo])\n"
         << "arg4: verification (0: no, 1: yes)\n"
         << "arg5: initialization (0: no init, 1: integer value, 2: decimal value)\n"
         << "arg6: print tensor value (0: no; 1: yes)\n"
         << "arg7: time kernel (0: no, 1: yes)\n"
         << kConvParamHelp
         << " SplitK (-1 for internally computed split-K value, positive value to set k batches "
            "explicitly, or 'all' to test all internal split-K values)\n"
         << std::endl;
      break;
  }
}

// The operation tables of current CK, with its known holes (docs: ck-profiler.md).
bool Implemented(const Problem& p) {
  const int dt = p.data_type, lay = p.layout, nd = p.nd;
  if (nd < 1 || nd > 3) return false;
  switch (p.op) {
    case Op::kFwd:
      if (p.index_type != 0 && p.index_type != 1) return false;
      if (lay < 0 || lay > 3) return false;
      if (nd == 1 && lay > 1) return false;   // 1-D: layouts 0 and 1 only
      if (lay == 2 && nd != 2) return false;  // NGCHW_GKYXC_NGKHW: 2-D only
      if (dt == 0 || dt == 1 || dt == 2) return true;
      if (dt == 3 || dt == 8) return lay <= 1;  // int8, tf32: channels-last layouts
      return false;
    case Op::kBwdData:
      if (lay < 0 || lay > 3) return false;
      if (nd == 1) return false;              // no 1-D at all
      if (nd == 3 && lay == 3) return false;  // the unreachable 3-D layout 3 branch
      if (dt == 0 || dt == 1 || dt == 2) return true;
      if (dt == 3) return lay <= 1;  // tf32
      return false;
    case Op::kBwdWeight:
      if (lay < 0 || lay > 4) return false;
      if (nd == 1 && lay > 1) return false;
      switch (lay) {
        case 0:
          return dt == 0 || dt == 1 || dt == 5;
        case 1:
        case 2:
          return dt == 0 || dt == 1 || dt == 2 || dt == 4 || dt == 5 || dt == 6;
        case 3:
          return dt == 1 || dt == 5;
        case 4:
          return dt == 0 || dt == 1 || dt == 5 || dt == 6;
      }
      return false;
  }
  return false;
}

int Usage(Op op) {
  PrintHelp(op);
  return Exit("usage", 1);
}

// libstdc++'s message for an uncaught exception, then abort: what CK does on a bad number.
[[noreturn]] void OnTerminate() {
  std::cout.flush();
  LogEnd("aborted", -1, SIGABRT);
  std::set_terminate(nullptr);
  __gnu_cxx::__verbose_terminate_handler();
  std::abort();
}

}  // namespace

std::vector<int64_t> Problem::OutputSpatial() const {
  std::vector<int64_t> out;
  for (int i = 0; i < nd; ++i) {
    int64_t span = dilations[i] * (filter[i] - 1) + 1;
    int64_t padded = input[i] + left_pads[i] + right_pads[i];
    out.push_back(strides[i] <= 0 ? 0 : (padded - span) / strides[i] + 1);
  }
  return out;
}

int RunOperation(Op op, const std::vector<std::string>& argv) {
  std::set_terminate(OnTerminate);
  const int argc = static_cast<int>(argv.size());
  const bool fwd = op == Op::kFwd;
  const bool old_bwd_data = op == Op::kBwdData && GetSettings().old_format;
  // Control arguments: fwd has 8 (with index_type), backward 7; then num_dim_spatial's index.
  const int nd_index = fwd ? 9 : 8;
  if (argc < nd_index + 1) return Usage(op);

  Problem p;
  p.op = op;
  int i = 2;
  p.data_type = std::stoi(argv[i++]);
  p.layout = std::stoi(argv[i++]);
  if (fwd) p.index_type = std::stoi(argv[i++]);
  p.verify = std::stoi(argv[i++]);
  p.init = std::stoi(argv[i++]);
  p.log = std::stoi(argv[i++]);
  p.time = std::stoi(argv[i++]);
  p.nd = std::stoi(argv[i++]);
  const int expected_argc = nd_index + 1 + 4 + 6 * p.nd + (fwd || old_bwd_data ? 0 : 1);
  if (argc != expected_argc) return Usage(op);

  // ck::utils::conv::parse_conv_param: G, N, K, C, then six lists of num_dim_spatial values.
  p.G = std::stol(argv[i++]);
  p.N = std::stol(argv[i++]);
  p.K = std::stol(argv[i++]);
  p.C = std::stol(argv[i++]);
  for (auto* list : {&p.filter, &p.input, &p.strides, &p.dilations, &p.left_pads, &p.right_pads}) {
    for (int d = 0; d < p.nd; ++d) list->push_back(std::stol(argv[i++]));
  }
  if (!fwd && !old_bwd_data) {
    p.split_k = argv[i++];
    // bwd_data: std::stoi ("all" throws std::invalid_argument: abort). bwd_weight: "all" or
    // std::stoi.
    if (op == Op::kBwdData || p.split_k != "all") p.split_k = std::to_string(std::stoi(p.split_k));
  }
  for (int k = 2; k < argc; ++k) p.key += argv[k] + " ";
  p.key = std::to_string(static_cast<int>(op)) + ":" + p.key;

  if (!Implemented(p)) {
    std::cout << "this data_type & layout is not implemented" << std::endl;
    return Exit("not_implemented", 1);
  }
  Fault fault = FaultForN(p.N);
  // An env slow-start has already slept, in main().
  if (fault == Fault::kNone && GetSettings().env_fault != Fault::kSlowStart) {
    fault = GetSettings().env_fault;
  }
  const auto& bad = GetSettings().bad_gpus;
  if (std::find(bad.begin(), bad.end(), Pin()) != bad.end()) fault = Fault::kDeviceError;
  return Profile(p, fault);
}

}  // namespace ckemu

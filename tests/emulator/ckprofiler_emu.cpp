// ckprofiler-emu: a faithful stand-in for CK's ckProfiler, for tests, benchmarks and the demo.
// main(), the environment, the invocation log and the help text; the argument checks are in
// emu_args.cpp and the profiling output in emu_profile.cpp.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/emulator/emu.h"

namespace ckemu {
namespace {

constexpr const char* kEmulatorHelp =
    R"HELP(ckprofiler-emu: a stand-in for AMD Composable Kernel's ckProfiler (grouped convolutions).

USAGE
  ckprofiler-emu grouped_conv_fwd|grouped_conv_bwd_data|grouped_conv_bwd_weight ARGS...
  ckProfiler ARGS...                    (a link named ckProfiler: the same)
  profile_grouped_conv_fwd ARGS...      (a link named profile_grouped_conv_<op>: ARGS directly)
  ckprofiler-emu --help                 (this text; real CK has no --help)

It behaves like ckProfiler (docs/ck-profiler.md): CK's exact argument counts (help text and
exit 1 otherwise), std::stoi parsing (a non-number such as "all" for bwd_data aborts with
SIGABRT), the per-operation data_type/layout enums and known holes ("this data_type & layout is
not implemented", exit 1), and CK's output: tensor header lines, one
"Perf: <ms> ms, <TFlops> TFlops, <GB/s> GB/s, <instance>[, SplitK k]" line per supporting
instance, "<instance> does not support this problem" for the others, "\033[36mvalids: N\033[0m"
and the "Best configuration parameters:" block. No arguments: lists the operations. An unknown
operation: "cannot find operation: X" on stderr, exit 1.

Its first stdout line names the process and the GPU it was given:
  ckprofiler-emu: pid 123 uid 1000 gid 1000 HIP_VISIBLE_DEVICES=3
(only the pin variables that are set: HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES,
CUDA_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL).

Instances are deterministic: the same arguments always give the same instances, support and
times. Times come from the problem's FLOPs and bytes (a simulated MI300-class GPU) times a
per-instance factor; TFlops = 2*G*N*K*C*prod(out)*prod(filter)/1e9/ms and
GB/s = (input + weight + output bytes)/1e6/ms, computed in float as CK does. With time=0 the
times print as 0 and TFlops/GB/s as inf, as in CK.

ENVIRONMENT
  CKEMU_TIME_SCALE=F     sleep F x the simulated GPU time (55 runs per instance: 5 warm-up +
                         50 timed; 1 run with time=0). Default 0.1: a typical config (ResNet
                         layer, N=10) takes 5-25 ms; a very large one (N=256, 256 channels,
                         56x56, bwd_weight split_k all) about 1.5 s. 0 = instant.
  CKEMU_FAULT=NAME       inject a fault into every invocation (names below).
  CKEMU_HUGE_BYTES=N     bytes of tensor dump for huge-output (K/M/G suffixes; default 100M).
  CKEMU_SLOW_START_MS=N  delay for slow-start (default 2000).
  CKEMU_FAIL_CODE=N      exit code for fail (default 1).
  CKEMU_CK_VERSION=2024  older CK: no "valids:" line, no "(instance i)", and bwd_data takes
                         no split_k argument (argc one less) and prints no SplitK.
  CKEMU_LOG=PATH         append JSON lines describing each invocation (see LOG).

FAULTS (CKEMU_FAULT=NAME, or per config by the magic batch size N in the problem)
  N=9001  hang          print the header and a few instances, then sleep forever
  N=9002  crash         a few instances, then die by SIGSEGV
  N=9003  fail          a few instances, "HIP error" on stderr, exit CKEMU_FAIL_CODE
  N=9004  unsupported   every instance "does not support this problem"; valids: 0; exit 0
  N=9005  huge-output   CKEMU_HUGE_BYTES of tensor dump (long lines) before normal results
  N=9006  slow-start    sleep CKEMU_SLOW_START_MS before any output, then run normally
  N=9007  abort         a few instances, then abort() (SIGABRT)
  N=9008  verify-fail   normal output, "Error: Incorrect results!" on stderr, exit 1
  N=9009  fork-child    fork a background child (same process group) that keeps
                        stdout/stderr open and sleeps an hour; exit 0 normally
  N=9010  hang-noterm   like hang, but SIGTERM is ignored (needs SIGKILL)
  N=9011  device-error  the problem is printed, then CK's device buffer cannot be had: "HIP
                        runtime error: ..." as an uncaught std::runtime_error (SIGABRT)
CKEMU_BAD_GPUS=LIST (e.g. 0,3): a run pinned (HIP/CUDA_VISIBLE_DEVICES) to one of them is a
device-error, whatever its problem: a broken GPU.
CKEMU_GPU_SLOWDOWN=LIST (e.g. 1=1.5,3=2): a run pinned to GPU 1 takes 1.5 times as long (its
times and TFlops say so): a slower or throttled GPU, for repeats' spread.
Argument checks come first: a magic N only acts on a command line CK would accept.

LOG (CKEMU_LOG=PATH)
Each invocation appends JSON lines with O_APPEND and one write() per line:
  {"event":"start","pid":123,"ppid":100,"pgid":123,"uid":1000,"gid":1000,"cwd":"/x",
   "argv":["ckProfiler","grouped_conv_fwd",...],"env":{"HIP_VISIBLE_DEVICES":"3"},
   "start":1.7e15}
at start, and at the end (also just before dying by crash/abort; not for hang, which is killed
from outside):
  {"event":"end", ...the same fields..., "start":..., "end":..., "outcome":"succeeded",
   "exit_code":0, "signal":0}
start/end: wall clock, microseconds since the epoch (float). outcome: succeeded, unsupported,
failed, verify_failed, not_implemented, usage (help text, exit 1), unknown_operation, listed
(no arguments), help, crashed, aborted.

IMPLEMENTED (anything else prints "this data_type & layout is not implemented", exit 1)
  fwd         data_type 0,1,2 with layouts 0-3; 3 (int8) and 8 (tf32) with layouts 0,1;
              index_type 0 or 1; 1-D only layouts 0,1; layout 2 only 2-D.
  bwd_data    data_type 0,1,2 with layouts 0-3; 3 (tf32) with layouts 0,1; no 1-D;
              no 3-D layout 3.
  bwd_weight  layout 0: data_type 0,1,5; layouts 1,2: 0,1,2,4,5,6; layout 3: 1,5;
              layout 4: 0,1,5,6; 1-D only layouts 0,1.
)HELP";

constexpr const char* kPinVariables[] = {"HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                                         "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"};

struct FaultName {
  Fault fault;
  const char* name;
  int64_t magic_n;
};
constexpr FaultName kFaults[] = {
    {Fault::kHang, "hang", 9001},
    {Fault::kCrash, "crash", 9002},
    {Fault::kFail, "fail", 9003},
    {Fault::kUnsupported, "unsupported", 9004},
    {Fault::kHugeOutput, "huge-output", 9005},
    {Fault::kSlowStart, "slow-start", 9006},
    {Fault::kAbort, "abort", 9007},
    {Fault::kVerifyFail, "verify-fail", 9008},
    {Fault::kForkChild, "fork-child", 9009},
    {Fault::kHangNoTerm, "hang-noterm", 9010},
    {Fault::kDeviceError, "device-error", 9011},
};

Invocation g_invocation;
Settings g_settings;

double NowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint64_t ParseBytes(const char* s, uint64_t dflt) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || v < 0) return dflt;
  switch (*end) {
    case 'k':
    case 'K':
      v *= 1024;
      break;
    case 'm':
    case 'M':
      v *= 1024 * 1024;
      break;
    case 'g':
    case 'G':
      v *= 1024.0 * 1024 * 1024;
      break;
    default:
      break;
  }
  return static_cast<uint64_t>(v);
}

void ReadSettings() {
  Settings& s = g_settings;
  if (const char* v = std::getenv("CKEMU_TIME_SCALE"); v && *v) {
    char* end = nullptr;
    double d = std::strtod(v, &end);
    if (end != v && d >= 0) s.time_scale = d;
  }
  if (const char* v = std::getenv("CKEMU_FAULT"); v && *v) {
    if (!ParseFault(v, &s.env_fault)) {
      std::cerr << "ckprofiler-emu: unknown CKEMU_FAULT \"" << v << "\" (ignored)" << std::endl;
    }
  }
  if (const char* v = std::getenv("CKEMU_HUGE_BYTES"); v && *v) {
    s.huge_bytes = ParseBytes(v, s.huge_bytes);
  }
  if (const char* v = std::getenv("CKEMU_SLOW_START_MS"); v && *v) s.slow_start_ms = std::atoi(v);
  if (const char* v = std::getenv("CKEMU_FAIL_CODE"); v && *v) s.fail_code = std::atoi(v);
  if (const char* v = std::getenv("CKEMU_CK_VERSION"); v && *v) {
    s.old_format = std::string(v) == "2024";
  }
  if (const char* v = std::getenv("CKEMU_LOG"); v && *v) s.log_path = v;
  if (const char* v = std::getenv("CKEMU_GPU_SLOWDOWN"); v && *v) {
    std::string list = v;
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      const std::string item = list.substr(at, comma - at);
      const size_t eq = item.find('=');
      const double factor = eq == std::string::npos ? 0 : std::atof(item.c_str() + eq + 1);
      if (factor > 0) {
        s.gpu_slowdown.emplace_back(item.substr(0, eq), factor);
      } else if (!item.empty()) {
        std::cerr << "ckprofiler-emu: CKEMU_GPU_SLOWDOWN item \"" << item
                  << "\" is not GPU=FACTOR (ignored)" << std::endl;
      }
      at = comma + 1;
    }
  }
  if (const char* v = std::getenv("CKEMU_BAD_GPUS"); v && *v) {
    std::string list = v;
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      if (comma > at) s.bad_gpus.push_back(list.substr(at, comma - at));
      at = comma + 1;
    }
  }
}

nlohmann::ordered_json LogRecord(const char* event) {
  nlohmann::ordered_json j;
  j["event"] = event;
  j["pid"] = getpid();
  j["ppid"] = getppid();
  j["pgid"] = getpgrp();
  j["uid"] = getuid();
  j["gid"] = getgid();
  char cwd[4096];
  j["cwd"] = getcwd(cwd, sizeof cwd) ? cwd : "";
  j["argv"] = g_invocation.argv;
  nlohmann::ordered_json env = nlohmann::ordered_json::object();
  for (const char* name : kPinVariables) {
    if (const char* v = std::getenv(name)) env[name] = v;
  }
  j["env"] = env;
  j["start"] = g_invocation.start_us;
  return j;
}

void AppendLog(const nlohmann::ordered_json& j) {
  if (g_settings.log_path.empty()) return;
  std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  int fd = open(g_settings.log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return;
  ssize_t ignored = write(fd, line.data(), line.size());
  (void)ignored;
  close(fd);
}

void PrintOperations() {
  std::cout << "arg1: tensor operation (grouped_conv_fwd: Grouped Convolution Forward\n"
            << "                        grouped_conv_bwd_data: Grouped Convolution Backward Data\n"
            << "                        grouped_conv_bwd_weight: Grouped Convolution Backward "
               "Weight)"
            << std::endl;
}

bool OpFromName(const std::string& name, Op* op) {
  if (name == "grouped_conv_fwd")
    *op = Op::kFwd;
  else if (name == "grouped_conv_bwd_data")
    *op = Op::kBwdData;
  else if (name == "grouped_conv_bwd_weight")
    *op = Op::kBwdWeight;
  else
    return false;
  return true;
}

int Main(int argc, char** argv) {
  g_invocation.start_us = NowUs();
  for (int i = 0; i < argc; ++i) g_invocation.argv.emplace_back(argv[i]);
  ReadSettings();
  AppendLog(LogRecord("start"));
  if (g_settings.env_fault == Fault::kSlowStart) SleepMs(g_settings.slow_start_ms);

  std::string base = argv[0];
  if (auto slash = base.rfind('/'); slash != std::string::npos) base = base.substr(slash + 1);
  std::vector<std::string> ck_argv(argv, argv + argc);
  Op op = Op::kFwd;
  constexpr std::string_view kPerOpPrefix = "profile_";
  if (base.rfind(kPerOpPrefix, 0) == 0 && OpFromName(base.substr(kPerOpPrefix.size()), &op)) {
    // A per-operation executable: ARGS directly. Give them CK's layout (argv[1] = operation).
    if (argc == 2 && ck_argv[1] == "--help") {
      std::cout << kEmulatorHelp;
      return Exit("help", 0);
    }
    ck_argv.insert(ck_argv.begin() + 1, base.substr(kPerOpPrefix.size()));
    return RunOperation(op, ck_argv);
  }
  if (argc == 1) {
    PrintOperations();
    return Exit("listed", 0);
  }
  if (argc == 2 && ck_argv[1] == "--help") {
    std::cout << kEmulatorHelp;
    return Exit("help", 0);
  }
  if (!OpFromName(ck_argv[1], &op)) {
    std::cerr << "cannot find operation: " << ck_argv[1] << std::endl;
    return Exit("unknown_operation", EXIT_FAILURE);
  }
  return RunOperation(op, ck_argv);
}

}  // namespace

const Settings& GetSettings() { return g_settings; }

std::string Pin() {
  for (const char* pin : {"HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"}) {
    if (const char* gpu = std::getenv(pin)) return gpu;
  }
  return "";
}

double PinSlowdown() {
  const std::string pin = Pin();
  for (const auto& [gpu, factor] : g_settings.gpu_slowdown) {
    if (gpu == pin) return factor;
  }
  return 1.0;
}

const char* FaultName(Fault f) {
  for (const auto& e : kFaults) {
    if (e.fault == f) return e.name;
  }
  return "none";
}

bool ParseFault(const std::string& name, Fault* out) {
  for (const auto& e : kFaults) {
    if (name == e.name) {
      *out = e.fault;
      return true;
    }
  }
  return false;
}

Fault FaultForN(int64_t n) {
  for (const auto& e : kFaults) {
    if (e.magic_n == n) return e.fault;
  }
  return Fault::kNone;
}

void LogEnd(const std::string& outcome, int exit_code, int signal) {
  if (g_settings.log_path.empty()) return;
  auto j = LogRecord("end");
  j["end"] = NowUs();
  j["outcome"] = outcome;
  j["exit_code"] = exit_code;
  j["signal"] = signal;
  AppendLog(j);
}

void DieBySignal(const std::string& outcome, int sig) {
  std::cout.flush();
  std::cerr.flush();
  LogEnd(outcome, -1, sig);
  signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  raise(sig);
  _exit(128 + sig);
}

int Exit(const std::string& outcome, int code) {
  std::cout.flush();
  std::cerr.flush();
  LogEnd(outcome, code, 0);
  return code;
}

void SleepMs(double ms) {
  if (ms <= 0) return;
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
}

std::string HeaderLine() {
  std::string s = "ckprofiler-emu: pid " + std::to_string(getpid()) + " uid " +
                  std::to_string(getuid()) + " gid " + std::to_string(getgid());
  for (const char* name : kPinVariables) {
    if (const char* v = std::getenv(name)) s += std::string(" ") + name + "=" + v;
  }
  return s;
}

}  // namespace ckemu

int main(int argc, char** argv) { return ckemu::Main(argc, argv); }

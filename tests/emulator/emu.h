// ckprofiler-emu internals: a faithful stand-in for CK's ckProfiler grouped-convolution
// operations (docs/ck-profiler.md). See kEmulatorHelp in ckprofiler_emu.cpp for what it
// does; this header only joins its three source files. Single-threaded program.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ckemu {

enum class Op { kFwd, kBwdData, kBwdWeight };

// Injected misbehaviour, chosen by CKEMU_FAULT or by a magic N in the problem.
enum class Fault {
  kNone,
  kHang,         // prints a little, then sleeps forever
  kHangNoTerm,   // same, ignoring SIGTERM
  kCrash,        // SIGSEGV after a few instances
  kFail,         // exit CKEMU_FAIL_CODE (default 1) after a few instances, message on stderr
  kUnsupported,  // no instance supports the problem (valids: 0, exit 0)
  kHugeOutput,   // CKEMU_HUGE_BYTES of tensor dump before the results
  kSlowStart,    // sleeps CKEMU_SLOW_START_MS before printing anything
  kAbort,        // SIGABRT after a few instances
  kVerifyFail,   // "Error: Incorrect results!" on stderr, exit 1
  kForkChild,    // leaves a background child holding stdout/stderr, then exits normally
  kDeviceError,  // the device memory cannot be had: CK's "HIP runtime error", uncaught: SIGABRT
};

// One grouped-convolution problem as ckProfiler parsed it.
struct Problem {
  Op op = Op::kFwd;
  int data_type = 0, layout = 0, index_type = 0;
  int verify = 0, init = 0, log = 0, time = 0, nd = 0;
  int64_t G = 0, N = 0, K = 0, C = 0;
  std::vector<int64_t> filter, input, strides, dilations, left_pads, right_pads;
  std::string split_k;  // backward ops: the last argument as given ("" for older bwd_data)
  std::string key;      // all arguments after the operation, joined: seeds the determinism

  std::vector<int64_t> OutputSpatial() const;
};

// What the process is doing, for the CKEMU_LOG end line.
struct Invocation {
  std::vector<std::string> argv;
  double start_us = 0;
};

// Settings read from the environment once at start.
struct Settings {
  double time_scale = 0.1;             // CKEMU_TIME_SCALE
  Fault env_fault = Fault::kNone;      // CKEMU_FAULT
  uint64_t huge_bytes = 100ull << 20;  // CKEMU_HUGE_BYTES
  int slow_start_ms = 2000;            // CKEMU_SLOW_START_MS
  int fail_code = 1;                   // CKEMU_FAIL_CODE
  bool old_format = false;             // CKEMU_CK_VERSION=2024
  std::string log_path;                // CKEMU_LOG
  std::vector<std::string> bad_gpus;   // CKEMU_BAD_GPUS: pins whose every run is a device error
  // CKEMU_GPU_SLOWDOWN: pins whose times are this many times longer (a slower GPU).
  std::vector<std::pair<std::string, double>> gpu_slowdown;
};

const Settings& GetSettings();
// The pin variable's value of this run (HIP_VISIBLE_DEVICES, else CUDA_VISIBLE_DEVICES); "" if
// neither is set.
std::string Pin();
// The factor CKEMU_GPU_SLOWDOWN gives this run's pin (1 when none).
double PinSlowdown();
const char* FaultName(Fault f);
bool ParseFault(const std::string& name, Fault* out);
// The fault selected by N in the problem (kNone for ordinary N).
Fault FaultForN(int64_t n);

// Appends the invocation's end line to CKEMU_LOG (if set). `outcome` e.g. "succeeded".
void LogEnd(const std::string& outcome, int exit_code, int signal);
// Logs (outcome, signal) then dies by `sig` with default disposition.
[[noreturn]] void DieBySignal(const std::string& outcome, int sig);
// Logs and returns `code`: `return Exit("succeeded", 0);`.
int Exit(const std::string& outcome, int code);
// Sleeps for `ms` milliseconds (fractions allowed; <= 0 returns at once).
void SleepMs(double ms);

// Runs `op` with CK's argv layout: argv[0] = program, argv[1] = operation, argv[2..] = args.
// Returns the exit code (may die by a signal instead, as real CK does).
int RunOperation(Op op, const std::vector<std::string>& argv);

// The header line: "ckprofiler-emu: pid 123 uid 1000 HIP_VISIBLE_DEVICES=3".
std::string HeaderLine();

// Prints the problem's output and results as real CK would; returns the exit code.
int Profile(const Problem& p, Fault fault);

}  // namespace ckemu

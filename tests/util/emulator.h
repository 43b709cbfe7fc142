// The CK emulator's side of the tests: small convolution problems and configs files to give
// it, and the runs it logged (CKEMU_LOG). Test threads only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/ck_config.h"

namespace ckprof::testing {

// A 2-D convolution with a 3x3 filter, stride, dilation and padding 1, one group, input
// spatial x spatial: the small problem the tests run (index_type 0 for fwd; defaults elsewhere).
CkConfig Conv3x3(ConvOp op, int64_t n, int64_t k, int64_t c, int64_t spatial);

// Configs-file text of `n` distinct small fwd problems (K varies, priority_rank 1..n); every
// `every`-th config gets the emulator's fault-selecting batch size `magic_n` (0 = none).
std::string FwdConfigsText(int n, int magic_n = 0, int every = 1, int64_t spatial = 8);

// The emulator's command line (its path first) for a small 2-D fwd problem with batch size
// `n` (the emulator's magic batch sizes inject faults: 9001 hangs after a few instances, ...).
std::vector<std::string> EmulatorArgv(int n = 4);

// One invocation of the emulator, from its CKEMU_LOG (its start and end lines merged).
struct EmuRun {
  int pid = 0, pgid = 0, uid = -1, gid = -1;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // the pin variables it saw (HIP_VISIBLE_DEVICES, ...)
  std::string gpu;                         // HIP_VISIBLE_DEVICES
  double start = 0;                        // microseconds since the epoch
  double end = 0;                          // 0 when it never logged an end (killed)
  std::string outcome;
};

// The runs logged in a CKEMU_LOG file, in the order they started. A run is its pid and start
// time together: pids wrap quickly on a busy machine, so two runs may share a pid.
std::vector<EmuRun> ReadEmuRuns(const std::string& log_path);

// Waits until the log holds at least `n` runs (the emulator writes its start line once it
// runs, a moment after the daemon reports the task running), woken by each write to the log
// (inotify), for at most `timeout_s`; the runs then logged (fewer than `n` on a timeout).
std::vector<EmuRun> WaitForEmuRuns(const std::string& log_path, size_t n, double timeout_s = 30);

}  // namespace ckprof::testing

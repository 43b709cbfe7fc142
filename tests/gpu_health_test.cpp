// Which profiler ends name a device error (DeviceErrorIn): the lines the HIP/HSA and CUDA
// runtimes and CK's hip_check_error print, only for runs that failed or crashed; a kernel's
// own failure or CK's argument-parsing abort is not the GPU's.
#include "daemon/gpu_health.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace ckprof {
namespace {

RunResult Ended(Outcome::Kind kind, const std::string& err, const std::string& out = "") {
  RunResult r;
  r.outcome.kind = kind;
  r.outcome.signal = kind == Outcome::Kind::kCrashed ? SIGABRT : 0;
  r.stderr_capture = err;
  r.stdout_capture = out;
  return r;
}

TEST(GpuHealth, DeviceErrorsAreTheRuntimesLines) {
  using K = Outcome::Kind;
  struct Row {
    K kind;
    std::string err, out, expected;
  } rows[] = {
      {K::kCrashed,
       "terminate called after throwing an instance of 'std::runtime_error'\n  what():  HIP "
       "runtime error: hipErrorNoDevice. device_memory.cpp: 14in function: DeviceMem\n",
       "", "HIP runtime error: hipErrorNoDevice. device_memory.cpp: 14in function: DeviceMem"},
      {K::kCrashed, "",
       "found 12 instances\nMemory access fault by GPU node-2 (Agent handle: "
       "0x55d) on address 0x7f00. Reason: Page not present.\n",
       "Memory access fault by GPU node-2 (Agent handle: 0x55d) on address 0x7f00. Reason: Page "
       "not present."},
      {K::kFailed, "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate\r\n", "",
       "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate"},
      {K::kFailed, "warming up\nCUDA error: no CUDA-capable device is detected\n", "",
       "CUDA error: no CUDA-capable device is detected"},
      // Not the device's: a kernel's failure, a wrong result, CK's "all" abort.
      {K::kFailed, "HIP error: hipErrorIllegalAddress (injected by ckprofiler-emu)\n", "", ""},
      {K::kFailed, "Error: Incorrect results!\n", "", ""},
      {K::kCrashed, "  what():  HIP runtime error: hipErrorOutOfMemory. device_memory.cpp\n", "",
       ""},
      {K::kFailed, "CUDA error: out of memory\n", "", ""},
      {K::kCrashed,
       "terminate called after throwing an instance of 'std::invalid_argument'\n  what():  "
       "stoi\n",
       "", ""},
      // A run that did not fail says nothing of the GPU, whatever it printed.
      {K::kSucceeded, "HIP runtime error: hipErrorNoDevice\n", "", ""},
      {K::kTimedOut, "HIP runtime error: hipErrorNoDevice\n", "", ""},
      {K::kCancelled, "Memory access fault by GPU node-2\n", "", ""},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(DeviceErrorIn(Ended(row.kind, row.err, row.out)), row.expected) << row.err << row.out;
  }
  const std::string longline = "HIP runtime error: " + std::string(400, 'x') + "\n";
  EXPECT_EQ(DeviceErrorIn(Ended(K::kFailed, longline)).size(), 200u);
}

}  // namespace
}  // namespace ckprof

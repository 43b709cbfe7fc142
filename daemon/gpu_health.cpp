#include "daemon/gpu_health.h"

#include <array>
#include <string_view>

namespace ckprof {
namespace {

// What the HIP/HSA and CUDA runtimes (and CK's hip_check_error) print when the device fails.
constexpr std::array<std::string_view, 11> kDeviceErrors = {
    "HIP runtime error",  // CK's hip_check_error: a HIP API call failed
    "hipErrorNoDevice",
    "hipErrorInvalidDevice",
    "hipErrorNotInitialized",
    "hipErrorECCNotCorrectable",
    "no ROCm-capable device",
    "Memory access fault by GPU",  // the HSA runtime's report of a GPU page fault
    "HSA_STATUS_ERROR",
    "GPU Hang",
    "CUDA error",
    "cudaError",
};

// A problem too large for the GPU's memory is the config's, not the GPU's.
constexpr std::array<std::string_view, 3> kConfigErrors = {"OutOfMemory", "out of memory",
                                                           "InvalidValue"};

std::string FindIn(const std::string& text) {
  for (std::string_view needle : kDeviceErrors) {
    const size_t at = text.find(needle);
    if (at == std::string::npos) continue;
    const size_t begin = text.rfind('\n', at);
    const size_t from = begin == std::string::npos ? 0 : begin + 1;
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(from, std::min<size_t>(end - from, 200));
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    // libstdc++'s "  what():  " before an uncaught exception's text says nothing.
    const size_t text = line.find_first_not_of(' ');
    line.erase(0, text == std::string::npos ? line.size() : text);
    if (line.rfind("what():", 0) == 0) line.erase(0, line.find_first_not_of(' ', 7));
    for (std::string_view not_device : kConfigErrors) {
      if (line.find(not_device) != std::string::npos) return "";
    }
    return line;
  }
  return "";
}

}  // namespace

std::string DeviceErrorIn(const RunResult& r) {
  using Kind = Outcome::Kind;
  if (r.outcome.kind != Kind::kFailed && r.outcome.kind != Kind::kCrashed) return "";
  std::string line = FindIn(r.stderr_capture);
  return line.empty() ? FindIn(r.stdout_capture) : line;
}

}  // namespace ckprof

// GpuProbe: what the daemon learns of its GPUs from outside its own processes — which
// processes use each GPU, what each GPU is, and its clocks, temperature and power now.
//
// Two sources: the AMD KFD driver's sysfs (the topology nodes `--gpus auto` reads, the per-process
// entries under kfd/proc, the drm device's pp_dpm_* and hwmon files), every path under a
// configurable root so that tests run against a fake tree; and NVIDIA's `nvidia-smi` queries.
// A GPU is named by the daemon's index for it (as the pin variable numbers it).
//
// Calls block (file reads; nvidia-smi runs for tens of milliseconds): cheap() says whether a
// probe may be asked on the io thread. Thread-safe: the watch's thread and the io thread may
// ask at once.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/protocol.h"
#include "common/result.h"

namespace ckprof {

// A process seen on a GPU: who it is, its process group, and whether it is in one of this
// daemon's runs' cgroups (one of our profilers or a child of one, wherever its process group).
struct ProbedProcess {
  GpuUser user;
  int64_t pgid = 0;
  bool ours = false;
};

class GpuProbe {
 public:
  virtual ~GpuProbe() = default;
  // True when a call costs no more than a few file reads (the io thread may make it).
  virtual bool cheap() const = 0;
  // "AMD KFD under /", "nvidia-smi": for the log.
  virtual std::string Describe() const = 0;
  // The live processes using each GPU now, by GPU index (GPUs nobody uses may be absent). An
  // error when the source cannot be read at all.
  virtual Result<std::map<int, std::vector<ProbedProcess>>> Processes() = 0;
  // What each GPU is: name, UUID or serial, architecture, driver; before/after left empty.
  virtual std::map<int, GpuState> Identities() = 0;
  // Each GPU's clocks, temperature and power now (a value it does not give: nullopt).
  virtual std::map<int, GpuReading> Readings() = 0;
  // One GPU's (nullopt: the probe does not know it).
  virtual std::optional<GpuReading> ReadingOf(int gpu) {
    auto all = Readings();
    auto it = all.find(gpu);
    return it == all.end() ? std::nullopt : std::optional<GpuReading>(it->second);
  }
};

// The AMD probe over the KFD topology under `sysfs_root` ("/" normally): GPU index i is the
// i-th topology node with SIMDs, in node order. `runs_cgroup` is the cgroup path under which
// this daemon's runs are (TaskCgroups::runs_path; "": no run has a cgroup, nothing is ours).
std::unique_ptr<GpuProbe> MakeKfdProbe(std::string sysfs_root, std::string runs_cgroup);

// The NVIDIA probe: runs `nvidia_smi` (a path, or a name looked up in PATH); GPU index i is
// nvidia-smi's index i (the daemon sets CUDA_DEVICE_ORDER=PCI_BUS_ID for its profilers, so that
// CUDA numbers them the same way).
std::unique_ptr<GpuProbe> MakeNvidiaSmiProbe(std::string nvidia_smi, std::string runs_cgroup);

// The probe for this host, or nullptr: the KFD probe when the topology under `sysfs_root`
// lists GPUs, else the nvidia-smi probe when `pin_env` pins with CUDA_VISIBLE_DEVICES and
// nvidia-smi answers. `note` says which, or why none.
std::unique_ptr<GpuProbe> MakeGpuProbe(const std::string& sysfs_root,
                                       const std::vector<std::string>& pin_env,
                                       const std::string& nvidia_smi,
                                       const std::string& runs_cgroup, std::string* note);

// The GPUs the KFD topology under `sysfs_root` lists (0..n-1), as `--gpus auto` finds them.
int CountKfdGpus(const std::string& sysfs_root);

// "gfx942" for KFD's gfx_target_version 90402 (major * 10000 + minor * 100 + stepping, the
// last two as hexadecimal digits: 90010 is gfx90a); "" for 0.
std::string GfxArchName(long long gfx_target_version);

// The clock marked current ('*') in a pp_dpm_sclk / pp_dpm_mclk text ("1: 2100Mhz *"), in MHz.
std::optional<double> CurrentDpmClock(const std::string& text);

// Runs argv (no shell), stdin from /dev/null, and returns its stdout; an error when it cannot
// start, exits non-zero (with the start of its output) or runs past `timeout_s`.
Result<std::string> RunAndCapture(const std::vector<std::string>& argv, double timeout_s);

}  // namespace ckprof

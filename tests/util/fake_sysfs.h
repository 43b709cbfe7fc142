// A fake sysfs tree for the GPU watch (daemon/gpu_probe.h), under a test's directory: the KFD
// topology (one CPU node, then N GPU nodes of gfx942 with gpu_id 1000+i and render minor
// 128+i), the per-process entries of kfd/proc, and each GPU's drm device with its pp_dpm
// clocks, hwmon temperature and power, product name and serial. Test threads only.
#pragma once

#include <sys/types.h>

#include <string>

namespace ckprof::testing {

class FakeSysfs {
 public:
  // Builds the tree under `root` (created).
  FakeSysfs(std::string root, int gpus);
  const std::string& root() const { return root_; }

  // `pid` uses GPU `gpu`: a vram_<gpu_id> entry, or (by_queue) a queue whose gpuid is it.
  void UseGpu(pid_t pid, int gpu, bool by_queue = false);
  // `pid` uses no GPU any more (its kfd/proc entry goes).
  void Forget(pid_t pid);
  // The current sclk and mclk, in MHz (the level marked '*'), the edge temperature (°C) and
  // the average power (W). A negative value removes the file: the reading is not available.
  void SetReadings(int gpu, int sclk_mhz, int mclk_mhz, double temperature_c, double power_w);

 private:
  std::string Device(int gpu) const;
  std::string root_;
};

}  // namespace ckprof::testing

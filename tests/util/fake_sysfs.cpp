#include "tests/util/fake_sysfs.h"

#include <filesystem>
#include <string>

#include "tests/util/files.h"

namespace ckprof::testing {
namespace fs = std::filesystem;

FakeSysfs::FakeSysfs(std::string root, int gpus) : root_(std::move(root)) {
  const std::string nodes = root_ + "/sys/class/kfd/kfd/topology/nodes";
  fs::create_directories(nodes + "/0");
  WriteFile(nodes + "/0/gpu_id", "0\n");
  WriteFile(nodes + "/0/properties", "cpu_cores_count 64\nsimd_count 0\n");
  for (int g = 0; g < gpus; ++g) {
    const std::string dir = nodes + "/" + std::to_string(g + 1);
    fs::create_directories(dir);
    WriteFile(dir + "/gpu_id", std::to_string(1000 + g) + "\n");
    WriteFile(dir + "/properties", "cpu_cores_count 0\nsimd_count 1216\ndrm_render_minor " +
                                       std::to_string(128 + g) + "\ngfx_target_version 90402\n");
    const std::string dev = Device(g);
    fs::create_directories(dev + "/hwmon/hwmon" + std::to_string(g));
    WriteFile(dev + "/product_name", "AMD Instinct MI300X\n");
    WriteFile(dev + "/unique_id", "serial-" + std::to_string(g) + "\n");
    SetReadings(g, 2100, 1300, 45.0, 150.0);
  }
  fs::create_directories(root_ + "/sys/class/kfd/kfd/proc");
  fs::create_directories(root_ + "/sys/module/amdgpu");
  WriteFile(root_ + "/sys/module/amdgpu/version", "6.8.5\n");
}

std::string FakeSysfs::Device(int gpu) const {
  return root_ + "/sys/class/drm/renderD" + std::to_string(128 + gpu) + "/device";
}

void FakeSysfs::UseGpu(pid_t pid, int gpu, bool by_queue) {
  const std::string dir = root_ + "/sys/class/kfd/kfd/proc/" + std::to_string(pid);
  fs::create_directories(dir);
  WriteFile(dir + "/pasid", "32769\n");
  if (by_queue) {
    fs::create_directories(dir + "/queues/" + std::to_string(gpu));
    WriteFile(dir + "/queues/" + std::to_string(gpu) + "/gpuid", std::to_string(1000 + gpu));
  } else {
    WriteFile(dir + "/vram_" + std::to_string(1000 + gpu), "268435456\n");
  }
}

void FakeSysfs::Forget(pid_t pid) {
  fs::remove_all(root_ + "/sys/class/kfd/kfd/proc/" + std::to_string(pid));
}

void FakeSysfs::SetReadings(int gpu, int sclk_mhz, int mclk_mhz, double temperature_c,
                            double power_w) {
  const std::string dev = Device(gpu);
  const std::string hw = dev + "/hwmon/hwmon" + std::to_string(gpu);
  auto dpm = [](int current) {
    std::string text;
    const int levels[] = {500, current, current + 100};
    for (int i = 0; i < 3; ++i) {
      text += std::to_string(i) + ": " + std::to_string(levels[i]) + "Mhz" + (i == 1 ? " *" : "") +
              "\n";
    }
    return text;
  };
  auto put = [](const std::string& path, bool present, const std::string& text) {
    std::error_code ec;
    if (present) {
      WriteFile(path, text);
    } else {
      fs::remove(path, ec);
    }
  };
  put(dev + "/pp_dpm_sclk", sclk_mhz >= 0, dpm(sclk_mhz));
  put(dev + "/pp_dpm_mclk", mclk_mhz >= 0, dpm(mclk_mhz));
  put(dev + "/gpu_busy_percent", sclk_mhz >= 0, "42\n");
  put(hw + "/temp1_input", temperature_c >= 0,
      std::to_string(static_cast<long long>(temperature_c * 1000)) + "\n");
  put(hw + "/power1_average", power_w >= 0,
      std::to_string(static_cast<long long>(power_w * 1e6)) + "\n");
}

}  // namespace ckprof::testing

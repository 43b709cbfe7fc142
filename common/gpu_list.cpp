#include "common/gpu_list.h"

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace ckprof {

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') out.emplace_back(e->d_name);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::vector<int>> ParseGpuList(const std::string& text) {
  if (text == "auto") {
    std::string desc;
    return DetectGpus(&desc);
  }
  std::set<int> gpus;
  static const std::regex item(R"(\s*(\d{1,4})(?:\s*-\s*(\d{1,4}))?\s*)");
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    std::smatch m;
    if (!std::regex_match(part, m, item)) {
      return MakeError("GPU list \"" + text +
                       "\" is not valid: use \"auto\", \"0,1,2\" or \"0-7\"");
    }
    int lo = std::stoi(m[1]), hi = m[2].matched ? std::stoi(m[2]) : lo;
    if (hi < lo || hi > 1023) return MakeError("GPU range \"" + part + "\" is not valid");
    for (int g = lo; g <= hi; ++g) gpus.insert(g);
  }
  if (gpus.empty()) return MakeError("GPU list is empty");
  return std::vector<int>(gpus.begin(), gpus.end());
}

std::vector<int> DetectGpus(std::string* description, const std::string& sysfs_root) {
  // AMD: KFD topology nodes with SIMD units are GPUs, numbered as HIP_VISIBLE_DEVICES sees them.
  int amd = 0;
  const std::string root =
      sysfs_root.empty() || sysfs_root == "/"
          ? ""
          : (sysfs_root.back() == '/' ? sysfs_root.substr(0, sysfs_root.size() - 1) : sysfs_root);
  const std::string kfd = root + "/sys/class/kfd/kfd/topology/nodes";
  for (const auto& node : ListDir(kfd)) {
    std::ifstream props(kfd + "/" + node + "/properties");
    std::string key;
    long long value = 0;
    while (props >> key >> value) {
      if (key == "simd_count" && value > 0) ++amd;
    }
  }
  std::string where = kfd;
  if (amd == 0) {
    for (const auto& e : ListDir("/dev/dri")) {
      if (e.rfind("renderD", 0) == 0) ++amd;
    }
    where = "/dev/dri render nodes";
  }
  std::vector<int> out;
  if (amd > 0) {
    for (int i = 0; i < amd; ++i) out.push_back(i);
    *description = std::to_string(amd) + " AMD GPU(s) from " + where;
    return out;
  }
  int nvidia = static_cast<int>(ListDir("/proc/driver/nvidia/gpus").size());
  where = "/proc/driver/nvidia/gpus";
  if (nvidia == 0) {
    static const std::regex dev(R"(nvidia\d+)");
    for (const auto& e : ListDir("/dev")) {
      if (std::regex_match(e, dev)) ++nvidia;
    }
    where = "/dev/nvidiaN";
  }
  for (int i = 0; i < nvidia; ++i) out.push_back(i);
  *description = nvidia ? std::to_string(nvidia) + " NVIDIA GPU(s) from " + where
                        : "no GPU found (looked at /sys/class/kfd, /dev/dri, "
                          "/proc/driver/nvidia/gpus and /dev/nvidiaN)";
  return out;
}

}  // namespace ckprof

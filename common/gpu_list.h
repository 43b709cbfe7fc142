// GPU lists: parsing "0,1,3" / "0-7" / "auto", and finding this machine's GPUs (AMD through
// the KFD topology or render nodes, NVIDIA through its driver's /proc entries). Reads sysfs and
// /dev only; plain functions, any thread.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace ckprof {

// "0,1,3" / "0-7" / "auto" -> GPU indexes. "auto" asks DetectGpus.
Result<std::vector<int>> ParseGpuList(const std::string& text);

// GPUs of this machine: AMD (KFD topology nodes with SIMDs, else /dev/dri/renderD*) or NVIDIA
// (/proc/driver/nvidia/gpus, else /dev/nvidiaN). `description` says what was found where.
// `sysfs_root` prefixes the KFD topology's path (a fake tree in tests; the daemon's sysfs_root).
std::vector<int> DetectGpus(std::string* description, const std::string& sysfs_root = "/");

// The names in a directory but "." entries and hidden ones, sorted; none when it cannot be read.
std::vector<std::string> ListDir(const std::string& dir);

}  // namespace ckprof

// GpuWatch: asks a GpuProbe, on a thread of its own (a probe may block: nvidia-smi), which
// processes use each GPU and how each GPU is, every `poll` while it is active, or at once when
// asked, and hands each snapshot to `on_snapshot` on the io thread.
//
// Construct, call and destroy on the io thread. The destructor stops the thread (waiting for a
// probe call in progress) and drops a snapshot not yet delivered.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "daemon/gpu_probe.h"

namespace ckprof {

// What one probe call saw.
struct GpuSnapshot {
  std::map<int, std::vector<ProbedProcess>> processes;  // by GPU index
  std::map<int, GpuReading> readings;
  std::string error;  // why the processes could not be read ("" = they were)
  std::chrono::steady_clock::time_point taken;
};

class GpuWatch {
 public:
  GpuWatch(asio::any_io_executor io, std::unique_ptr<GpuProbe> probe,
           std::chrono::milliseconds poll, std::function<void(GpuSnapshot)> on_snapshot);
  ~GpuWatch();
  GpuWatch(const GpuWatch&) = delete;
  GpuWatch& operator=(const GpuWatch&) = delete;

  // Polls every `poll` while active (tasks run, or a GPU waits for a foreign process to leave);
  // an idle daemon runs no probe.
  void SetActive(bool active);
  // One snapshot as soon as possible (the current call's, if one is under way).
  void PollNow();
  GpuProbe& probe() { return *probe_; }

 private:
  void Loop();

  asio::any_io_executor io_;
  std::unique_ptr<GpuProbe> probe_;
  std::chrono::milliseconds poll_;
  std::function<void(GpuSnapshot)> on_snapshot_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // io thread only
  std::mutex mu_;
  std::condition_variable cv_;
  bool active_ = false, poll_now_ = false, stop_ = false;
  std::thread thread_;
};

}  // namespace ckprof
